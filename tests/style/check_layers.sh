#!/usr/bin/env bash
# Fails, naming file:line, when a tracked C file includes a header of a higher layer. The layers,
# top to bottom (an include may point down or stay level, never up):
#   4 cli/                        the commands and main()
#   3 runner/, stages/kinds/      the runtime, and the stage kinds it calls through its seam
#   2 stages/<engine>/            formats, tokenizer, model, data, kernels, quant, metrics, report
#   1 util/                       what every layer may use
# tests/ and tools/ sit outside the layers: they may include anything.
# Within layer 2 the engines include one another, but never in a circle: it also fails, naming one
# include per edge, when the engines' include graph (an edge A -> B for each file of stages/A/
# including a header of stages/B/) has a cycle.
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
# The engine of a path under stages/ (its first folder), nothing for a kind or a file elsewhere.
engine() {
  case "$1" in
    stages/kinds/*) ;;
    stages/*/*) echo "$1" | cut -d/ -f2 ;;
  esac
}
bad=0
checked=0
edges="" # one line per include between engines: FROM TO file:line
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
    from_engine=$(engine "$f")
    to_engine=$(engine "$header")
    if [ -n "$from_engine" ] && [ -n "$to_engine" ] && [ "$from_engine" != "$to_engine" ]; then
      edges+="$from_engine $to_engine $f:$line"$'\n'
    fi
  done < <(grep -n '^#include "' "$f" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
echo "$checked includes checked, $bad point up"
# Depth-first search over the engine graph; a back edge closes a cycle, printed edge by edge
# with the first include that makes each edge.
cycles=$(printf '%s' "$edges" | awk '
  NF == 3 {
    key = $1 SUBSEP $2
    if (!(key in where)) { where[key] = $3; next_of[$1] = next_of[$1] " " $2; nodes[$1]; nodes[$2] }
  }
  function visit(n,    i, k, m, targets, c) {
    state[n] = 1; stack[++depth] = n
    k = split(next_of[n], targets, " ")
    for (i = 1; i <= k; i++) {
      m = targets[i]
      if (state[m] == 1) {
        for (c = depth; stack[c] != m; c--) ;
        line = ""
        for (; c <= depth; c++) {
          to = c < depth ? stack[c + 1] : m
          line = line "  " stack[c] " -> " to " (" where[stack[c], to] ")\n"
        }
        printf "include cycle between engines:\n%s", line
        found++
      } else if (state[m] == 0) visit(m)
    }
    depth--; state[n] = 2
  }
  END { for (n in nodes) if (state[n] == 0) visit(n) }')
if [ -n "$cycles" ]; then
  printf '%s\n' "$cycles"
  bad=$((bad + 1))
fi
echo "$(printf '%s' "$edges" | awk 'NF == 3 { e[$1 " -> " $2] } END { print length(e) }') engine edges, $(printf '%s' "$cycles" | grep -c '^include cycle') cycles"
[ "$checked" -gt 0 ] && [ "$bad" -eq 0 ]
