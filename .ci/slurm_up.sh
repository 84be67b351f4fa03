#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (root only): munged, slurmctld and slurmd on localhost.
#
#   .ci/slurm_up.sh      # installs slurm-wlm + munge when absent (Debian), writes the config, starts it
#   .ci/slurm_down.sh    # stops it
#
# Two partitions, like a site: `cpu` (default) and `gpu`, on the same node, which advertises four
# stand-in GPUs (device files /dev/null, /dev/zero, ...) so GPU requests are scheduled; nothing gives
# CUDA, so those jobs run on CPU. No accounting database: MinJobAge=3600 keeps finished jobs in
# slurmctld, so `squeue --states=all` (the plugin's status command here) still sees them.
# The node advertises more CPUs and memory than it has (SlurmdParameters=config_overrides) so the
# profile's per-rule requests fit; the test limits concurrency with `--jobs`.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "slurm_up.sh: needs root" >&2; exit 2; }
if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
HOST=$(hostname -s)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=repro
SlurmctldHost=${HOST}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=32 RealMemory=262144 Gres=gpu:4 State=UNKNOWN
PartitionName=cpu Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=${HOST} MaxTime=INFINITE State=UP
EOF
{ echo AutoDetect=off; for dev in null zero full urandom; do echo "NodeName=${HOST} Name=gpu File=/dev/${dev}"; done; } > /etc/slurm/gres.conf   # four stand-in GPUs
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; }
chown munge:munge /etc/munge/munge.key /run/munge && chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 60); do
    if sinfo -h -o "%T" 2>/dev/null | grep -qE "^(idle|mixed|allocated)"; then
        sinfo
        exit 0
    fi
    sleep 1
done
echo "slurm_up.sh: the node did not become idle within 60 s" >&2
sinfo -N -l >&2 || true
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
