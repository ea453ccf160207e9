#!/bin/bash
# Inside a real one-node Slurm cluster (started by slurm_env.sh, which runs this script), runs
# through `srun --mpi=pmix`: the bootstrap and collective checks with 4 ranks, a rank that leaves
# early (the step must end), a rank that sleeps past the 3 s timeout (the others exit 5 naming
# it), a rank that starts after the bootstrap's timeout, and tools/slurm/eval.sbatch.
# Usage: slurm_env.sh slurm_cluster.sh COMM_RANKS_BINARY COMM_FAIL_BINARY.
set -u
RANKS_BIN=$1
FAIL_BIN=$2
[ -n "${SLURM_CONF:-}" ] || { echo "run me through slurm_env.sh"; exit 2; }
T=$(mktemp -d /tmp/evalmesh-slurm-checks.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/out"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# 1. Bootstrap, control plane, collectives, splits, exact sums and meshes with 4 ranks.
EXPECT_WORLD=4 timeout 120 srun --mpi=pmix -n 4 --export=ALL "$RANKS_BIN" > "$T/ranks.log" 2>&1
rc=$?
cat "$T/ranks.log"
[ "$rc" = 0 ] || fail "srun -n 4 comm_ranks exited with $rc"
[ "$(grep -c ' checks, 0 failed' "$T/ranks.log")" = 4 ] || fail "not every rank passed its checks"

# 2. Rank 1 of 3 exits early with status 4: Slurm's PMIx plugin sees it leave without
#    finalizing and cancels the whole step, so nothing hangs (`timeout` would make it 124).
timeout 60 srun --mpi=pmix -n 3 --export=ALL "$FAIL_BIN" exit 1 > "$T/exit.log" 2>&1
rc=$?
cat "$T/exit.log"
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "srun with an early exit ended with $rc"

# 3. Rank 1 of 3 sleeps 60 s: the others time out after 3 s, name it and exit 5; srun -K then
#    ends the step (their own statuses are in the files they write) before the sleeper wakes.
COMM_FAIL_DIR=$T/out timeout 60 srun -K --mpi=pmix -n 3 --export=ALL "$FAIL_BIN" sleep 1 60 \
    > "$T/sleep.log" 2>&1
rc=$?
cat "$T/sleep.log"
# srun reports the highest task status: the sleeper's SIGTERM (143) once the step is ended.
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "srun with a sleeping rank ended with $rc"
[ ! -f "$T/out/rank-1.txt" ] || fail "the sleeping rank woke before the step ended"
# Once the first rank exits, Slurm cancels the step: the other may be killed before it writes.
found=0
for r in 0 2; do
    [ -f "$T/out/rank-$r.txt" ] || continue
    found=1
    read -r status message < "$T/out/rank-$r.txt"
    [ "$status" = 5 ] || fail "rank $r: status $status, expected 5"
    case "$message" in *"timed out after 3 s: rank 1 did not arrive"*) ;; *) fail "rank $r: '$message'" ;; esac
done
[ "$found" = 1 ] || fail "neither rank 0 nor rank 2 wrote a status"

# 4. Rank 1 of 3 starts 20 s late: the bootstrap's PMIx fence (timeout 3 s) fails, naming it;
#    srun -K ends the step once they exit, before rank 1 wakes (it never says anything itself).
timeout 60 srun -K --mpi=pmix -n 3 --export=ALL "$FAIL_BIN" late 1 20 > "$T/late.log" 2>&1
rc=$?
cat "$T/late.log"
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "srun with a late rank ended with $rc"
! grep -q "^rank 1: " "$T/late.log" || fail "late rank: rank 1 woke before the step ended"
grep -qE "rank [02]: bootstrap: PMIx fence did not complete within 3 s: rank 1 did not answer" \
    "$T/late.log" || fail "late rank: no rank named rank 1"

# 5. tools/slurm/eval.sbatch itself, shrunk to this one node: check-env on every rank, then a
#    recipe with a mesh stage on 2 ranks; a recipe needing GPUs in a job without them refused.
E=${EVALMESH_BIN:-}
SRC=${EVALMESH_SOURCE_DIR:-}
if [ -x "$E" ] && [ -f "$SRC/tools/slurm/eval.sbatch" ]; then
    mkdir -p "$T/job"
    printf 'name: sbatchtest\nstages:\n  grid: {kind: mesh, dp: auto}\n' > "$T/job/r.yaml"
    (cd "$T/job" && EVALMESH=$E timeout 120 sbatch --wait --export=ALL --nodes=1 \
        --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --output="$T/job/out.txt" \
        "$SRC/tools/slurm/eval.sbatch" r.yaml > "$T/job/sbatch.txt" 2>&1)
    rc=$?
    cat "$T/job/sbatch.txt" "$T/job/out.txt"
    [ "$rc" = 0 ] || fail "eval.sbatch exited with $rc"
    grep -q "mesh: dp 2 x tp 1 x cp 1 over 2 ranks on 1 node, backend mpi" "$T/job/out.txt" \
        || fail "eval.sbatch: the mesh stage did not run on 2 ranks"
    # a recipe on GPUs (backend nccl) in a job without GPUs stops before any rank starts
    printf 'name: gputest\nstages:\n  grid: {kind: mesh, dp: auto, backend: nccl}\n' > "$T/job/g.yaml"
    (cd "$T/job" && EVALMESH=$E timeout 120 sbatch --wait --export=ALL --nodes=1 \
        --ntasks-per-node=1 --cpus-per-task=1 --output="$T/job/gout.txt" \
        "$SRC/tools/slurm/eval.sbatch" g.yaml > "$T/job/gsbatch.txt" 2>&1)
    rc=$?
    cat "$T/job/gout.txt"
    [ "$rc" != 0 ] || fail "eval.sbatch ran a GPU recipe in a job without GPUs"
    grep -q "g.yaml runs on GPUs (evalmesh gpus: 1 per rank) but this job has no GPUs per task" \
        "$T/job/gout.txt" || fail "eval.sbatch: no message for a GPU recipe without GPUs"
else
    echo "note: EVALMESH_BIN or EVALMESH_SOURCE_DIR not set: eval.sbatch not tried"
fi

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "slurm cluster checks passed"
