#!/bin/bash
# The `mesh` stage through `evalmesh run` and `evalmesh validate`: shapes resolved on 4 real ranks
# under mpirun (tp innermost), and every bad input with its exact message and exit status:
# impossible shapes, two autos, zero and negative sizes, backends this build, machine or launch
# cannot give. Usage: mesh_stage.sh MPIRUN (EVALMESH_BIN names the binary).
set -u
MPIRUN=$1
# LeakSanitizer's exit-time tracer sometimes crashes (signal 11) in oversubscribed OpenMPI jobs
# after the run finished (as in tests/stages/eval_helpers.py); leaks are checked by the
# single-process tests of the same code.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
E=${EVALMESH_BIN:?EVALMESH_BIN is not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat > "$T/m.yaml" << 'YAML'
name: meshtest
stages:
  grid: {kind: mesh, dp: auto, tp: 2}
YAML
n=0
# expect STATUS TEXT COMMAND...: runs COMMAND, checks its status and that its output has TEXT.
expect() {
    local want=$1 text=$2
    shift 2
    n=$((n + 1))
    "$@" --run-dir "$T/run$n" > "$T/out" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$T/out"; fail "$*: exit $rc, expected $want"; }
    grep -qF -- "$text" "$T/out" || { cat "$T/out"; fail "$*: no '$text' in the output"; }
}
run4() { timeout 60 "$MPIRUN" -np 4 "$E" run "$T/m.yaml" "$@"; }

# Good shapes. Rank 3 of dp 2 x tp 2 is (dp 1, tp 1); of dp 1 x tp 2 x cp 2 it is (cp 1, tp 1).
expect 0 "[r3] mesh: dp 2 x tp 2 x cp 1 over 4 ranks on 1 node, backend mpi; this rank: dp 1 tp 1 cp 0, local rank 3 of 4" run4
expect 0 "[r2] mesh: dp 1 x tp 2 x cp 2 over 4 ranks on 1 node, backend mpi; this rank: dp 0 tp 0 cp 1, local rank 2 of 4" run4 stages.grid.dp=1 stages.grid.cp=auto
expect 0 "mesh: dp 1 x tp 1 x cp 1 over 1 rank on 1 node, backend local" "$E" run "$T/m.yaml" stages.grid.tp=1

# Bad shapes: exit 2 before anything runs, naming the stage's place.
expect 2 "m.yaml:3:3: stage 'grid': dp*tp*cp = 2*3*1 = 6 but the world has 4 ranks" run4 stages.grid.dp=2 stages.grid.tp=3
expect 2 "m.yaml:3:3: stage 'grid': tp*cp = 3 does not divide the world size 4" run4 stages.grid.tp=3
expect 2 "m.yaml:3:3: stage 'grid': at most one of dp, tp, cp may be auto, but dp and tp are" run4 stages.grid.tp=auto
expect 2 "stage 'grid': option 'dp' must be at least 1, got 0" run4 stages.grid.dp=0
expect 2 "stage 'grid': option 'cp' must be at least 1, got -1" run4 stages.grid.cp=-1
# validate knows no world size, but two autos are wrong anywhere.
n=$((n + 1))
"$E" validate "$T/m.yaml" stages.grid.cp=auto > "$T/out" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "validate with two autos: exit $rc"
grep -qF "stage 'grid': at most one of dp, tp, cp may be auto, but dp and cp are" "$T/out" || { cat "$T/out"; fail "validate: message"; }

# Backends that cannot be had.
expect 2 "stage 'grid': backend local holds one rank, but the world has 4 ranks (use mpi or nccl)" run4 stages.grid.backend=local
expect 2 "stage 'grid': backend mpi needs a launcher (mpirun, srun --mpi=pmix); this process runs alone (use local or auto)" "$E" run "$T/m.yaml" stages.grid.tp=1 stages.grid.backend=mpi
if ! "$E" --version | grep -q "backends:.*nccl"; then
    expect 2 "backend nccl: this evalmesh was built without CUDA and NCCL (its backends: local mpi)" run4 stages.grid.backend=nccl
elif ! nvidia-smi -L > /dev/null 2>&1; then
    expect 4 "[r0] error: rank 0, stage 'grid' (mesh): nccl backend: no CUDA device visible on rank 0 (cudaGetDeviceCount: " run4 stages.grid.backend=nccl
else
    expect 0 "backend nccl" run4 stages.grid.backend=nccl
fi

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "all $n mesh stage checks passed"
