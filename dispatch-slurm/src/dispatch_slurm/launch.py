"""How a command becomes one distributed job on Slurm, and how a script gets the same
contract (S-41, S-42, S-44, S-46, S-47).

The batch script dispatch submits for a command is :data:`WRAPPER`. It runs on the job's
first node and starts **one srun step per node**, at once:

- so that sacct's step rows say which node's tasks failed (a multi-node step has one row
  covering every node, and sacct has no per-task state): that is how a cause names its
  node (S-42);
- each step runs with ``--kill-on-bad-exit=1``, and the first step to fail makes the
  wrapper ``scancel`` every other step of the job at once, so one failing rank ends the
  job within seconds instead of leaving the others to hang; the steps it cancels show
  ``CANCELLED by <uid>``, which the root-cause rule ranks last;
- every step writes with ``--open-mode=append`` into the submission's log directory, one
  file per node and local rank (``<node>.<local rank>.out``/``.err``); the batch script's
  own output (srun's words) goes to ``batch.out``, also appended: a requeued execution
  adds to what the earlier one printed and never truncates it (S-46). ``layout`` gets one
  line per execution saying which nodes it ran on, which is how ``dispatch logs --rank``
  finds a rank's file;
- with a progress window (``DISPATCH_HEARTBEAT`` set), a watcher in the batch shell looks
  every 5 s at the ranks' output files and moves the heartbeat's modification time up to
  the newest one's (``touch -r``): output growing counts as progress, as on ``local``,
  and the supervisor still reads one file (S-47, dispatch-core/docs/endings.md). Only the
  ranks' files count, not ``batch.out`` (the wrapper's and srun's words).

The contract every task sees (S-41): ``MASTER_ADDR`` (the first node's ``NodeAddr``, the
address slurmctld itself reaches that node at, so it resolves on the others),
``MASTER_PORT`` (from the Slurm job id: 20000 + id mod 20000, so two jobs sharing a node
do not collide), ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``NODE_RANK``, ``NNODES``,
``LOCAL_WORLD_SIZE``; and ``DISPATCH_JOB_ID``, ``DISPATCH_SUBMISSION``,
``DISPATCH_EXECUTION`` (Slurm's ``SLURM_RESTART_COUNT``: 0, then 1 after a requeue...),
``DISPATCH_RESUMED`` (1 when an earlier execution of the job ran: a later execution or
submission) (S-44). ``PYTHONUNBUFFERED=1`` so Python ranks print as they go.

A **script** (``spec.script``, which starts its own steps) runs as the child of a short
prelude, :data:`SCRIPT_PRELUDE`, the batch script sbatch is given (:func:`script_body`),
so that a script and a command get one contract on every Slurm release:

- the script's leading ``#SBATCH`` lines are copied above the prelude (sbatch reads them
  there); the script itself is written to a temporary file on the node and run by its own
  ``#!`` line (``/bin/sh`` without one);
- the same ``DISPATCH_EXECUTION``, ``DISPATCH_RESUMED`` and ``PYTHONUNBUFFERED`` as a
  command (:data:`CONTRACT`), beside the ``DISPATCH_JOB_ID``, ``DISPATCH_SUBMISSION``,
  ``DISPATCH_CHECKPOINT_DIR`` and warning variables sbatch passes on to both;
- the warning noted in ``DISPATCH_WARNINGS`` and passed on to the script and its steps
  (:mod:`dispatch_slurm.warning`); HUP, INT, TERM, USR1 and USR2 passed on to the script;
- with a progress window, the batch output growing is progress: a watcher moves the
  heartbeat up to the newest of the prelude's own stdout and stderr, which are the batch
  output wherever ``--output``/``--error`` put it (``/proc/<pid>/fd/1`` and ``2``);
- the prelude ends as the script did: with its exit status, or killed by the same signal
  (so Slurm records ``0:9`` for a script killed by SIGKILL, as for the script alone).

Launchers (:class:`dispatch.Launcher`):

- ``tasks``: the command runs once per task (nodes x tasks-per-node), ``RANK`` =
  ``NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``;
- ``torchrun``: the command (``torchrun train.py``) runs once per node with every CPU of
  the node's allocation, and torchrun's own ``PET_NNODES``, ``PET_NPROC_PER_NODE``,
  ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT`` set (static rendezvous):
  torchrun then sets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` for its workers itself.
"""

from __future__ import annotations

import base64
import os
from functools import lru_cache
from pathlib import Path

from dispatch_slurm.tags import encode_job_id

