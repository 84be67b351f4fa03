#!/usr/bin/env bash
# Stops the one-node cluster of .ci/slurm_up.sh (its jobs first), by the daemons' pid files,
# then by name for any left (a pid file can be stale after a restart).
set -uo pipefail
command -v scancel >/dev/null && scancel --full --quiet --user root 2>/dev/null
for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
    [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
done
sleep 1
for daemon in slurmd slurmctld munged; do pkill -x "$daemon" 2>/dev/null; done
exit 0
