"""How a command becomes one distributed job on Kubeflow Trainer (S-41, S-42, S-44).

The Trainer's torch plugin (``pkg/runtime/framework/plugins/torch/torch.go``, Trainer
2.2) already gives every trainer node pod torchrun's own variables:

- ``PET_NNODES``: ``spec.trainer.numNodes``;
- ``PET_NPROC_PER_NODE``: ``spec.trainer.numProcPerNode`` (dispatch always sets it to
  ``tasks_per_node``, so the runtime never guesses "auto" from the GPUs or CPUs);
- ``PET_NODE_RANK``: the pod's Indexed Job completion index (a downward-API reference to
  the annotation ``batch.kubernetes.io/job-completion-index``);
- ``PET_MASTER_ADDR``: ``<trainjob>-node-0-0.<trainjob>``, node 0's name in the JobSet's
  headless service, which resolves from every pod of the job;
- ``PET_MASTER_PORT``: 29500. Fixed, unlike Slurm's per-job port, and that is right here:
  every pod has its own network namespace, so two jobs never share a port.

The webhook refuses a TrainJob whose ``env`` sets any of them (they are reserved), so
dispatch does not; :data:`LAUNCHER` maps them onto the contract every backend gives
(the same names and meanings as dispatch-slurm's wrapper):

=====================  ==============================================================
``NNODES``             ``PET_NNODES``
``NODE_RANK``          ``PET_NODE_RANK``
``LOCAL_WORLD_SIZE``   ``PET_NPROC_PER_NODE``
``WORLD_SIZE``         ``NNODES * LOCAL_WORLD_SIZE``
``RANK``               ``NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``
``LOCAL_RANK``         0 .. ``LOCAL_WORLD_SIZE - 1``
``MASTER_ADDR``        ``PET_MASTER_ADDR``
``MASTER_PORT``        ``PET_MASTER_PORT``
=====================  ==============================================================

Launchers (:class:`dispatch.Launcher`): ``tasks`` starts the command once per task
(``exec`` when there is one task per node, so signals and the exit code are the
command's own); a failing task makes the launcher stop its node's other tasks at once and
exit with that task's code, and the Job then fails the other nodes (their pods end 143,
which the root-cause rule ranks after the failure). ``torchrun`` runs the command once
per node untouched: torchrun reads ``PET_*`` itself (static rendezvous) and sets
``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` for its workers.

Every execution also sees ``DISPATCH_JOB_ID``, ``DISPATCH_SUBMISSION``,
``DISPATCH_EXECUTION`` (the JobSet restart attempt, from the pod's label
``jobset.sigs.k8s.io/restart-attempt``) and ``DISPATCH_RESUMED`` (1 when an earlier
execution of the job ran: a later attempt or submission) (S-44), and
``PYTHONUNBUFFERED=1``. Nothing of dispatch's own configuration reaches the pod: only
what ``JobSpec.env`` says.
"""

from __future__ import annotations

from typing import Any

from dispatch.model.enums import Launcher
from dispatch.model.spec import JobSpec

from dispatch_kubeflow import tags

#: the torch plugin's reserved variables: a TrainJob may not set them
RESERVED = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
#: the variables dispatch sets itself; a spec's env may not set them either
OWN = frozenset({"DISPATCH_JOB_ID", "DISPATCH_SUBMISSION", "DISPATCH_EXECUTION"})
#: argv[3] of the launcher (its ``$0``), which the emulated kubelet also recognises
NAME = "dispatch-launch"