#: what every execution's environment gets from the batch shell, a command's (:data:`WRAPPER`)
#: or a script's (:data:`SCRIPT_PRELUDE`) alike (S-44)
CONTRACT = r"""export DISPATCH_EXECUTION=${SLURM_RESTART_COUNT:-0}
DISPATCH_RESUMED=0
if ((DISPATCH_EXECUTION > 0 || ${DISPATCH_SUBMISSION:-1} > 1)); then DISPATCH_RESUMED=1; fi
export DISPATCH_RESUMED PYTHONUNBUFFERED=1
"""

#: the batch script for a command: argv = LAUNCHER LOGDIR COMMAND...
WRAPPER = (
    r"""#!/bin/bash
# dispatch-slurm launch wrapper: one srun step per node (see dispatch_slurm/launch.py)
launcher=$1 logdir=$2
shift 2
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
export NNODES=${#nodes[@]}
if ((NNODES == 0 || NNODES != ${SLURM_JOB_NUM_NODES:-$NNODES})); then
  echo "dispatch: could not list the job's nodes ($SLURM_JOB_NODELIST): not starting" >&2
  exit 1
fi
export LOCAL_WORLD_SIZE=${SLURM_NTASKS_PER_NODE:-1}
export WORLD_SIZE=$((NNODES * LOCAL_WORLD_SIZE))
addr=$(scontrol show node "${nodes[0]}" -o 2>/dev/null | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
export MASTER_ADDR=${addr:-${nodes[0]}}
export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
"""
    + CONTRACT
    + r"""warned=0  # the warning (--signal=B:SIG@S): noted, passed on to every step (warning.py)
if [[ -n ${DISPATCH_WARN_SIGNAL:-} ]]; then
  trap 'warned=1
    echo "execution=$DISPATCH_EXECUTION signal=SIG$DISPATCH_WARN_SIGNAL $(squeue -h -j \
      "$SLURM_JOB_ID" -o "time_left=%L time_limit=%l") at=$(date -u +%FT%TZ)" >>"$logdir/warnings"
    scancel --quiet --signal="$DISPATCH_WARN_SIGNAL" "$SLURM_JOB_ID"' "$DISPATCH_WARN_SIGNAL"
fi
echo "execution=$DISPATCH_EXECUTION nodes=${nodes[*]} tasks_per_node=$LOCAL_WORLD_SIZE" \
  >>"$logdir/layout"
echo "dispatch: execution $DISPATCH_EXECUTION on ${nodes[*]}," \
  "master $MASTER_ADDR:$MASTER_PORT, launcher $launcher"
cpus=$((LOCAL_WORLD_SIZE * ${SLURM_CPUS_PER_TASK:-1}))
exits="$logdir/exits.$DISPATCH_EXECUTION"  # a failing task notes its status here
if [[ -n ${DISPATCH_HEARTBEAT:-} ]]; then  # the ranks' output growing is progress (S-47)
  (while kill -0 $$ 2>/dev/null && sleep 5; do
    newest=$(ls -t "$logdir"/*.*.out "$logdir"/*.*.err 2>/dev/null | head -n 1)
    if [[ -n $newest && ( ! -e $DISPATCH_HEARTBEAT || $newest -nt $DISPATCH_HEARTBEAT ) ]]; then
      touch -r "$newest" "$DISPATCH_HEARTBEAT"
    fi
  done) &
  watcher=$!
  disown "$watcher"  # never one of the steps wait -n counts
  trap 'kill "$watcher" 2>/dev/null' EXIT
fi
# srun again, after a pause, while its own words say it could not reach the controller
# for the allocation or the step (slurmctld restarting or frozen): no task ran then, so
# the step still starts once; its words go to the batch output when it ends
unreached='(Unable to confirm allocation|Unable to create step) for job [0-9]+: '
unreached+='(Unable to contact slurm controller|Socket timed out|Connection reset by peer|'
unreached+='Connection refused|Zero Bytes were transmitted|Communication connection failure)'
step() {
  local said rc since=$SECONDS
  said=$(mktemp "${TMPDIR:-/tmp}/dispatch-srun.XXXXXX") || { "$@"; return; }
  while :; do
    "$@" 2>"$said"
    rc=$?
    cat "$said" >&2
    if ((rc == 0 || SECONDS - since > 600)) || ! grep -Eq "$unreached" "$said"; then break; fi
    echo "dispatch: srun could not reach the controller to start the step: again in 5 s" >&2
    sleep 5
  done
  rm -f "$said"
  return "$rc"
}
# each task: the contract, then the command as a child whose failing status is noted;
# signals are handled (not ignored) here, so the command keeps their default dispositions,
# and passed on to it once it runs: a signal Slurm sends to this shell only (scancel
# --signal, a preemption SIGTERM) still reaches the command, which may checkpoint on it
task='RANK=$((NODE_RANK * LOCAL_WORLD_SIZE + SLURM_LOCALID)) LOCAL_RANK=$SLURM_LOCALID
export RANK LOCAL_RANK
exits=$DISPATCH_EXITS  # where a failing status is noted: not for the command to see
unset DISPATCH_EXITS
trap : HUP INT TERM USR1 USR2
"$@" &
child=$!
# the warning reaches this shell only: passed on too (S-45, dispatch_slurm/warning.py)
for sig in HUP INT TERM USR1 USR2 ${DISPATCH_WARN_SIGNAL:-}; do
  trap "trapped=1; kill -s $sig \$child 2>/dev/null" "$sig"
done
# a trap interrupts wait (status > 128): wait again for the command own status
while :; do trapped=0; wait "$child"; rc=$?; [ "$trapped" = 1 ] && [ "$rc" -gt 128 ] || break; done
if [ "$rc" -ne 0 ]; then echo "$RANK $rc" >>"$exits"; fi
exit "$rc"'
pids=()
for i in "${!nodes[@]}"; do
  # the node's name, not %N: srun's %N is the host name, the same for every slurmd of a
  # host running several
  out="$logdir/${nodes[i]}.%t"
  common=(--nodes=1 --nodelist="${nodes[i]}" --kill-on-bad-exit=1 --unbuffered
          --open-mode=append --output="$out.out" --error="$out.err")
  if [[ $launcher == torchrun ]]; then
    PET_NNODES=$NNODES PET_NPROC_PER_NODE=$LOCAL_WORLD_SIZE PET_NODE_RANK=$i \
    PET_MASTER_ADDR=$MASTER_ADDR PET_MASTER_PORT=$MASTER_PORT NODE_RANK=$i \
      step srun "${common[@]}" --job-name="dsp-node-$i" --ntasks=1 --cpus-per-task=$cpus "$@" &
  else
    first=$((i * LOCAL_WORLD_SIZE))
    DISPATCH_EXITS=$exits NODE_RANK=$i step srun "${common[@]}" --ntasks="$LOCAL_WORLD_SIZE" \
      --job-name="dsp-ranks-$first-$((first + LOCAL_WORLD_SIZE - 1))" \
      /bin/sh -c "$task" dispatch-task "$@" &
  fi
  pids+=($!)
done
status=0
for _ in "${pids[@]}"; do
  wait -n
  rc=$?
  while ((rc > 128 && warned == 1)); do warned=2; wait -n; rc=$?; done  # the trap woke it
  if ((rc != 0 && status == 0)); then
    status=$rc
    echo "dispatch: a step ended with status $rc: cancelling the job's other steps"
    for step in $(squeue -h -s -j "$SLURM_JOB_ID" -o %i); do
      case $step in *.batch | *.extern) ;; *) scancel --quiet "$step" ;; esac
    done
  fi
done
# srun answers 143 when --kill-on-bad-exit ended its step: the job ends with the first
# failing task's own status instead (Slurm records no per-task exit code)
if ((status != 0)) && [[ -s $exits ]]; then
  read -r _ first <"$exits"
  [[ $first =~ ^[0-9]+$ ]] && status=$first
fi
exit $status
"""
)

