#!/usr/bin/env bash
# start-slurm.sh: a real multi-node Slurm on ONE host for dispatch-slurm's live tests, on a
# fresh Debian 12 machine, as root, without systemd: 22.05 from Debian's packages (the
# default), or 24.11.7, 25.11.7, 26.05.3 built from their release tarballs (SLURM_VERSION);
# one slurmctld, one slurmdbd and NODES slurmd's, each its own compute node
# (`slurmd -N nodeX`, own port, spool, pid file, log and cgroup tree slurm_nodeX), so a
# job with --nodes 2 really runs on two slurmd's. Debian's build has MULTIPLE_SLURMD.
#
#   start-slurm.sh [start]          install (unless SKIP_APT=1), configure, start, wait until
#                                   every node is idle or in use
#   start-slurm.sh stop             stop the daemons this script started (by their pid files)
#                                   and kill what is left of their jobs (by the nodes' cgroups)
#   start-slurm.sh status           one line per daemon, then the nodes
#   start-slurm.sh lose NODE [kill|freeze]
#                                   lose one node for real: kill (default) SIGKILLs its slurmd
#                                   and every process in its cgroups (their sockets close);
#                                   freeze SIGSTOPs its slurmd and freezes its cgroups
#                                   (sockets stay open, like a node that lost power)
#   start-slurm.sh restore NODE     thaw and kill what is left on it, start its slurmd again,
#                                   resume it, wait until it is idle or in use
#   start-slurm.sh ctld stop|start|freeze|thaw
#                                   this version's slurmctld only: stop (SIGTERM, it saves its
#                                   state; a frozen one is thawed first), start it again (it
#                                   recovers its state and the running jobs; a frozen one is
#                                   thawed) and wait until it answers, freeze (SIGSTOP: its
#                                   sockets stay open and calls time out), thaw (SIGCONT)
#   start-slurm.sh build [--background]
#                                   (a built version) build and install it into the cache
#                                   unless it is there; --background: detached at nice 19,
#                                   holding a lock, progress in a status file beside it
#   start-slurm.sh env              the variables a client of this version's cluster needs
#                                   (PATH, SLURM_CONF, DISPATCH_SLURM_DIR), as shell lines
#
# Versions side by side: each built version has its own ports, state directory, config
# directory (SLURM_CONF), accounting database and cgroup trees (its own cgroup v1
# sub-hierarchies, bind-mounted under its state directory), so it runs beside the 22.05
# cluster; munged and MariaDB are shared, and `stop` of a built version leaves them alone.
#
# Idempotent: a daemon already running is left alone, the config is rewritten only when
# its content changes (and then the daemons are restarted, since TaskPlugin and friends
# are not reloadable by `scontrol reconfigure`).
#
# Environment:
#   SLURM_VERSION=22.05  22.05 (Debian's package) | 24.11.7 | 25.11.7 | 26.05.3 (built)
#   DISPATCH_SLURM_SOURCES  where slurm-<version>.tar.gz are (default: shared/slurm/src
#                        beside the checkout)
#   DISPATCH_SLURM_CACHE builds, one prefix per version and tarball sha256
#                        (default /var/cache/dispatch/slurm)
#   DISPATCH_SLURM_DIR   state, spool, logs, pid files   (default /var/tmp/dispatch-slurm,
#                        /var/tmp/dispatch-slurm-<version> for a built version)
#   SKIP_APT=1           do not run apt-get (packages already installed)
#   NODES=4              compute nodes node1..nodeN (22.05: slurmd ports 6821..682N;
#                        a built version: its own range, see version_ports)
#   CGROUP=auto|yes|no   memory enforcement through cgroup v1, one tree per node (needed
#                        for OUT_OF_MEMORY); auto: use it when cgroup v1 is writable
#   SLURMD_TIMEOUT=10    seconds before a silent slurmd's node is declared down; kept
#                        short so the node-failure tests do not wait Slurm's 300 s default
#   NODE_GPUS=2          GPUs each node declares (stand-in device files under
#                        DISPATCH_SLURM_DIR) so --gpus-per-node is accepted and
#                        scheduled; nothing uses a GPU
#   NODE_CPUS=8          CPUs each node declares (SlurmdParameters=config_overrides lets
#                        it declare more than nproc): the live tests run many sleeping
#                        jobs at once and preempt some with a job that needs them all
#   NODE_MEM             MB each node declares (default: 90% of MemTotal / NODES)
#
# It always ends by printing `cgroup-memory-enforcement: yes|no (why)`, also written to
# $DISPATCH_SLURM_DIR/cgroup-memory, which the live tests read to know whether an
# out-of-memory ending can be provoked here.
set -euo pipefail

HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
SLURM_VERSION=${SLURM_VERSION:-22.05}
case $SLURM_VERSION in
  22.05) BUILT=0 ;;
  24.11.7 | 25.11.7 | 26.05.3) BUILT=1 ;;
  *) echo "[start-slurm] SLURM_VERSION=$SLURM_VERSION: not one of 22.05, 24.11.7, 25.11.7, 26.05.3" >&2; exit 2 ;;
esac
# ports per version: slurmctld, slurmdbd, and slurmd's from SLURMD_PORT0+1 (22.05 keeps
# Slurm's defaults 6817/6819/6821..). Job ids too: every node of every cluster here is
# 127.0.0.1, and a job's MASTER_PORT is 20000 + its id mod 20000, so two clusters running
# side by side number their jobs from different places (22.05 from 1) lest two
# torch.distributed jobs with the same id bind the same port
case $SLURM_VERSION in
  22.05) CTLD_PORT=6817 DBD_PORT=6819 SLURMD_PORT0=6820 FIRST_JOB_ID= ;;
  24.11.7) CTLD_PORT=6840 DBD_PORT=6842 SLURMD_PORT0=6844 FIRST_JOB_ID=5000 ;;
  25.11.7) CTLD_PORT=6860 DBD_PORT=6862 SLURMD_PORT0=6864 FIRST_JOB_ID=10000 ;;
  26.05.3) CTLD_PORT=6880 DBD_PORT=6882 SLURMD_PORT0=6884 FIRST_JOB_ID=15000 ;;
