"""``LogSelection``: which output a ``dispatch logs`` request reads, checked once.

The core builds it from what the user asked (the CLI, :meth:`dispatch.JobHandle.logs`)
and refuses a bad request before any output; every backend's ``dispatch_logs`` receives
it already valid, with ``submission`` and ``offset`` set for the one object it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dispatch.model.enums import Stream
from dispatch.model.errors import BadInput


def as_stream(value: str | Stream) -> Stream:
    """``value`` as a :class:`Stream`; :class:`BadInput` names the choices."""
    try:
        return Stream(value)
    except ValueError:
        raise BadInput(f"stream {value!r}: give stdout or stderr") from None


def _count(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class LogSelection:
    """One request for output (S-46).

    - ``stream``: stdout or stderr (a :class:`Stream`, see :func:`as_stream`);
    - ``node``: only what tasks on this node printed (None: every node, in node order);
    - ``rank``: only what this rank printed (None: every rank); not with ``node``;
    - ``submission``: one submission (None: every one, in order); the core sets it, and
      ``job_id``, for each object it asks a backend about;
    - ``offset``: bytes of this selection already read, skipped (``--follow`` asks again
      from where it stopped, so a backend keeps no state);
    - ``tail``: only the last lines of each submission (applied by the core).
    """

    stream: Stream = Stream.STDOUT
    node: str | None = None
    rank: int | None = None
    submission: int | None = None
    offset: int = 0
    tail: int | None = None
    job_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stream", as_stream(self.stream))
        if self.node is not None and self.rank is not None:
            raise BadInput("give --node or --rank, not both")
        if self.rank is not None and not _count(self.rank, 0):
            raise BadInput(f"rank {self.rank!r}: give a rank, 0 or more")
        if self.node is not None and (not isinstance(self.node, str) or not self.node):
            raise BadInput("node: give a node name")
        if self.tail is not None and not _count(self.tail, 0):
            raise BadInput(f"tail {self.tail!r}: give a number of lines, 0 or more")
        if self.submission is not None and not _count(self.submission, 1):
            raise BadInput(f"submission {self.submission!r}: give a submission number, 1 or more")
        if not _count(self.offset, 0):
            raise BadInput(f"offset {self.offset!r}: give a number of bytes, 0 or more")

    def of(self, job_id: str, submission: int, offset: int = 0) -> LogSelection:
        """This selection narrowed to one submission of one job, from ``offset`` on."""
        return replace(self, job_id=job_id, submission=submission, offset=offset)
