#!/bin/bash
# Stages use the mesh: under mpirun, a mesh with count_calls makes every rank log the collectives
# called on each of its groups, and the counts show that the dataset talks to the world group
# (rank 0's broadcast of the corpus) and the aggregate to the dp group only, node-local then
# cross-node; that dp sizes give the same perplexity; that a forward or aggregate on another
# mesh than its inputs' is refused at validation (exit 2, file:line:col); that OMP_NUM_THREADS
# sets the forward's threads when the recipe does not.
# Usage: stages_mesh.sh MPIRUN (EVALMESH_BIN names the binary, EVALMESH_SOURCE_DIR the sources).
set -u
MPIRUN=$1
E=${EVALMESH_BIN:?EVALMESH_BIN is not set}
S=${EVALMESH_SOURCE_DIR:?EVALMESH_SOURCE_DIR is not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
n=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# recipe FILE [FORWARD-OPTIONS] [DATASET-MESH] [AGGREGATE-MESH]: the demo model on the fables.
recipe() {
    cat > "$1" << YAML
name: stagesmesh
stages:
  grid: {kind: mesh, dp: auto, count_calls: true}
  model: {kind: model, path: $S/recipes/data/demo-model.gguf}
  fables: {kind: dataset, tokenizer: model, ${3-mesh: grid, }path: $S/recipes/data/demo.txt, split: blank_line, protocol: rolling, max_length: 256}
  ppl: {kind: forward, model: model, data: fables, mesh: grid${2-, threads: 1}}
  metrics: {kind: aggregate, inputs: [ppl], ${4-mesh: grid, }print_estimate: true}
YAML
}
# expect STATUS COMMAND...: runs COMMAND into $T/out and checks its exit status.
expect() {
    local want=$1
    shift
    n=$((n + 1))
    "$@" --run-dir "$T/run$n" > "$T/out" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$T/out"; fail "$*: exit $rc, expected $want"; }
}
has() { grep -qF -- "$1" "$T/out" || { cat "$T/out"; fail "no '$1' in the output"; }; }
ppl_of() { grep -o "Final estimate: PPL = .*" "$T/out"; }

recipe "$T/r.yaml"
expect 0 timeout 120 "$MPIRUN" -np 2 "$E" run "$T/r.yaml"
# dataset: 3 world broadcasts (header, tokens, documents). aggregate: 2 hierarchical sums (each a
# dp_node all-reduce, a dp_cross all-reduce on the node leader, a dp_node broadcast) and 3 dp
# all-gathers (rank work, window counts, window NLLs). Nothing on tp, cp or the world's node and
# cross groups. One rank alone broadcasts nothing.
has "[r0] mesh collectives: world 3, node 0, cross 0, dp 3, dp_node 4, dp_cross 2, tp 0, cp 0"
has "[r1] mesh collectives: world 3, node 0, cross 0, dp 3, dp_node 4, dp_cross 0, tp 0, cp 0"
has "[r1] forward ppl: 8 windows, 2048 processed and 1712 scored tokens"
ppl2=$(ppl_of)
expect 0 "$E" run "$T/r.yaml"
has "mesh collectives: world 0, node 0, cross 0, dp 3, dp_node 4, dp_cross 2, tp 0, cp 0"
[ "$(ppl_of)" = "$ppl2" ] || fail "1 rank: '$(ppl_of)', 2 ranks: '$ppl2'"
expect 0 timeout 120 "$MPIRUN" -np 3 "$E" run "$T/r.yaml"
[ "$(ppl_of)" = "$ppl2" ] || fail "3 ranks: '$(ppl_of)', 2 ranks: '$ppl2'"

# A dataset on the default mesh under a forward on `grid`; an aggregate on the default mesh over
# a forward on `grid`: refused before anything runs.
recipe "$T/bad1.yaml" ", threads: 1" ""
expect 2 timeout 60 "$MPIRUN" -np 2 "$E" run "$T/bad1.yaml"
has "bad1.yaml:6:58: stage 'ppl': runs on grid, but dataset 'fables' split its windows over the default world mesh (give both the same \`mesh:\`)"
recipe "$T/bad2.yaml" ", threads: 1" "mesh: grid, " ""
expect 2 "$E" run "$T/bad2.yaml"
has "bad2.yaml:7:38: stage 'metrics': reduces over the default world mesh, but its input 'ppl' ran on grid (name the same mesh stage in both)"

# OMP_NUM_THREADS sets the threads when the recipe does not; the option wins over it.
recipe "$T/omp.yaml" ""
OMP_NUM_THREADS=1 expect 0 "$E" run "$T/omp.yaml"
has "scored tokens/s, 1 threads)"
OMP_NUM_THREADS=3 expect 0 "$E" run "$T/omp.yaml"
has "scored tokens/s, 3 threads)"
OMP_NUM_THREADS=3 expect 0 "$E" run "$T/r.yaml"
has "scored tokens/s, 1 threads)"

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "all $n runs of the stages-use-the-mesh checks passed"
