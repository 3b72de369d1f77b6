"""What a job printed, through each backend's ``dispatch_logs`` hook (S-46).

Every submission keeps its own output (earlier ones after a recovery are evidence), so a
job's log is the submissions' logs in order. Everything streams: chunks go from the
backend to the caller as they come, ``tail`` keeps only the last lines, and ``follow``
asks the backend again from the byte offset it reached, so memory stays flat whatever
the size of the log.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dispatch.model.enums import Capability, State
from dispatch.model.errors import BadInput

if TYPE_CHECKING:
    from dispatch.backends import Backend
    from dispatch.core.status import SubmissionStatus
    from dispatch.handle import JobHandle

STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class LogChunk:
    """Bytes one submission printed, in order; ``text`` decodes them for display."""

    submission: int
    object_id: str
    stream: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def last_lines(chunks: Iterable[bytes], count: int) -> Iterator[bytes]:
    """The last ``count`` lines of a stream of chunks, holding no more than those lines."""
    lines: deque[bytes] = deque(maxlen=count) if count else deque(maxlen=0)
    partial = b""
    for chunk in chunks:
        parts = (partial + chunk).split(b"\n")
        partial = parts.pop()
        lines.extend(part + b"\n" for part in parts)
    if partial and count:
        lines.append(partial)
    if lines:
        yield b"".join(lines)


def _check(
    backend: Backend,
    stream: str,
    node: str | None,
    rank: int | None,
    tail: int | None,
    submission: int | None,
) -> None:
    if stream not in STREAMS:
        raise BadInput(f"stream {stream!r}: give stdout or stderr")
    if node is not None and rank is not None:
        raise BadInput("give --node or --rank, not both")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise BadInput(f"rank {rank!r}: give a rank, 0 or more")
    if node is not None and not node:
        raise BadInput("node: give a node name")
    if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 0):
        raise BadInput(f"tail {tail!r}: give a number of lines, 0 or more")
    if submission is not None and (
        isinstance(submission, bool) or not isinstance(submission, int) or submission < 1
    ):
        raise BadInput(f"submission {submission!r}: give a submission number, 1 or more")
    if Capability.LOGS not in backend.declarations.capabilities:
        raise BadInput(
            f"backend {backend.name!r} does not provide logs (it does not declare the "
            "'logs' capability); look where its scheduler keeps job output"
        )


def job_logs(
    handle: JobHandle,
    *,
    submission: int | None = None,
    stream: str = "stdout",
    node: str | None = None,
    rank: int | None = None,
    tail: int | None = None,
    follow: bool = False,
    interval: float = 1.0,
) -> Iterator[LogChunk]:
    """Check the request now (errors before any output), then stream the chunks."""
    from dispatch import units

    job = handle.record()
    backend = handle.client.backend(job.backend)
    _check(backend, stream, node, rank, tail, submission)
    numbers = [s.number for s in job.submissions]
    if submission is not None and submission not in numbers:
        have = ", ".join(map(str, numbers)) or "none yet"
        raise BadInput(f"job {job.job_id} has no submission {submission} (submissions: {have})")
    if follow:
        interval = units.seconds(interval, "interval")
        return _follow(handle, backend, submission, stream, node, rank, tail, interval)
    targets = [
        (s.number, s.object_id)
        for s in job.submissions
        if s.object_id is not None and submission in (None, s.number)
    ]
    return _read_all(backend, job.job_id, targets, stream, node, rank, tail)


def _read_all(
    backend: Backend,
    job_id: str,
    targets: list[tuple[int, str]],
    stream: str,
    node: str | None,
    rank: int | None,
    tail: int | None,
) -> Iterator[LogChunk]:
    for number, object_id in targets:
        chunks = backend.logs(job_id, number, object_id, stream=stream, node=node, rank=rank)
        if tail is not None:
            chunks = last_lines(chunks, tail)
        for data in chunks:
            if data:
                yield LogChunk(number, object_id, stream, data)


def _object_of(sub: SubmissionStatus) -> str | None:
    if sub.object_id is not None:
        return sub.object_id
    return sub.objects[0].object_id if sub.objects else None


def _follow(
    handle: JobHandle,
    backend: Backend,
    only: int | None,
    stream: str,
    node: str | None,
    rank: int | None,
    tail: int | None,
    interval: float,
) -> Iterator[LogChunk]:
    """Stream every selected submission from where it was left, until the job ends or is
    held and every submission's objects have ended and been read to the end."""
    offsets: dict[int, int] = {}
    done: set[int] = set()
    while True:
        status = handle.status()
        finished = status.state.terminal or status.state is State.HELD
        for sub in status.submissions:
            if (only is not None and sub.number != only) or sub.number in done:
                continue
            object_id = _object_of(sub)
            ended = (bool(sub.objects) and not any(o.alive for o in sub.objects)) or (
                not sub.objects and (finished or sub.failed is not None)
            )
            if object_id is None:
                if ended:
                    done.add(sub.number)
                continue
            first = sub.number not in offsets
            offset = offsets.setdefault(sub.number, 0)
            chunks = backend.logs(
                status.job_id,
                sub.number,
                object_id,
                stream=stream,
                node=node,
                rank=rank,
                offset=offset,
            )
            counted = _counting(chunks, offsets, sub.number)
            shown = last_lines(counted, tail) if first and tail is not None else counted
            for data in shown:
                if data:
                    yield LogChunk(sub.number, object_id, stream, data)
            if ended:
                done.add(sub.number)
        if only is not None and only in done:
            return
        wanted = {s.number for s in status.submissions if only in (None, s.number)}
        if finished and wanted <= done:
            return
        time.sleep(interval)


def _counting(chunks: Iterable[bytes], offsets: dict[int, int], number: int) -> Iterator[bytes]:
    for data in chunks:
        offsets[number] += len(data)
        yield data
