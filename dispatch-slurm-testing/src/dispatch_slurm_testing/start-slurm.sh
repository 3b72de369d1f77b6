#!/usr/bin/env bash
# start-slurm.sh: a real single-host Slurm 22.05 (Debian packages) for dispatch-slurm's
# live tests, on a fresh Debian 12 machine, as root, without systemd.
#
#   start-slurm.sh [start]   install (unless SKIP_APT=1), configure, start, wait for an idle node
#   start-slurm.sh stop      stop the daemons this script started (by their pid files)
#   start-slurm.sh status    one line per daemon, then sinfo
#
# Idempotent: a daemon already running is left alone, the config is rewritten only when
# its content changes (and then slurmctld/slurmd are restarted, since TaskPlugin and
# friends are not reloadable by `scontrol reconfigure`).
#
# Environment:
#   DISPATCH_SLURM_DIR   state, spool, logs, pid files   (default /var/tmp/dispatch-slurm)
#   SKIP_APT=1           do not run apt-get (packages already installed)
#   CGROUP=auto|yes|no   memory enforcement through cgroup v1 (needed for OUT_OF_MEMORY);
#                        auto: use it when a cgroup v1 memory hierarchy is writable
#   SLURMD_TIMEOUT=10    seconds before a silent slurmd's node is declared down; kept
#                        short so the node-failure test does not wait Slurm's 300 s default
#   NODE_GPUS=4          GPUs the node declares (stand-in device files under
#                        DISPATCH_SLURM_DIR) so --gpus-per-node is accepted and
#                        scheduled; nothing uses a GPU
#   NODE_CPUS=16         CPUs the node declares (SlurmdParameters=config_overrides lets
#                        it declare more than nproc): the live tests run many sleeping
#                        jobs at once and preempt some with a job that needs them all
#
# It always ends by printing `cgroup-memory-enforcement: yes|no (why)`, also written to
# $DISPATCH_SLURM_DIR/cgroup-memory, which the live tests read to know whether an
# out-of-memory ending can be provoked here.
set -euo pipefail

DIR=${DISPATCH_SLURM_DIR:-/var/tmp/dispatch-slurm}
SKIP_APT=${SKIP_APT:-0}
CGROUP=${CGROUP:-auto}
SLURMD_TIMEOUT=${SLURMD_TIMEOUT:-10}
NODE_CPUS=${NODE_CPUS:-16}
NODE_GPUS=${NODE_GPUS:-4}
NODE=$(hostname -s)
MUNGE_PID=/run/munge/munged.pid
MARIADB_PID=/run/mysqld/mysqld.pid

say() { printf '[start-slurm] %s\n' "$*"; }
running() { [[ -s $1 ]] && kill -0 "$(<"$1")" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# until_ok SECONDS WHAT COMMAND...: poll COMMAND every 0.2 s; fail loudly on timeout.
until_ok() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  while ! "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      say "gave up after ${limit}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

stop_daemon() { # stop_daemon PIDFILE NAME
  local pid
  running "$1" || return 0
  pid=$(<"$1")
  kill "$pid"
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  say "stopped $2 (pid $pid)"
}

do_stop() {
  stop_daemon "$DIR/slurmd.pid" slurmd
  stop_daemon "$DIR/slurmctld.pid" slurmctld
  stop_daemon "$DIR/slurmdbd.pid" slurmdbd
  stop_daemon "$MARIADB_PID" mariadb
  stop_daemon "$MUNGE_PID" munged
}

do_status() {
  local f
  for f in "$MUNGE_PID:munged" "$MARIADB_PID:mariadb" "$DIR/slurmdbd.pid:slurmdbd" \
           "$DIR/slurmctld.pid:slurmctld" "$DIR/slurmd.pid:slurmd"; do
    if running "${f%%:*}"; then say "${f##*:} running (pid $(<"${f%%:*}"))"
    else say "${f##*:} not running"; fi
  done
  [[ -f $DIR/cgroup-memory ]] && say "$(<"$DIR/cgroup-memory")"
  sinfo 2>&1 || true
}

install_packages() {
  [[ $SKIP_APT == 1 ]] && return 0
  local missing=0 bin
  for bin in slurmctld slurmd slurmdbd sbatch munged mariadbd; do
    command -v "$bin" >/dev/null || [[ -x /usr/sbin/$bin ]] || missing=1
  done
  if ((missing == 0)); then say "packages already installed"; return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  say "apt-get install slurm-wlm slurmdbd munge mariadb-server (no recommends)"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm slurmdbd munge mariadb-server >/dev/null
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
  install -d -o munge -g munge -m 755 /run/munge /var/lib/munge /var/log/munge
  runuser -u munge -- /usr/sbin/munged
  until_ok 10 munged sh -c 'munge -n | unmunge'
  say "munged started"
}

start_mariadb() {
  if ! mariadb-admin ping >/dev/null 2>&1; then
    install -d -o mysql -g mysql /run/mysqld
    [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 \
      --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 \
      >"$DIR/log/mariadb.log" 2>&1 </dev/null &
    until_ok 60 mariadb mariadb-admin ping
    say "mariadb started"
  fi
  mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'dispatch-slurm';
              GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

# Decide whether cgroup v1 memory enforcement works here; sets CGROUP_USED and CGROUP_WHY.
probe_cgroup() {
  local probe=/sys/fs/cgroup/memory/.dispatch-slurm-probe
  CGROUP_USED=no
  case $CGROUP in
    no) CGROUP_WHY="disabled by CGROUP=no" ;;
    yes | auto)
      if [[ ! -d /sys/fs/cgroup/memory ]]; then
        CGROUP_WHY="no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory (Slurm 22.05 needs v1 here)"
      elif ! mkdir "$probe" 2>/dev/null; then
        CGROUP_WHY="cgroup v1 memory hierarchy is not writable"
      else
        rmdir "$probe"
        CGROUP_USED=yes
        CGROUP_WHY="cgroup v1 memory hierarchy is writable; task/cgroup with ConstrainRAMSpace"
      fi
      if [[ $CGROUP == yes && $CGROUP_USED == no ]]; then
        say "CGROUP=yes but $CGROUP_WHY"
        exit 1
      fi ;;
    *) say "CGROUP must be auto, yes or no, not '$CGROUP'"; exit 2 ;;
  esac
}

