#!/bin/bash
# Starts a real one-node Slurm cluster in a temporary directory (munged, slurmctld, slurmd from
# Debian's slurm-wlm and munge; recipe in ../shared/notes/slurm-single-node.md) and runs, through
# `srun --mpi=pmix`: the bootstrap and collective checks with 4 ranks, a rank that leaves early
# (the step must end), a rank that sleeps past the 3 s timeout (the others exit 5 naming it), a
# rank that starts after the bootstrap's timeout, and tools/slurm/eval.sbatch.
# The daemons are stopped by their pids at the end, also on failure.
# Usage: slurm_cluster.sh COMM_RANKS_BINARY COMM_FAIL_BINARY. Exit 77 when Slurm is not installed.
set -u
RANKS_BIN=$1
FAIL_BIN=$2
for tool in munged slurmctld slurmd srun sinfo; do
    if ! command -v "$tool" > /dev/null; then
        echo "SKIPPED: $tool not found (apt-get install slurm-wlm munge)"
        exit 77
    fi
done

T=$(mktemp -d /tmp/evalmesh-slurm.XXXXXX)
H=$(hostname -s)
# Ports of our own, so clusters of concurrent test runs do not meet.
BASE=$((20000 + ($$ % 2000) * 2))
stop() {
    for pidfile in slurmd.pid slurmctld.pid munged.pid; do
        if [ -s "$T/$pidfile" ]; then
            pid=$(cat "$T/$pidfile")
            kill "$pid" 2> /dev/null
            for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
            kill -9 "$pid" 2> /dev/null
        fi
    done
    rm -rf "$T"
}
trap stop EXIT

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

mkdir -p "$T/state" "$T/spool" "$T/munge" "$T/out"
chmod 700 "$T/munge"
dd if=/dev/urandom bs=1 count=1024 of="$T/munge/munge.key" 2> /dev/null
chmod 400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
    --pid-file="$T/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" \
    || { cat "$T/munged.log"; fail "munged did not start"; exit 1; }

cat > "$T/slurm.conf" << CONF
ClusterName=evalmeshtest
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldPort=$BASE
SlurmdPort=$((BASE + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=$H CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$T/slurm.conf
slurmctld -c -f "$T/slurm.conf" -L "$T/ctld.log" || fail "slurmctld did not start"
slurmd -f "$T/slurm.conf" -L "$T/slurmd.log" || fail "slurmd did not start"
for _ in $(seq 1 60); do
    sinfo -h -o %t 2> /dev/null | grep -q idle && break
    sleep 0.5
done
if ! sinfo -h -o %t 2> /dev/null | grep -q idle; then
    sinfo; tail -20 "$T/ctld.log" "$T/slurmd.log"
    fail "the node never became idle"
    exit 1
fi

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