#: the container's program: ``/bin/sh -c LAUNCHER dispatch-launch LAUNCHER -- COMMAND...``
#: POSIX sh (no bash in many training images), so no ``wait -n``: each task reports its
#: failure to the launcher with SIGUSR1, and the first failure's code is kept in a
#: directory made atomically. A stop reaches each task's own process (the launcher
#: forwards SIGTERM); what a task started itself ends with the container, whose every
#: process the kubelet kills once the launcher, its main process, exits.
LAUNCHER = r"""launcher=$1
shift 2
export NNODES="${PET_NNODES:-1}" NODE_RANK="${PET_NODE_RANK:-0}"
export LOCAL_WORLD_SIZE="${PET_NPROC_PER_NODE:-1}"
export MASTER_ADDR="${PET_MASTER_ADDR:-127.0.0.1}" MASTER_PORT="${PET_MASTER_PORT:-29500}"
export WORLD_SIZE=$((NNODES * LOCAL_WORLD_SIZE))
export DISPATCH_EXECUTION="${DISPATCH_EXECUTION:-0}" PYTHONUNBUFFERED=1
if [ "$DISPATCH_EXECUTION" -gt 0 ] || [ "${DISPATCH_SUBMISSION:-1}" -gt 1 ]; then
  export DISPATCH_RESUMED=1
else
  export DISPATCH_RESUMED=0
fi
echo "dispatch: execution $DISPATCH_EXECUTION of $DISPATCH_JOB_ID" \
  "submission $DISPATCH_SUBMISSION, node $NODE_RANK of $NNODES," \
  "master $MASTER_ADDR:$MASTER_PORT, launcher $launcher" >&2
if [ "$launcher" = torchrun ]; then
  exec "$@"
fi
if [ "$LOCAL_WORLD_SIZE" -le 1 ]; then
  export RANK="$NODE_RANK" LOCAL_RANK=0
  exec "$@"
fi
state=$(mktemp -d "${TMPDIR:-/tmp}/dispatch-launch.XXXXXX")
me=$$
pids=
trap 'kill -TERM $pids 2>/dev/null' TERM INT
trap ':' USR1
i=0
while [ "$i" -lt "$LOCAL_WORLD_SIZE" ]; do
  (
    export RANK=$((NODE_RANK * LOCAL_WORLD_SIZE + i)) LOCAL_RANK=$i
    trap 'kill -TERM "$task" 2>/dev/null' TERM
    "$@" &
    task=$!
    wait "$task"
    rc=$?
    while kill -0 "$task" 2>/dev/null; do
      wait "$task"
      rc=$?
    done
    if [ "$rc" -ne 0 ] && mkdir "$state/failed" 2>/dev/null; then
      echo "$rc" >"$state/failed/rc"
      kill -USR1 "$me"
    fi
    : >"$state/done.$i"
    exit "$rc"
  ) &
  pids="$pids $!"
  i=$((i + 1))
done
while :; do
  if [ -d "$state/failed" ]; then
    echo "dispatch: a task failed with status $(cat "$state/failed/rc" 2>/dev/null):" \
      "stopping this node's other tasks" >&2
    kill -TERM $pids 2>/dev/null
    wait
    break
  fi
  set -- "$state"/done.*
  if [ -e "$1" ] && [ "$#" -ge "$LOCAL_WORLD_SIZE" ]; then break; fi
  sleep 1 &
  wait $!
done
status=0
if [ -f "$state/failed/rc" ]; then status=$(cat "$state/failed/rc"); fi
rm -rf "$state"
exit "$status"
"""


#: runs ``JobSpec.script`` (its text, argv[1]) by its own ``#!`` line: written to a file
#: and executed, never fed to sh (a Python script would stop sh at its first line); a
#: script without ``#!`` is run by sh, as execve's ENOEXEC fallback does
RUN_SCRIPT = r"""f=$(mktemp "${TMPDIR:-/tmp}/dispatch-script.XXXXXX") || exit 126
printf '%s' "$1" >"$f" && chmod 700 "$f" || exit 126
case $(head -c 2 "$f") in
  '#!') exec "$f" ;;
  *) exec /bin/sh "$f" ;;
esac
"""
SCRIPT_NAME = "dispatch-script"


def container_command(spec: JobSpec) -> list[str]:
    """The trainer container's argv: the launcher around the user's command, or around
    :data:`RUN_SCRIPT` with the script's text."""
    argv = (
        list(spec.command)
        if spec.command
        else ["/bin/sh", "-c", RUN_SCRIPT, SCRIPT_NAME, spec.script or ""]
    )
    return ["/bin/sh", "-c", LAUNCHER, NAME, spec.launcher.value, "--", *argv]


def container_env(job_id: str, submission: int, spec: JobSpec) -> list[dict[str, Any]]:
    """The spec's own variables, then dispatch's (S-44): the execution index comes from
    the pod's restart-attempt label through the downward API."""
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    env += [
        {"name": "DISPATCH_JOB_ID", "value": job_id},
        {"name": "DISPATCH_SUBMISSION", "value": str(submission)},
        {
            "name": "DISPATCH_EXECUTION",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{tags.RESTART_ATTEMPT}']"}},
        },
    ]
    return env


def uses_torchrun(spec: JobSpec) -> bool:
    return spec.launcher is Launcher.TORCHRUN
