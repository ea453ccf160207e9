#!/bin/bash
# A rank that leaves early, sleeps past the 3 s collective timeout or starts after the bootstrap's
# 3 s timeout must not hang the job: the other ranks fail on the timeout, with a message naming
# that rank, exit status 5. That the job ends in time is shown by what happened, not by a clock:
# the sleeping or late rank never got to write anything (or found the others gone), and `timeout`
# turns a hang into its status 124.
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

# some_ranks DIR STATUS TEXT RANKS...: at least one of RANKS wrote its file, and every file
# written is right (the launcher may kill the slower ranks once the first failed).
some_ranks() {
    local dir=$1 status=$2 text=$3 found=0
    shift 3
    for r in "$@"; do
        [ -f "$dir/rank-$r.txt" ] || continue
        found=1
        expect_rank "$dir/rank-$r.txt" "$status" "$text"
    done
    [ "$found" = 1 ] || fail "none of ranks $* in $dir wrote a status"
}

# 1. Rank 2 of 4 sleeps 60 s: the others time out after 3 s and name it; mpirun then ends the
#    job with the first failing rank's status, 5. `timeout 40` guards against a hang.
mkdir -p "$T/sleep"
COMM_FAIL_DIR=$T/sleep timeout 40 "$MPIRUN" -np 4 -x COMM_FAIL_DIR "$BIN" sleep 2 60 > "$T/sleep.log" 2>&1
rc=$?
cat "$T/sleep.log"
[ "$rc" = 5 ] || fail "sleeping rank: mpirun exited with $rc, expected 5"
some_ranks "$T/sleep" 5 "rank 2 did not arrive" 0 1 3
[ ! -f "$T/sleep/rank-2.txt" ] || fail "the sleeping rank should have been stopped by mpirun"

# 1b. The same with mpirun told not to end the job (every rank then writes its status), and a
#     sleep of 8 s: the others name rank 2; rank 2, on waking, fails at once because they aborted.
mkdir -p "$T/sleep8"
COMM_FAIL_DIR=$T/sleep8 timeout 40 "$MPIRUN" --mca orte_abort_on_non_zero_status 0 -np 4 \
    -x COMM_FAIL_DIR "$BIN" sleep 2 8 > "$T/sleep8.log" 2>&1
rc=$?
cat "$T/sleep8.log"
[ "$rc" != 124 ] || fail "sleeping rank (8 s): the job hung"
for r in 0 1 3; do
    expect_rank "$T/sleep8/rank-$r.txt" 5 "timed out after 3 s: rank 2 did not arrive"
done
expect_rank "$T/sleep8/rank-2.txt" 5 "allreduce: rank "
expect_rank "$T/sleep8/rank-2.txt" 5 " aborted: allreduce (collective 2 of a 4-rank group) timed out"

# 2. Rank 1 of 3 exits with status 4 before the collective. By default mpirun ends the whole job
#    at once with that status (no hang).
timeout 40 "$MPIRUN" -np 3 "$BIN" exit 1 > "$T/exit.log" 2>&1
rc=$?
cat "$T/exit.log"
[ "$rc" = 4 ] || fail "early exit: mpirun exited with $rc, expected 4"

# 3. The same with mpirun told to keep the job alive (as Slurm's srun does by default): the
#    surviving ranks find out themselves, name rank 1 and exit with 5.
mkdir -p "$T/exit"
COMM_FAIL_DIR=$T/exit timeout 40 "$MPIRUN" --mca orte_abort_on_non_zero_status 0 -np 3 \
    -x COMM_FAIL_DIR "$BIN" exit 1 > "$T/exit2.log" 2>&1
rc=$?
cat "$T/exit2.log"
[ "$rc" != 124 ] || fail "early exit without abort-on-exit: the job hung"
for r in 0 2; do
    expect_rank "$T/exit/rank-$r.txt" 5 "timed out after 3 s: rank 1 did not answer"
done

# 4. Rank 1 of 3 starts 20 s late: the bootstrap's PMIx fence (timeout 3 s) fails on the others,
#    naming rank 1, with status 5, and the job ends before rank 1 wakes (it never gets to say
#    anything of its own).
timeout 40 "$MPIRUN" -np 3 "$BIN" late 1 20 > "$T/late.log" 2>&1
rc=$?
cat "$T/late.log"
[ "$rc" = 5 ] || fail "late rank: mpirun exited with $rc, expected 5"
! grep -q "^rank 1: " "$T/late.log" || fail "late rank: rank 1 woke before the job ended"
grep -qE "rank [02]: bootstrap: PMIx fence did not complete within 3 s: rank 1 did not answer" \
    "$T/late.log" || fail "late rank: no rank named rank 1"

if [ "$fails" -gt 0 ]; then echo "$fails failures"; exit 1; fi
echo "all rank-failure checks passed"