esac
if ((BUILT)); then
  DIR=${DISPATCH_SLURM_DIR:-/var/tmp/dispatch-slurm-$SLURM_VERSION}
  CONF_DIR=$DIR/etc
  # the cgroup v1 sub-hierarchies of this version, bind-mounted here (CgroupMountpoint)
  CG_ROOT=$DIR/cgroup
  ACCT_DB=slurm_acct_db_${SLURM_VERSION//./_}
else
  DIR=${DISPATCH_SLURM_DIR:-/var/tmp/dispatch-slurm}
  CONF_DIR=/etc/slurm
  CG_ROOT=/sys/fs/cgroup
  ACCT_DB=slurm_acct_db
fi
CACHE=${DISPATCH_SLURM_CACHE:-/var/cache/dispatch/slurm}
# the checkout's root when this script runs from one (package data of
# dispatch-slurm-testing), for the default sources directory beside it
CHECKOUT=$(cd "$HERE/../../.." 2>/dev/null && pwd)
if [[ -d $CHECKOUT/dispatch-slurm-testing ]]; then
  SOURCES=${DISPATCH_SLURM_SOURCES:-$(dirname "$CHECKOUT")/shared/slurm/src}
else # an installed wheel: no checkout to look beside
  SOURCES=${DISPATCH_SLURM_SOURCES:-shared/slurm/src}
fi
TARBALL=$SOURCES/slurm-$SLURM_VERSION.tar.gz
SKIP_APT=${SKIP_APT:-0}
CGROUP=${CGROUP:-auto}
SLURMD_TIMEOUT=${SLURMD_TIMEOUT:-10}
NODES=${NODES:-4}
NODE_CPUS=${NODE_CPUS:-8}
NODE_GPUS=${NODE_GPUS:-2}
NODE_MEM=${NODE_MEM:-$(awk -v n="$NODES" '/^MemTotal:/ {print int($2 / 1024 * 0.9 / n)}' /proc/meminfo)}
CONTROLLER=$(hostname -s)
MUNGE_PID=/run/munge/munged.pid
MARIADB_PID=/run/mysqld/mysqld.pid

say() { printf '[start-slurm] %s\n' "$*"; }
running() { [[ -s $1 ]] && kill -0 "$(<"$1")" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
node_names() { local i; for ((i = 1; i <= NODES; i++)); do echo "node$i"; done; }
node_pidf() { echo "$DIR/run/slurmd-$1.pid"; }
node_port() { echo $((SLURMD_PORT0 + ${1#node})); }

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

stop_daemon() { # stop_daemon PIDFILE NAME: SIGTERM, up to 15 s, then SIGKILL
  local pid
  running "$1" || { rm -f "$1"; return 0; }
  pid=$(<"$1")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$1"
  say "stopped $2 (pid $pid)"
}

# the processes in one node's cgroup trees: its slurmstepd's and their tasks
node_procs() {
  find "$CG_ROOT/freezer/slurm_$1" "$CG_ROOT/memory/slurm_$1" \
    -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un | paste -sd' ' || true
}

kill_node_leftovers() { # kill_node_leftovers NODE: after its slurmd stopped
  local procs d
  procs=$(node_procs "$1")
  if [[ -n $procs ]]; then
    # shellcheck disable=SC2086
    kill -9 $procs 2>/dev/null || true
  fi
  if [[ -f $CG_ROOT/freezer/slurm_$1/freezer.state ]]; then
    echo THAWED >"$CG_ROOT/freezer/slurm_$1/freezer.state" 2>/dev/null || true
  fi
  sleep 0.3
  for d in "$CG_ROOT"/*/slurm_"$1"; do
    if [[ -d $d ]]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  return 0
}

stop_nodes() {
  local n
  # the single-node layout of earlier versions of this script
  stop_daemon "$DIR/slurmd.pid" "slurmd (single-node layout)"
  for n in $(node_names); do stop_daemon "$(node_pidf "$n")" "slurmd $n"; done
  for n in $(node_names); do kill_node_leftovers "$n"; done
}

do_stop() {
  stop_daemon "$DIR/slurmctld.pid" slurmctld
  stop_nodes
  stop_daemon "$DIR/slurmdbd.pid" slurmdbd
  # munged and MariaDB serve every version's cluster: only the 22.05 one stops them
  ((BUILT)) && return 0
  stop_daemon "$MARIADB_PID" mariadb
  stop_daemon "$MUNGE_PID" munged
}

do_status() {
  local f n
  for f in "$MUNGE_PID:munged" "$MARIADB_PID:mariadb" "$DIR/slurmdbd.pid:slurmdbd" \
           "$DIR/slurmctld.pid:slurmctld"; do
    if running "${f%%:*}"; then say "${f##*:} running (pid $(<"${f%%:*}"))"
    else say "${f##*:} not running"; fi
  done
  for n in $(node_names); do
    f=$(node_pidf "$n")
    if running "$f"; then say "slurmd $n running (pid $(<"$f"), port $(node_port "$n"))"
    else say "slurmd $n not running"; fi
  done
  if [[ -f $DIR/cgroup-memory ]]; then say "$(<"$DIR/cgroup-memory")"; fi
  sinfo -N -o '%N %T %E' 2>&1 | awk '!seen[$0]++' || true
}

check_node() {
  if ! [[ $1 =~ ^node[0-9]+$ ]] || ((${1#node} < 1 || ${1#node} > NODES)); then
    say "no node '$1' in this cluster (node1..node$NODES)"
    exit 2
  fi
}

node_usable() { # idle, mixed or allocated, and neither draining nor down
  sinfo -h -n "$1" -N -o %T 2>/dev/null | grep -Eqx 'idle|mixed|allocated'
}

do_lose() { # do_lose NODE MODE
  local n=$1 mode=${2:-kill} pid cg procs
  check_node "$n"
  running "$(node_pidf "$n")" || { say "slurmd $n is not running"; exit 1; }
  pid=$(<"$(node_pidf "$n")")
  cg=$CG_ROOT/freezer/slurm_$n
  procs=$(node_procs "$n")
  case $mode in
    kill)
      # shellcheck disable=SC2086
      kill -9 "$pid" $procs 2>/dev/null || true
      say "lost $n: SIGKILL slurmd (pid $pid) and its job processes: ${procs:-none}" ;;
    freeze)
      kill -STOP "$pid"
      if [[ -f $cg/freezer.state ]]; then echo FROZEN >"$cg/freezer.state"; fi
      say "froze $n: SIGSTOP slurmd (pid $pid), cgroup freezer FROZEN: ${procs:-none}" ;;
    *) say "lose: mode must be kill or freeze, not '$mode'"; exit 2 ;;
  esac
}

do_restore() { # do_restore NODE
  local n=$1 pidf
  check_node "$n"
  pidf=$(node_pidf "$n")
  if running "$pidf"; then
    # a frozen slurmd: kill it with what it froze
    kill -9 "$(<"$pidf")" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$pidf"
  kill_node_leftovers "$n"
  slurmd -N "$n"
  say "slurmd $n started again (port $(node_port "$n"))"
  if sinfo -h -n "$n" -N -o %T 2>/dev/null | grep -Eq 'drain|down|fail'; then
    scontrol update nodename="$n" state=resume 2>/dev/null || true
  fi
  if ! until_ok 60 "node $n to be idle or in use" node_usable "$n"; then
    scontrol update nodename="$n" state=resume 2>/dev/null || true
    until_ok 30 "node $n to be idle or in use" node_usable "$n"
  fi
}

ctld_pid() { # the pid of this version's slurmctld, or fail loudly
  running "$DIR/slurmctld.pid" || { say "slurmctld of Slurm $SLURM_VERSION is not running" >&2; exit 1; }
  cat "$DIR/slurmctld.pid"
}

ctld_stopped() { # the process is in the stopped state (SIGSTOP)
  [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == T ]]
}

do_ctld() { # do_ctld stop|start|freeze|thaw: this version's slurmctld only
  local pid
  case $1 in
    stop)
      if running "$DIR/slurmctld.pid"; then kill -CONT "$(<"$DIR/slurmctld.pid")" 2>/dev/null || true; fi
      stop_daemon "$DIR/slurmctld.pid" slurmctld ;;
    start)
      if running "$DIR/slurmctld.pid"; then
        pid=$(<"$DIR/slurmctld.pid")
        if ctld_stopped "$pid"; then kill -CONT "$pid"; say "thawed slurmctld (pid $pid)"; fi
      else
        slurmctld
        say "slurmctld started"
      fi
      until_ok 60 "slurmctld to answer scontrol ping" sh -c 'scontrol ping | grep -q UP' ;;
    freeze)
      pid=$(ctld_pid)
      kill -STOP "$pid"
      say "froze slurmctld (pid $pid): SIGSTOP" ;;
    thaw)
      pid=$(ctld_pid)
      kill -CONT "$pid"
      say "thawed slurmctld (pid $pid): SIGCONT" ;;
    *) say "ctld: give stop, start, freeze or thaw, not '$1'"; exit 2 ;;
  esac
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
              GRANT ALL ON $ACCT_DB.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

# Decide whether cgroup v1 memory enforcement works here; sets CGROUP_USED and CGROUP_WHY.
probe_cgroup() {
  local probe=/sys/fs/cgroup/memory/.dispatch-slurm-probe
  CGROUP_USED=no
  case $CGROUP in
    no) CGROUP_WHY="disabled by CGROUP=no" ;;
    yes | auto)
      if [[ ! -d /sys/fs/cgroup/memory || ! -d /sys/fs/cgroup/freezer ]]; then
        CGROUP_WHY="no cgroup v1 memory+freezer hierarchies under /sys/fs/cgroup (Slurm 22.05 needs v1 here)"
      elif ! mkdir "$probe" 2>/dev/null; then
        CGROUP_WHY="cgroup v1 memory hierarchy is not writable"
      else
        rmdir "$probe"
        CGROUP_USED=yes
        CGROUP_WHY="cgroup v1 is writable; task/cgroup with ConstrainRAMSpace, one tree per node (slurm_nodeX)"
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
  local changed=0 proctrack task n i gres_lines="" node_lines="" first_job_line=""
  [[ -n $FIRST_JOB_ID ]] && first_job_line="FirstJobId=$FIRST_JOB_ID"$'\n'
  if [[ $CGROUP_USED == yes ]]; then
    proctrack=proctrack/cgroup task=task/cgroup
    write_if_changed "$CONF_DIR/cgroup.conf" 644 <<CONF && changed=1
CgroupPlugin=cgroup/v1
CgroupMountpoint=$CG_ROOT
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
ConstrainCores=no
ConstrainDevices=no
CONF
  else
    proctrack=proctrack/linuxproc task=task/none
    if [[ -f $CONF_DIR/cgroup.conf ]]; then rm -f "$CONF_DIR/cgroup.conf"; changed=1; fi
  fi

  # slurmd only counts GPUs it can see as device files: give each node character devices
  # (the numbers of /dev/null) that no program will ever open as a GPU
  for n in $(node_names); do
    install -d -m 755 "$DIR/spool/$n" "$DIR/dev/$n"
    for ((i = 0; i < NODE_GPUS; i++)); do
      [[ -c $DIR/dev/$n/gpu$i ]] || mknod -m 666 "$DIR/dev/$n/gpu$i" c 1 3
    done
    if ((NODE_GPUS > 0)); then
      gres_lines+="NodeName=$n Name=gpu File=$DIR/dev/$n/gpu[0-$((NODE_GPUS - 1))]"$'\n'
    fi
    node_lines+="NodeName=$n NodeAddr=127.0.0.1 Port=$(node_port "$n") CPUs=$NODE_CPUS RealMemory=$NODE_MEM"
    if ((NODE_GPUS > 0)); then node_lines+=" Gres=gpu:$NODE_GPUS"; fi
    node_lines+=" State=UNKNOWN"$'\n'
  done
  write_if_changed "$CONF_DIR/gres.conf" 644 <<CONF && changed=1
AutoDetect=off
${gres_lines}
CONF

  # slurmdbd refuses a config holding a password unless it is private (0600)
  write_if_changed "$CONF_DIR/slurmdbd.conf" 600 <<CONF && changed=1
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$ACCT_DB
StorageUser=slurm
StoragePass=dispatch-slurm
CONF

  write_if_changed "$CONF_DIR/slurm.conf" 644 <<CONF && changed=1
# written by dispatch-slurm-testing's start-slurm.sh; rewritten on every start
ClusterName=dispatch
SlurmctldHost=$CONTROLLER(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued or preempted job may start again after cred_expire+1 s (default 121 s)
AuthInfo=cred_expire=10
SlurmctldPort=$CTLD_PORT
# the default slurmd port; each NodeName line sets its own (one slurmd per port here)
SlurmdPort=$((SLURMD_PORT0 + 1))
StateSaveLocation=$DIR/ctld
# %n = the NodeName given to slurmd -N: one spool, pid file and log per slurmd
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=$proctrack
TaskPlugin=$task
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# the comment (dispatch's submission tag) reaches sacct once the job ended
AccountingStoreFlags=job_comment
AccountingStorageTRES=gres/gpu
SchedulerType=sched/backfill
# a job that becomes eligible later (a requeued or preempted one after cred_expire, a
# --begin) is started by the next backfill or main scheduling pass: every 2 and 5 s here,
# not Slurm's 30 and 60 s, so a test that requeues does not wait half a minute each time
SchedulerParameters=bf_interval=2,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=256
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
# ended jobs stay visible to squeue for a day
MinJobAge=86400
MaxJobCount=100000
${first_job_line}ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=$SLURMD_TIMEOUT
InactiveLimit=0
KillWait=5
OverTimeLimit=0
MpiDefault=none
MailProg=/bin/true
GresTypes=gpu
${node_lines}
PartitionName=low       Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=REQUEUE
PartitionName=lowcancel Nodes=node[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=CANCEL
PartitionName=high      Nodes=node[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
CONF
  CONFIG_CHANGED=$changed
}

any_slurm_running() {
  local n
  running "$DIR/slurmctld.pid" && return 0
  running "$DIR/slurmd.pid" && return 0
  for n in $(node_names); do running "$(node_pidf "$n")" && return 0; done
  return 1
}

nodes_ready() { # every node idle, mixed or allocated
  local states bad
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
  bad=$(awk '$2 !~ /^(idle|mixed|allocated)$/' <<<"$states" | wc -l)
  [[ $(wc -l <<<"$states") -ge $NODES && $bad == 0 ]]
}

start_slurm() {
  local n bad
  if [[ $CONFIG_CHANGED == 1 ]] && any_slurm_running; then
    say "configuration changed: restarting slurmctld, the slurmd's and slurmdbd"
    stop_daemon "$DIR/slurmctld.pid" slurmctld
    stop_nodes
    stop_daemon "$DIR/slurmdbd.pid" slurmdbd
  fi
  if ! running "$DIR/slurmdbd.pid"; then
    slurmdbd
    say "slurmdbd started"
  fi
  until_ok 60 "slurmdbd on port $DBD_PORT" port_open "$DBD_PORT"
  if ! running "$DIR/slurmctld.pid"; then
    slurmctld
    say "slurmctld started"
  fi
  until_ok 30 "slurmctld to answer scontrol ping" sh -c 'scontrol ping | grep -q UP'
  for n in $(node_names); do
    if ! running "$(node_pidf "$n")"; then
      kill_node_leftovers "$n"
      slurmd -N "$n"
      say "slurmd $n started (port $(node_port "$n"))"
    fi
  done
  # nodes left drained or down by an earlier test run would keep jobs pending
  bad=$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /drain|down|fail/ {print $1}' | sort -u | paste -sd, || true)
  if [[ -n $bad ]]; then scontrol update nodename="$bad" state=resume 2>/dev/null || true; fi
  until_ok 90 "all $NODES nodes to be idle or in use" nodes_ready
  until_ok 30 "sacct to answer" sacct -n -X -S now
}

# --- built versions: the tarball, the cache, the build ------------------------------------

# the cache key: version and the tarball's sha256 prefix (sets KEY, PREFIX); 1 when absent
source_key() {
  local sha
  if [[ ! -f $TARBALL ]]; then
    say "Slurm $SLURM_VERSION: no source tarball $TARBALL (set DISPATCH_SLURM_SOURCES); only 22.05 can run here"
    return 1
  fi
  sha=$(sha256sum "$TARBALL" | cut -c1-12)
  KEY=$SLURM_VERSION-$sha
  PREFIX=$CACHE/$KEY
}

# Debian's build dependencies of what the cluster uses: munge (auth), MariaDB (slurmdbd)
install_build_deps() {
  local want=(build-essential pkgconf libmunge-dev libmariadb-dev munge mariadb-server) missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ $SKIP_APT == 1 ]]; then
    say "build of $SLURM_VERSION needs these packages, not installed: ${missing[*]} (SKIP_APT=1)"
    return 1
  fi
  say "apt-get install ${missing[*]} (no recommends)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The first thing that stopped a failed build: configure's error (with the Debian
# package that provides what it missed, for the ones this cluster needs) or the
# compiler's first error.
build_failure() {
  local log=$1 line
  line=$(grep -m1 -E 'configure: error:' "$log" || true)
  if [[ -n $line ]]; then
    case $line in
      *[Mm]unge*) line+=" (Debian package: libmunge-dev)" ;;
      *[Mm]ysql* | *[Mm]ariadb*) line+=" (Debian package: libmariadb-dev)" ;;
      *"C compiler"* | *cc*) line+=" (Debian package: build-essential)" ;;
    esac
    echo "$line"
    return 0
  fi
  line=$(grep -m1 -E '(error|Error)[: ]' "$log" || true)
  echo "${line:-see the last lines of $log}"
}

# Configure only what the cluster needs: no docs, contribs, X11, REST, sview, GPU
# libraries or cgroup v2 (the cluster runs cgroup v1 like the 22.05 one); -O1, no debug
# symbols; slurmd -N needs --enable-multiple-slurmd. Only src/ is built and installed.
CONFIGURE_FLAGS=(--enable-multiple-slurmd --disable-slurmrestd --disable-x11 --disable-sview
  --disable-debug --disable-cgroupv2 --disable-static --without-hdf5 --without-hwloc
  --without-nvml --without-rsmi --without-oneapi --without-pmix --without-ucx --without-lua
  --without-rdkafka --without-s2n --without-readline --without-freeipmi --without-jwt
  --without-yaml --without-libcurl)
RECIPE="src-only O1 ${CONFIGURE_FLAGS[*]}"

built() { [[ -x $PREFIX/sbin/slurmctld && -f $PREFIX/.recipe && $(<"$PREFIX/.recipe") == "$RECIPE" ]]; }

do_build() {
  local rc=0
  source_key || return 1
  if built; then
    say "Slurm $SLURM_VERSION already built in $PREFIX"
    return 0
  fi
  install -d -m 755 "$CACHE" "$CACHE/logs"
  # the lock is held on fd 9 for the build only: closed before any daemon starts, or
  # the daemons would hold it for ever
  exec 9>"$CACHE/$KEY.lock"
  locked_build || rc=$?
  exec 9>&-
  return $rc
}

locked_build() {
  local start token log work status cpu rc=0
  status=$CACHE/$KEY.status
  if ! flock -n 9; then
    say "a build of $KEY is under way ($(cat "$status" 2>/dev/null)); waiting for it"
    flock 9
  fi
  if built; then
    say "Slurm $SLURM_VERSION already built in $PREFIX"
    return 0
  fi
  token=${DISPATCH_SLURM_BUILD_TOKEN:-$$}
  echo "running $token since $(date -u +%FT%TZ)" >"$status"
  if ! install_build_deps; then
    echo "failed $token $(date -u +%FT%TZ): missing build dependencies" >"$status"
    return 1
  fi
  start=$SECONDS
  log=$CACHE/logs/build-$KEY.log
  work=$CACHE/work-$KEY
  rm -rf "$work" "$PREFIX"
  mkdir -p "$work"
  say "building Slurm $SLURM_VERSION into $PREFIX (log $log)"
  {
    tar -xzf "$TARBALL" -C "$work" --strip-components=1 &&
      (cd "$work" && CFLAGS="-O1 -g0" ./configure --prefix="$PREFIX" "${CONFIGURE_FLAGS[@]}") &&
      make -C "$work/src" -j"${DISPATCH_SLURM_JOBS:-2}" &&
      make -C "$work/src" install
  } >"$log" 2>&1 || rc=$?
  # CPU seconds of everything the build ran (children this shell waited for)
  # (`times` in this shell, not in a pipeline's subshell, which has no children)
  times >"$CACHE/logs/times-$KEY.$$"
  cpu=$(tail -n 1 "$CACHE/logs/times-$KEY.$$" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%.0f", n }')
  rm -f "$CACHE/logs/times-$KEY.$$"
  if ((rc != 0)); then
    local why
    why=$(build_failure "$log")
    echo "failed $token $(date -u +%FT%TZ): $why" >"$status"
    say "BUILD FAILED: Slurm $SLURM_VERSION: $why (log $log)"
    rm -rf "$PREFIX"
    return 1
  fi
  echo "$RECIPE" >"$PREFIX/.recipe"
  rm -rf "$work"
  echo "ok $token $(date -u +%FT%TZ) wall=$((SECONDS - start))s cpu=${cpu}s" >"$status"
  say "built Slurm $SLURM_VERSION in $((SECONDS - start)) s wall, $cpu CPU s (load $(cut -d' ' -f1-3 /proc/loadavg))"
}

build_background() { # start do_build detached (nice 19), return once it holds the lock
  source_key || return 0
  install -d -m 755 "$CACHE/logs"
  local log=$CACHE/logs/build-$KEY.out token="bg-$$-$RANDOM" pid
  # its own session is its own autogroup: the group's nice is set too, or the build
  # would take an equal share of the CPU from the tests it runs beside
  if built; then
    say "Slurm $SLURM_VERSION already built in $PREFIX"
    return 0
  fi
  DISPATCH_SLURM_BUILD_TOKEN=$token SLURM_VERSION=$SLURM_VERSION \
    setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 bash "$0" build' \
    "${BASH_SOURCE[0]}" >"$log" 2>&1 </dev/null 9>&- &
  pid=$!
  for _ in $(seq 100); do
    grep -qs " $token " "$CACHE/$KEY.status" && break
    grep -qs '^ok ' "$CACHE/$KEY.status" && [[ -x $PREFIX/sbin/slurmctld ]] && break
    [[ -d /proc/$pid ]] || break
    sleep 0.1
  done
  say "building Slurm $SLURM_VERSION ($KEY) in the background (pid $pid, nice 19); log $log"
}

# The version whose cluster a state directory holds: its `version` file, or 22.05 for a
# directory the 22.05 layout made (pid files, no version file); empty for a new one.
dir_version() {
  if [[ -f $DIR/version ]]; then cat "$DIR/version"
  elif [[ -e $DIR/slurmctld.pid || -d $DIR/ctld ]]; then echo 22.05
  fi
}

# Refuse to act on another version's cluster (a DISPATCH_SLURM_DIR left exported by
# another version's `env` would otherwise restart or stop that cluster's daemons).
check_dir() {
  local holds
  holds=$(dir_version)
  if [[ -n $holds && $holds != "$SLURM_VERSION" ]]; then
    say "DISPATCH_SLURM_DIR=$DIR holds the Slurm $holds cluster, not $SLURM_VERSION: unset it or give this version its own"
    exit 2
  fi
}

# PATH and SLURM_CONF of this version's cluster, exported for every command below
use_version() {
  check_dir
  if ((BUILT)); then
    source_key || exit 1
    export PATH=$PREFIX/bin:$PREFIX/sbin:$PATH
    export SLURM_CONF=$CONF_DIR/slurm.conf
  fi
  # a caller's own formats would change what the status commands below print
  unset SQUEUE_FORMAT SQUEUE_FORMAT2 SINFO_FORMAT SACCT_FORMAT SQUEUE_SORT SLURM_TIME_FORMAT
}

do_env() {
  check_dir
  if ((BUILT)); then
    source_key || exit 1
    echo "export PATH=$PREFIX/bin:$PREFIX/sbin:\$PATH"
    echo "export SLURM_CONF=$CONF_DIR/slurm.conf"
  fi
  echo "export DISPATCH_SLURM_DIR=$DIR"
  echo "export SLURM_VERSION=$SLURM_VERSION"
}

# a built version's cgroup v1 trees: sub-hierarchies of the host's memory and freezer
# hierarchies, bind-mounted under $CG_ROOT, so its slurm_nodeX trees are not the 22.05
# cluster's (Slurm names them by node name only)
mount_cgroups() {
  local sub src
  for sub in memory freezer; do
    src=/sys/fs/cgroup/$sub/dispatch-slurm-$SLURM_VERSION
    mkdir -p "$src" "$CG_ROOT/$sub"
    mountpoint -q "$CG_ROOT/$sub" || mount --bind "$src" "$CG_ROOT/$sub"
  done
}

main() {
  case ${1:-start} in
    start) ;;
    build)
      ((BUILT)) || { say "22.05 is Debian's package: nothing to build"; exit 0; }
      if [[ ${2:-} == --background ]]; then build_background; else do_build; fi
      exit $? ;;
    env) do_env; exit 0 ;;
    stop) use_version; do_stop; exit 0 ;;
    status) use_version; do_status; exit 0 ;;
    lose)
      [[ $# -ge 2 ]] || { echo "usage: $0 lose NODE [kill|freeze]" >&2; exit 2; }
      use_version; do_lose "$2" "${3:-kill}"; exit 0 ;;
    restore)
      [[ $# -ge 2 ]] || { echo "usage: $0 restore NODE" >&2; exit 2; }
      use_version; do_restore "$2"; exit 0 ;;
    ctld)
      [[ $# -ge 2 ]] || { echo "usage: $0 ctld stop|start|freeze|thaw" >&2; exit 2; }
      use_version; do_ctld "$2"; exit 0 ;;
    *) echo "usage: $0 [start|stop|status|lose NODE [kill|freeze]|restore NODE|ctld stop|start|freeze|thaw|build [--background]|env]" >&2; exit 2 ;;
  esac

  [[ $(id -u) == 0 ]] || { say "must run as root"; exit 1; }
  started=$SECONDS
  if ((BUILT)); then
    do_build || exit 1
    use_version
  else
    use_version
    install_packages
  fi
  install -d -m 755 "$DIR" "$DIR/ctld" "$DIR/spool" "$DIR/run" "$DIR/log" "$DIR/dev" "$CONF_DIR"
  if ((BUILT)); then echo "$SLURM_VERSION" >"$DIR/version"; fi
  start_munge
  start_mariadb
  probe_cgroup
  if ((BUILT)) && [[ $CGROUP_USED == yes ]]; then mount_cgroups; fi
  write_config
  start_slurm
  echo "cgroup-memory-enforcement: $CGROUP_USED ($CGROUP_WHY)" | tee "$DIR/cgroup-memory"
  sinfo -N -o '%N %T %c %m %G' | awk '!seen[$0]++'
  say "ready in $((SECONDS - started))s (Slurm $SLURM_VERSION)"
}

# Everything above only defines; the line below runs. A long run (a background build)
# has then read the whole file, so an edit of the script cannot change what it does next.
main "$@"; exit $?
