"""What a job printed, through each backend's ``dispatch_logs`` hook (S-46).

Every submission keeps its own output (earlier ones after a recovery are evidence), so a
job's log is the submissions' logs in order. Everything streams: chunks go from the
backend to the caller as they come, ``tail`` keeps only the last lines, and ``follow``
asks the backend again from the byte offset it reached, so memory stays flat whatever
the size of the log. The request is a :class:`dispatch.LogSelection`, checked when it is
made; this module needs the job, its backend and a way to ask its status, not a handle.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dispatch.model.enums import Capability, State, Stream
from dispatch.model.errors import BadInput

if TYPE_CHECKING:
    from dispatch.backends import Backend
    from dispatch.core.job import Job
    from dispatch.core.status import Status, SubmissionStatus
    from dispatch.model.selection import LogSelection

STREAMS = tuple(s.value for s in Stream)


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


def job_logs(
    job: Job,
    backend: Backend,
    status: Callable[[], Status],
    selection: LogSelection,
    *,
    follow: bool = False,
    interval: float = 1.0,
) -> Iterator[LogChunk]:
    """Check the request now (errors before any output), then stream the chunks.

    :param job: the job as its record says; ``backend`` is the one it runs on.
    :param status: the job's status now (the record plus a discovery), asked on each
        round of ``follow``.
    """
    from dispatch import units

    if Capability.LOGS not in backend.declarations.capabilities:
        raise BadInput(
            f"backend {backend.name!r} does not provide logs (it does not declare the "
            "'logs' capability); look where its scheduler keeps job output"
        )
    numbers = [s.number for s in job.submissions]
    only = selection.submission
    if only is not None and only not in numbers:
        have = ", ".join(map(str, numbers)) or "none yet"
        raise BadInput(f"job {job.job_id} has no submission {only} (submissions: {have})")
    if follow:
        interval = units.seconds(interval, "interval")
        return _follow(status, backend, selection, interval)
    targets = [
        (s.number, s.object_id)
        for s in job.submissions
        if s.object_id is not None and only in (None, s.number)
    ]
    return _read_all(backend, job.job_id, targets, selection)


def _read_all(
    backend: Backend, job_id: str, targets: list[tuple[int, str]], selection: LogSelection
) -> Iterator[LogChunk]:
    for number, object_id in targets:
        chunks = backend.logs(object_id, selection.of(job_id, number))
        if selection.tail is not None:
            chunks = last_lines(chunks, selection.tail)
        for data in chunks:
            if data:
                yield LogChunk(number, object_id, selection.stream.value, data)


def _object_of(sub: SubmissionStatus) -> str | None:
    if sub.object_id is not None:
        return sub.object_id
    return sub.objects[0].object_id if sub.objects else None


def _follow(
    status_now: Callable[[], Status],
    backend: Backend,
    selection: LogSelection,
    interval: float,
) -> Iterator[LogChunk]:
    """Stream every selected submission from where it was left, until the job ends or is
    held and every submission's objects have ended and been read to the end."""
    only, tail, stream = selection.submission, selection.tail, selection.stream.value
    offsets: dict[int, int] = {}
    done: set[int] = set()
    while True:
        status = status_now()
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
            chunks = backend.logs(object_id, selection.of(status.job_id, sub.number, offset))
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