# Write FILE from stdin only when its content changed; returns 0 when it changed.
write_if_changed() {
  local file=$1 mode=$2 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f $file ]] && cmp -s "$tmp" "$file"; then rm -f "$tmp"; return 1; fi
  install -m "$mode" "$tmp" "$file"
  rm -f "$tmp"
  return 0
}

write_config() {
  local changed=0 cpus mem proctrack task
  cpus=$NODE_CPUS
  # below MemTotal, or slurmd registers less than configured and the node drains
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  if [[ $CGROUP_USED == yes ]]; then
    proctrack=proctrack/cgroup task=task/cgroup
    write_if_changed /etc/slurm/cgroup.conf 644 <<'EOF' && changed=1
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
ConstrainCores=no
ConstrainDevices=no
EOF
  else
    proctrack=proctrack/linuxproc task=task/none
    if [[ -f /etc/slurm/cgroup.conf ]]; then rm -f /etc/slurm/cgroup.conf; changed=1; fi
  fi

  # slurmd only counts GPUs it can see as device files: give it character devices
  # (the numbers of /dev/null) that no program will ever open as a GPU
  local i
  for ((i = 0; i < NODE_GPUS; i++)); do
    [[ -c $DIR/gpu$i ]] || mknod -m 666 "$DIR/gpu$i" c 1 3
  done
  write_if_changed /etc/slurm/gres.conf 644 <<EOF && changed=1
AutoDetect=off
NodeName=$NODE Name=gpu File=$DIR/gpu[0-$((NODE_GPUS - 1))]
EOF

  # slurmdbd refuses a config holding a password unless it is private (0600)
  write_if_changed /etc/slurm/slurmdbd.conf 600 <<EOF && changed=1
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=dispatch-slurm
EOF

  write_if_changed /etc/slurm/slurm.conf 644 <<EOF && changed=1
# written by dispatch-slurm/scripts/start-slurm.sh; rewritten on every start
ClusterName=dispatch
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued or preempted job may start again after cred_expire+1 s (default 121 s)
AuthInfo=cred_expire=10
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=$proctrack
TaskPlugin=$task
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
# the comment (dispatch's submission tag) reaches sacct once the job ended
AccountingStoreFlags=job_comment
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=256
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
# ended jobs stay visible to squeue for a day
MinJobAge=86400
MaxJobCount=100000
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=$SLURMD_TIMEOUT
InactiveLimit=0
KillWait=5
OverTimeLimit=0
MpiDefault=none
MailProg=/bin/true
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$NODE_GPUS State=UNKNOWN
PartitionName=low       Nodes=$NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=REQUEUE
PartitionName=lowcancel Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=CANCEL
PartitionName=high      Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF
  CONFIG_CHANGED=$changed
}

start_slurm() {
  if [[ $CONFIG_CHANGED == 1 ]] && { running "$DIR/slurmctld.pid" || running "$DIR/slurmd.pid"; }; then
    say "configuration changed: restarting slurmctld and slurmd"
    stop_daemon "$DIR/slurmd.pid" slurmd
    stop_daemon "$DIR/slurmctld.pid" slurmctld
    stop_daemon "$DIR/slurmdbd.pid" slurmdbd
  fi
  if ! running "$DIR/slurmdbd.pid"; then
    slurmdbd
    say "slurmdbd started"
  fi
  until_ok 60 "slurmdbd on port 6819" port_open 6819
  if ! running "$DIR/slurmctld.pid"; then
    slurmctld
    say "slurmctld started"
  fi
  until_ok 30 "slurmctld to answer scontrol ping" scontrol ping
  if ! running "$DIR/slurmd.pid"; then
    slurmd
    say "slurmd started"
  fi
  # a node left drained by an earlier test run would keep every job pending
  if sinfo -h -n "$NODE" -o %T 2>/dev/null | grep -Eq 'drain|down'; then
    scontrol update nodename="$NODE" state=resume 2>/dev/null || true
  fi
  until_ok 60 "node $NODE to be idle or in use" \
    sh -c "sinfo -h -n $NODE -o %T | grep -Eqx 'idle|mixed|allocated'"
  until_ok 30 "sacct to answer" sacct -n -X -S now
}

case ${1:-start} in
  start) ;;
  stop) do_stop; exit 0 ;;
  status) do_status; exit 0 ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

[[ $(id -u) == 0 ]] || { say "must run as root"; exit 1; }
started=$SECONDS
install_packages
install -d -m 755 "$DIR" "$DIR/ctld" "$DIR/slurmd" "$DIR/log"
start_munge
start_mariadb
probe_cgroup
write_config
start_slurm
echo "cgroup-memory-enforcement: $CGROUP_USED ($CGROUP_WHY)" | tee "$DIR/cgroup-memory"
sinfo
say "ready in $((SECONDS - started))s"
