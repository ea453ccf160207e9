#!/bin/bash
# Runs a command inside a real one-node Slurm cluster started for it in a temporary directory
# (munged, slurmctld, slurmd from Debian's slurm-wlm and munge; recipe in
# ../shared/notes/slurm-single-node.md), with SLURM_CONF set so srun, sbatch, squeue and scancel
# reach it. The daemons are stopped by their pids afterwards, also on failure.
# Usage: slurm_env.sh COMMAND [ARGS...]; exits with COMMAND's status, 77 when Slurm or munge is
# not installed, 1 when the cluster does not come up.
set -u
for tool in munged slurmctld slurmd srun sinfo; do
    if ! command -v "$tool" > /dev/null; then
        echo "SKIPPED: $tool not found (apt-get install slurm-wlm munge)"
        exit 77
    fi
done

T=$(mktemp -d /tmp/evalmesh-slurm.XXXXXX)
H=$(hostname -s)
# Ports and a TmpFS of our own, so clusters of concurrent test runs do not meet: Slurm's PMIx
# plugin puts each step's client directory (spmix_appdir_<uid>_<job>.<step>) under TmpFS, and
# every new cluster numbers its jobs from 1 again, so a shared /tmp let one cluster's leftover
# directory refuse another's step ("Cannot create client cli tmpdir: File exists").
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

mkdir -p "$T/state" "$T/spool" "$T/munge" "$T/tmp"
chmod 700 "$T/munge"
dd if=/dev/urandom bs=1 count=1024 of="$T/munge/munge.key" 2> /dev/null
chmod 400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
    --pid-file="$T/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" \
    || { cat "$T/munged.log"; echo "FAIL: munged did not start"; exit 1; }

cat > "$T/slurm.conf" << CONF
ClusterName=evalmeshtest
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
TmpFS=$T/tmp
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
slurmctld -c -f "$T/slurm.conf" -L "$T/ctld.log" || { echo "FAIL: slurmctld did not start"; exit 1; }
slurmd -f "$T/slurm.conf" -L "$T/slurmd.log" || { echo "FAIL: slurmd did not start"; exit 1; }
for _ in $(seq 1 60); do
    sinfo -h -o %t 2> /dev/null | grep -q idle && break
    sleep 0.5
done
if ! sinfo -h -o %t 2> /dev/null | grep -q idle; then
    sinfo; tail -n 20 "$T/ctld.log" "$T/slurmd.log"
    echo "FAIL: the node never became idle"
    exit 1
fi

"$@"
rc=$?
[ "$rc" = 0 ] || tail -n 30 "$T/ctld.log" "$T/slurmd.log"
exit $rc
