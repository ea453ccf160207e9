#!/bin/bash
# Stages use the mesh: under mpirun, a mesh with count_calls makes every rank log the collectives
# called on each of its groups, and the counts show that the dataset talks to the world group
# (rank 0's broadcast of the corpus) and the aggregate to the dp group only, node-local then
# cross-node; that dp sizes give the same perplexity; that a forward or aggregate on another
# mesh than its inputs' is refused at validation (exit 2, file:line:col); that OMP_NUM_THREADS
# sets the forward's threads when the recipe does not; that with tp = 2 both ranks of a tp group
# score every window of their dp rank together (the forward's collectives on tp only), give the
# same perplexity for dp 1 and 2 bit for bit and within 1e-5 of tp = 1, and that a tp the model's
# KV heads cannot take is refused with the numbers (exit 2); the same for cp = 2 (the fables'
# short last windows computed whole) and dp 1 x tp 2 x cp 2, and a cp too large for the windows
# refused at validation; precisions ggml and bf16 on a Q4_0 model under tp 2 the same for dp 1
# and 2.
# Usage: stages_mesh.sh MPIRUN (EVALMESH_BIN names the binary, EVALMESH_SOURCE_DIR the sources).
set -u
MPIRUN=$1
# LeakSanitizer's exit-time tracer sometimes crashes (signal 11) in oversubscribed OpenMPI jobs
# after the run finished (as in tests/stages/eval_helpers.py); leaks are checked by the
# single-process tests of the same code.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
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
# the exact token_ppl (17 digits) from the aggregate's debug line
exact_ppl() { grep -o "ppl.token_ppl = [0-9.e+-]*" "$T/out" | head -1 | cut -d' ' -f3; }

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
has "scored tokens/s, 1 threads, precision exact, kernel "
OMP_NUM_THREADS=3 expect 0 "$E" run "$T/omp.yaml"
has "scored tokens/s, 3 threads, precision exact, kernel "
OMP_NUM_THREADS=3 expect 0 "$E" run "$T/r.yaml"
has "scored tokens/s, 1 threads, precision exact, kernel "

# Tensor parallelism through the stages: dp 1 x tp 2 on 2 ranks, dp 2 x tp 2 on 4.
expect 0 "$E" run "$T/r.yaml" --log-level debug
ppl1=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 2 "$E" run "$T/r.yaml" stages.grid.tp=2 --log-level debug
# 16 windows of 2 layers: 2 gathered partial sums per layer and 2 gathers of the head's tiles
has "[r1] forward ppl: 16 windows, 4096 processed and 3649 scored tokens"
has "[r0] mesh collectives: world 3, node 0, cross 0, dp 3, dp_node 4, dp_cross 2, tp 96, cp 0"
has "[r1] mesh collectives: world 3, node 0, cross 0, dp 3, dp_node 4, dp_cross 2, tp 96, cp 0"
ppl_tp=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/r.yaml" stages.grid.tp=2 --log-level debug
has "[r3] forward ppl: 8 windows, 2048 processed and 1712 scored tokens"
[ "$(exact_ppl)" = "$ppl_tp" ] || fail "tp 2: dp 2 gives $(exact_ppl), dp 1 gives $ppl_tp"
python3 -c "import sys; a, b = float('$ppl1'), float('$ppl_tp'); sys.exit(abs(a - b) > 1e-5 * a)" \
    || fail "tp 2 perplexity $ppl_tp is not within 1e-5 of tp 1's $ppl1"
# A tp the model's heads cannot take is refused before anything runs, at the override's place
# (every rank says it; mpirun may stop the others before they print), and by validate alone.
expect 2 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/r.yaml" stages.grid.tp=4
has "<command line>:1:1: stage 'grid': tp = 4 does not divide the 2 KV heads of model $S/recipes/data/demo-model.gguf"
"$E" validate "$T/r.yaml" stages.grid.tp=4 stages.grid.dp=1 > "$T/out" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "validate with tp 4: exit $rc, expected 2"
has "<command line>:1:1: stage 'grid': tp = 4 does not divide the 2 KV heads of model $S/recipes/data/demo-model.gguf"
expect 2 "$E" run "$T/r.yaml" stages.ppl.device=gpu9
has "<command line>:1:1: stage 'ppl': device 'gpu9' is not a forward backend of this build (cpu cuda)"

# Precision ggml on a Q4_0 copy of the demo model (the quantize stage): not exact's perplexity;
# dp 1 x tp 2 and dp 2 x tp 2 the same bit for bit, and within 1e-5 of tp 1 on this model (the
# 8-bit rounding of the next layers can turn tp's last-bit changes into whole quanta: on random
# models the difference reaches 1e-4).
cat > "$T/q.yaml" << YAML
name: stagesmesh-ggml
stages:
  grid: {kind: mesh, dp: auto}
  model: {kind: model, path: $S/recipes/data/demo-model.gguf}
  q4: {kind: quantize, model: model, scheme: Q4_0}
  fables: {kind: dataset, tokenizer: model, mesh: grid, path: $S/recipes/data/demo.txt, split: blank_line, protocol: rolling, max_length: 256}
  ppl: {kind: forward, model: q4, data: fables, mesh: grid, threads: 1, precision: ggml}
  metrics: {kind: aggregate, inputs: [ppl], mesh: grid, print_estimate: true}
