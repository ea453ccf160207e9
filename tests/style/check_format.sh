#!/usr/bin/env bash
# Fails, listing the files, when a tracked .c or .h file differs from what clang-format makes of it.
set -u
clang_format=$1
bad=0
while IFS= read -r f; do
  if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=$((bad + 1))
  fi
done < <(git ls-files '*.c' '*.h')
echo "$bad files not formatted"
[ "$bad" -eq 0 ]