#: the batch script for ``spec.script`` (:func:`script_body` fills in the script's
#: ``#SBATCH`` lines, how to run it and the script itself, base64)
SCRIPT_PRELUDE = (
    r"""#!/bin/bash
@DIRECTIVES@# dispatch-slurm: the job's script runs as this shell's child, with the environment, the
# warning, the progress and the signals a command gets (see dispatch_slurm/launch.py)
"""
    + CONTRACT
    + r"""script=$(mktemp "${TMPDIR:-/tmp}/dispatch-script.XXXXXX") || exit 1
base64 -d >"$script" <<'DISPATCH_SCRIPT_END'
@PAYLOAD@
DISPATCH_SCRIPT_END
chmod 700 "$script"
watcher=
if [[ -n ${DISPATCH_HEARTBEAT:-} ]]; then  # the batch output growing is progress (S-47)
  # this shell's stdout and stderr are the batch output wherever --output/--error put it
  (while kill -0 $$ 2>/dev/null && sleep 5; do
    for out in /proc/$$/fd/1 /proc/$$/fd/2; do
      if [[ -f $out && ( ! -e $DISPATCH_HEARTBEAT || $out -nt $DISPATCH_HEARTBEAT ) ]]; then
        touch -r "$out" "$DISPATCH_HEARTBEAT"
      fi
    done
  done) </dev/null >/dev/null 2>&1 &
  watcher=$!
fi
child=
# signals Slurm sends this shell only (scancel --signal, a preemption or time limit's
# SIGTERM) are passed on to the script, which may checkpoint on them
for sig in HUP INT TERM USR1 USR2; do
  trap "trapped=1; kill -s $sig \$child 2>/dev/null" "$sig"
done
if [[ -n ${DISPATCH_WARN_SIGNAL:-} ]]; then  # the warning: noted, then passed on (warning.py)
  trap 'trapped=1
    echo "execution=$DISPATCH_EXECUTION signal=SIG$DISPATCH_WARN_SIGNAL $(squeue -h -j \
      "$SLURM_JOB_ID" -o "time_left=%L time_limit=%l") at=$(date -u +%FT%TZ)" >>"$DISPATCH_WARNINGS"
    kill -s "$DISPATCH_WARN_SIGNAL" "$child" 2>/dev/null
    scancel --quiet --signal="$DISPATCH_WARN_SIGNAL" "$SLURM_JOB_ID"' "$DISPATCH_WARN_SIGNAL"
fi
@RUN@ "$@" &
child=$!
# a trap interrupts wait (status > 128): wait again for the script's own status
while :; do trapped=0; wait "$child"; rc=$?; ((trapped == 1 && rc > 128)) || break; done
rm -f "$script"
if [[ -n $watcher ]]; then kill "$watcher" 2>/dev/null; fi
if ((rc > 128)) && sig=$(kill -l $((rc - 128)) 2>/dev/null); then
  # the script was ended by a signal: so is this shell, so that Slurm records the job's
  # ending as it would for the script alone (a signal, not an exit code)
  case $sig in
    STOP | TSTP | TTIN | TTOU | CONT | CHLD | URG | WINCH) ;;  # these end nothing
    *) ulimit -c 0; trap - "$sig" 2>/dev/null; kill -s "$sig" $$ ;;
  esac
fi
exit $rc
"""
)


