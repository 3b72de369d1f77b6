"""The local backend's logs: each object's ``stdout`` and ``stderr`` files (S-46).

A submission is one object and one process on one host, so its log is one file per
stream; a resubmission is a new object, so earlier submissions' files stay as they were.
Files are read from the offset asked in fixed chunks, never whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dispatch.local.layout import StateDir
from dispatch.local.processes import hostname
from dispatch.local.records import Ending, ObjectMeta, Started, read
from dispatch.model.enums import Stream
from dispatch.model.errors import BadInput, DecodeError, Unreachable
from dispatch.model.selection import LogSelection

CHUNK = 1 << 16


def read_output(state: StateDir, object_id: str, selection: LogSelection) -> Iterator[bytes]:
    """Check the selection against the object now; return a generator over the file from
    the selection's offset."""
    job_id, submission = selection.job_id, selection.submission
    node, rank = selection.node, selection.rank
    obj = state.object_dir(object_id)
    where = f"submission {submission} of job {job_id} ({object_id})"
    try:
        meta = read(obj.meta, ObjectMeta)
        started = read(obj.started, Started)
        ending = read(obj.end, Ending)
    except DecodeError:
        meta = started = ending = None
    except OSError as exc:
        raise Unreachable(f"local state directory {state.root}: {exc}") from exc
    if meta is not None and (meta.job_id, meta.submission) != (job_id, submission):
        raise BadInput(f"{object_id} is submission {meta.submission} of job {meta.job_id}")
    host = started.process.host if started else ending.host if ending else hostname()
    if node is not None and node != host:
        raise BadInput(f"node {node!r}: {where} ran on {host} only")
    if rank not in (None, 0):
        raise BadInput(f"rank {rank}: {where} ran one task, rank 0")
    path = obj.stdout if selection.stream is Stream.STDOUT else obj.stderr
    return _chunks(state, path, selection.offset)


def _chunks(state: StateDir, path: Path, offset: int) -> Iterator[bytes]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return  # nothing printed yet
    except OSError as exc:
        raise Unreachable(f"local state directory {state.root}: {exc}") from exc
    with f:
        f.seek(offset)
        while chunk := f.read(CHUNK):
            yield chunk
