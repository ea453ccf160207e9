#!/usr/bin/env bash
# Fails, naming file:line, when a tracked C file includes a header of a higher layer. The layers,
# top to bottom (an include may point down or stay level, never up):
#   4 cli/                        the commands and main()
#   3 runner/, stages/kinds/      the runtime, and the stage kinds it calls through its seam
#   2 stages/<engine>/            model, tokenizer, data, kernels, metrics, report
#   1 util/                       what every layer may use
# tests/ and tools/ sit outside the layers: they may include anything.
set -u
layer() {
  case "$1" in
    cli/*) echo 4 ;;
    runner/*) echo 3 ;;
    stages/kinds/*) echo 3 ;;
    stages/*/*) echo 2 ;;
    util/*) echo 1 ;;
    *) echo 0 ;;
  esac
}
bad=0
checked=0
while IFS= read -r f; do
  from=$(layer "$f")
  [ "$from" -eq 0 ] && continue
  while IFS=: read -r line header; do
    to=$(layer "$header")
    checked=$((checked + 1))
    if [ "$to" -gt "$from" ]; then
      echo "$f:$line: includes \"$header\" from a higher layer ($to > $from)"
      bad=$((bad + 1))
    fi
  done < <(grep -n '^#include "' "$f" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
echo "$checked includes checked, $bad point up"
[ "$checked" -gt 0 ] && [ "$bad" -eq 0 ]