def script_body(script: str) -> str:
    """The batch script for ``spec.script``: :data:`SCRIPT_PRELUDE` around it. The script's
    leading ``#SBATCH`` lines are copied above the prelude, so sbatch still reads them; a
    script without a ``#!`` line is run by ``/bin/sh``, as on the other backends."""
    lines = script.splitlines()
    shebang = bool(lines) and lines[0].startswith("#!")
    directives = []
    for line in lines[1:] if shebang else lines:
        if line.startswith("#SBATCH"):
            directives.append(line + "\n")
        elif line.strip() and not line.startswith("#"):
            break  # sbatch reads directives only before the first command
    payload = base64.encodebytes(script.encode()).decode().strip()
    run = '"$script"' if shebang else '/bin/sh "$script"'
    body = SCRIPT_PRELUDE.replace("@RUN@", run).replace("@PAYLOAD@", payload)
    return body.replace("@DIRECTIVES@", "".join(directives))  # the user's words last


#: where the per-submission log directories go unless ``DISPATCH_SLURM_LOG_DIR`` says
DEFAULT_LOG_ROOT = "~/.local/share/dispatch/slurm-logs"


def log_root() -> Path:
    """Where job output goes; must be a directory every node reaches (a shared home)."""
    return _root(os.environ.get("DISPATCH_SLURM_LOG_DIR", DEFAULT_LOG_ROOT))


@lru_cache(maxsize=16)
def _root(configured: str) -> Path:
    return Path(os.path.expanduser(configured))


def log_dir(job_id: str, submission: int) -> Path:
    """One directory per submission, so a resubmission never writes over an earlier one."""
    return log_root() / f"job-{encode_job_id(job_id)}" / f"submission-{submission}"


def job_environment(job_id: str, submission: int, env: dict[str, str]) -> dict[str, str]:
    """The environment sbatch passes on to the job: the submitter's, without dispatch's own
    configuration (``DISPATCH_*``: store URLs, credentials), plus the job's own and the
    DISPATCH_JOB_ID / DISPATCH_SUBMISSION tags (S-44)."""
    return submitter_environment() | added_environment(job_id, submission, env)


def submitter_environment() -> dict[str, str]:
    """This process's environment without dispatch's own configuration (``DISPATCH_*``)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}


def added_environment(job_id: str, submission: int, env: dict[str, str]) -> dict[str, str]:
    """The job's own environment and the DISPATCH_JOB_ID / DISPATCH_SUBMISSION tags."""
    return {**env, "DISPATCH_JOB_ID": job_id, "DISPATCH_SUBMISSION": str(submission)}
