#!/bin/bash
# A rank that leaves early or sleeps past the 3 s collective timeout must not hang the job: the
# other ranks fail within the timeout plus slack, with a message naming that rank, exit status 5.
# Usage: rank_failures.sh MPIRUN COMM_FAIL_BINARY
set -u
MPIRUN=$1
BIN=$2
fails=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_rank FILE STATUS TEXT: FILE exists, starts with STATUS and contains TEXT.
expect_rank() {
    if [ ! -f "$1" ]; then fail "$1 missing"; return; fi
    read -r status message < "$1"
    [ "$status" = "$2" ] || fail "$1: status $status, expected $2 ($message)"
    case "$message" in *"$3"*) ;; *) fail "$1: '$message' does not contain '$3'" ;; esac
}

# 1. Rank 2 of 4 sleeps 60 s: the others time out after 3 s and name it; mpirun then ends the
#    job with the first failing rank's status, 5. `timeout 40` guards against a hang.
mkdir -p "$T/sleep"
start=$(date +%s)
COMM_FAIL_DIR=$T/sleep timeout 40 "$MPIRUN" -np 4 -x COMM_FAIL_DIR "$BIN" sleep 2 60 > "$T/sleep.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$T/sleep.log"
[ "$rc" = 5 ] || fail "sleeping rank: mpirun exited with $rc, expected 5"
[ "$elapsed" -le 20 ] || fail "sleeping rank: the job took $elapsed s to end"
for r in 0 1 3; do
    expect_rank "$T/sleep/rank-$r.txt" 5 "timed out after 3 s: rank 2 did not arrive"
done
[ ! -f "$T/sleep/rank-2.txt" ] || fail "the sleeping rank should have been stopped by mpirun"

# 2. Rank 1 of 3 exits with status 4 before the collective. By default mpirun ends the whole job
#    at once with that status (no hang).
timeout 40 "$MPIRUN" -np 3 "$BIN" exit 1 > "$T/exit.log" 2>&1
rc=$?
cat "$T/exit.log"
[ "$rc" = 4 ] || fail "early exit: mpirun exited with $rc, expected 4"

# 3. The same with mpirun told to keep the job alive (as Slurm's srun does by default): the
#    surviving ranks find out themselves, name rank 1 and exit with 5.
mkdir -p "$T/exit"
start=$(date +%s)
COMM_FAIL_DIR=$T/exit timeout 40 "$MPIRUN" --mca orte_abort_on_non_zero_status 0 -np 3 \
    -x COMM_FAIL_DIR "$BIN" exit 1 > "$T/exit2.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$T/exit2.log"
[ "$rc" != 124 ] || fail "early exit without abort-on-exit: the job hung"
[ "$elapsed" -le 20 ] || fail "early exit: the job took $elapsed s to end"
for r in 0 2; do
    expect_rank "$T/exit/rank-$r.txt" 5 "timed out after 3 s: rank 1 did not answer"
done

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "all rank-failure checks passed"
