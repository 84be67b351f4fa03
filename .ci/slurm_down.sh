#!/usr/bin/env bash
# Stops the one-node cluster of .ci/slurm_up.sh (its jobs first), by the daemons' pid files.
set -uo pipefail
command -v scancel >/dev/null && scancel --full --quiet --user root 2>/dev/null
for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
    [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
done
sleep 1
exit 0