YAML
expect 0 "$E" run "$T/q.yaml" --log-level debug
has "scored tokens/s, 1 threads, precision ggml, kernel "
ggml1=$(exact_ppl)
expect 0 "$E" run "$T/q.yaml" stages.ppl.precision=exact --log-level debug
q4_exact=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 2 "$E" run "$T/q.yaml" stages.grid.tp=2 --log-level debug
ggml_tp=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/q.yaml" stages.grid.tp=2 --log-level debug
[ "$(exact_ppl)" = "$ggml_tp" ] || fail "ggml tp 2: dp 2 gives $(exact_ppl), dp 1 gives $ggml_tp"
python3 -c "import sys; a, b = float('$ggml1'), float('$ggml_tp'); sys.exit(abs(a - b) > 1e-5 * a)" \
    || fail "ggml tp 2 perplexity $ggml_tp is not within 1e-5 of tp 1's $ggml1"
python3 -c "import sys; a, b = float('$ggml1'), float('$q4_exact'); sys.exit(abs(a - b) < 1e-4 * a)" \
    || fail "ggml perplexity $ggml1 is hardly exact's $q4_exact: no rounding happened"
# ... and precision bf16 the same way (its weights rounded to BF16 from the Q4_0 values)
expect 0 "$E" run "$T/q.yaml" stages.ppl.precision=bf16 --log-level debug
has "scored tokens/s, 1 threads, precision bf16, kernel "
bf1=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 2 "$E" run "$T/q.yaml" stages.grid.tp=2 stages.ppl.precision=bf16 --log-level debug
bf_tp=$(exact_ppl)
expect 0 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/q.yaml" stages.grid.tp=2 stages.ppl.precision=bf16 --log-level debug
[ "$(exact_ppl)" = "$bf_tp" ] || fail "bf16 tp 2: dp 2 gives $(exact_ppl), dp 1 gives $bf_tp"
python3 -c "import sys; a, b = float('$bf1'), float('$bf_tp'); sys.exit(abs(a - b) > 1e-5 * a)" \
    || fail "bf16 tp 2 perplexity $bf_tp is not within 1e-5 of tp 1's $bf1"
python3 -c "import sys; a, b = float('$bf1'), float('$q4_exact'); sys.exit(abs(a - b) < 1e-4 * a)" \
    || fail "bf16 perplexity $bf1 is hardly exact's $q4_exact: no rounding happened"

# Context parallelism through the stages: cp 2 on 2 ranks, dp 2 x cp 2 and tp 2 x cp 2 on 4.
expect 0 timeout 120 "$MPIRUN" -np 2 "$E" run "$T/r.yaml" stages.grid.cp=2 --log-level debug
has "[r1] forward ppl: 16 windows, 4096 processed and 3649 scored tokens"
ppl_cp=$(exact_ppl)
grep -qF "[r0] mesh collectives: world 3, node 0, cross 0, dp 3, dp_node 4, dp_cross 2, tp 0, cp " "$T/out" \
    || fail "cp 2: the forward called collectives outside the cp group"
grep -q "\[r0\] mesh collectives: .* cp 0$" "$T/out" && fail "cp 2: no collective on the cp group"
expect 0 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/r.yaml" stages.grid.cp=2 --log-level debug
[ "$(exact_ppl)" = "$ppl_cp" ] || fail "cp 2: dp 2 gives $(exact_ppl), dp 1 gives $ppl_cp"
python3 -c "import sys; a, b = float('$ppl1'), float('$ppl_cp'); sys.exit(abs(a - b) > 1e-5 * a)" \
    || fail "cp 2 perplexity $ppl_cp is not within 1e-5 of tp 1's $ppl1"
expect 0 timeout 120 "$MPIRUN" -np 4 "$E" run "$T/r.yaml" stages.grid.cp=2 stages.grid.tp=2 --log-level debug
ppl_tpcp=$(exact_ppl)
python3 -c "import sys; a, b = float('$ppl1'), float('$ppl_tpcp'); sys.exit(abs(a - b) > 1e-5 * a)" \
    || fail "tp 2 x cp 2 perplexity $ppl_tpcp is not within 1e-5 of tp 1's $ppl1"
expect 2 timeout 60 "$MPIRUN" -np 4 "$E" run "$T/r.yaml" stages.fables.max_length=6 stages.grid.cp=4
has "stage 'ppl': mesh 'grid' has cp = 4, but dataset 'fables' makes windows of 6 tokens (max_length), fewer than the 2 x cp = 8 blocks context parallelism cuts a window into"

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "all $n runs of the stages-use-the-mesh checks passed"
