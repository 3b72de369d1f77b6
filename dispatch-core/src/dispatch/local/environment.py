"""What a local job's command sees in its environment (S-44, S-41 for N=1).

Decided:

- **The submitter's environment.** ``dispatch submit`` (any :func:`dispatch.job_records.create_job`)
  keeps the environment of the process that records the job, in
  ``<state>/environments/<job key>.json`` (0600 in a 0700 directory: it may hold secrets,
  S-51), and every submission of the job starts from it, as ``sbatch`` exports the
  submitting shell's. ``FOO=x dispatch submit ...`` gives the job ``FOO=x`` whichever
  supervisor runs it later. A job recorded elsewhere (another host on a shared
  PostgreSQL record) has no kept environment here: it gets the supervisor's.
- **Never dispatch's own configuration.** Every ``DISPATCH_*`` variable of that
  environment (``DISPATCH_STORE`` with its password, ``DISPATCH_LOCAL_DIR``...) is dropped
  before it is kept; ``spec.env`` (``--env``) is the user's explicit choice and is added.
- **What dispatch adds, last (it wins over both):** ``DISPATCH_JOB_ID``,
  ``DISPATCH_SUBMISSION``, ``DISPATCH_EXECUTION`` (0: a local object runs once),
  ``DISPATCH_RESUMED`` (1 when an earlier object of the job launched its command),
  ``DISPATCH_OBJECT_ID``, ``PYTHONUNBUFFERED=1`` (as on Slurm and Kubeflow: a Python
  job's output reaches its log, and counts as progress, as it prints), and the one-node
  torch.distributed contract: ``MASTER_ADDR`` 127.0.0.1, ``MASTER_PORT`` chosen per job
  (29500 + a hash of the job id, or a free port when that one is taken), ``WORLD_SIZE``
  = ``LOCAL_WORLD_SIZE`` = ``NNODES`` = 1, ``RANK`` = ``LOCAL_RANK`` = ``NODE_RANK`` =
  0; with ``launcher = torchrun`` also torchrun's ``PET_NNODES=1``, ``PET_NODE_RANK=0``,
  ``PET_NPROC_PER_NODE=1``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``, so
  ``torchrun train.py`` needs no rendezvous arguments.
"""

from __future__ import annotations

import json
import os
import socket
import zlib
from collections.abc import Mapping
from pathlib import Path

from dispatch.local import endings
from dispatch.local.layout import StateDir, job_key, private_mkdir, write_atomic
from dispatch.local.records import ObjectMeta
from dispatch.model.enums import Launcher
from dispatch.model.errors import DecodeError
from dispatch.model.spec import JobSpec

#: Variables of dispatch's own configuration: never passed on to a job.
OWN = "DISPATCH_"
MASTER_ADDR = "127.0.0.1"


def kept_file(state: StateDir, job_id: str) -> Path:
    return state.root / "environments" / f"{job_key(job_id)}.json"


def without_own(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not k.startswith(OWN)}


def keep(state: StateDir, job_id: str, environ: Mapping[str, str]) -> None:
    """Keep the submitter's environment for every submission of ``job_id`` (0600)."""
    path = kept_file(state, job_id)
    private_mkdir(path.parent)
    write_atomic(path, json.dumps(without_own(environ), sort_keys=True))


def submitters(state: StateDir, job_id: str) -> dict[str, str]:
    """The kept environment of ``job_id``, or (none kept) this process's, without
    dispatch's own configuration either way."""
    path = kept_file(state, job_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return without_own(os.environ)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DecodeError(f"{path}: not the JSON dispatch wrote: {exc}", field="env") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise DecodeError(f"{path}: not a mapping of names to strings", field="env")
    return without_own(data)


def master_port(job_id: str) -> int:
    """The job's own port when it is free on this host, else any free one."""
    preferred = 29500 + zlib.crc32(job_id.encode()) % 20000
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((MASTER_ADDR, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free TCP port on 127.0.0.1 for MASTER_PORT")


def contract(
    job_id: str, submission: int, object_id: str, launcher: Launcher, *, resumed: bool, port: int
) -> dict[str, str]:
    """What dispatch adds for one execution of the object ``object_id``."""
    added = {
        "DISPATCH_JOB_ID": job_id,
        "DISPATCH_SUBMISSION": str(submission),
        "DISPATCH_EXECUTION": "0",
        "DISPATCH_RESUMED": "1" if resumed else "0",
        "DISPATCH_OBJECT_ID": object_id,
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": MASTER_ADDR,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "NODE_RANK": "0",
        "NNODES": "1",
        "LOCAL_WORLD_SIZE": "1",
    }
    if launcher is Launcher.TORCHRUN:
        added |= {
            "PET_NNODES": "1",
            "PET_NODE_RANK": "0",
            "PET_NPROC_PER_NODE": "1",
            "PET_MASTER_ADDR": MASTER_ADDR,
            "PET_MASTER_PORT": str(port),
        }
    return added


def resumed(state: StateDir, job_id: str, object_id: str) -> bool:
    """Whether an earlier object of the job launched its command (S-44)."""
    try:
        names = os.listdir(state.job_index(job_id))
    except FileNotFoundError:
        return False
    return any(
        (state.objects / name / "started.json").exists()
        for name in names
        if name != object_id and not name.startswith(".")
    )


def added(
    state: StateDir, job_id: str, submission: int, object_id: str, spec: JobSpec
) -> dict[str, str]:
    """What one object's command gets on top of the submitter's environment: ``spec.env``,
    then dispatch's, decided when the object is prepared (the port too: the job's own if
    free then, else another free one)."""
    port = master_port(job_id)
    again = resumed(state, job_id, object_id)
    return {
        **spec.env,
        **contract(job_id, submission, object_id, spec.launcher, resumed=again, port=port),
        **endings.environment(state, job_id, spec),  # S-44: DISPATCH_CHECKPOINT_DIR, _HEARTBEAT
    }


def for_job(state: StateDir, meta: ObjectMeta) -> dict[str, str]:
    """The whole environment of one execution: the submitter's, then what the object was
    prepared with (:func:`added`); creates the directories that names."""
    endings.make_directories(state, meta)
    return {**submitters(state, meta.job_id), **meta.env}
