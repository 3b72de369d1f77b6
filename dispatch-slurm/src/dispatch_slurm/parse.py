"""Parsing what ``squeue``, ``sacct`` and ``sinfo`` print, in the exact formats we ask for.

Text output with explicit fields and a ``|`` delimiter, never ``--json``: in 22.05
``squeue --json`` ignores every filter (it returns all jobs) and ``sacct --json`` reports
ordinary non-zero exits as success, and no JSON schema spans 22.05 to 26.05. The
free-text field of each format is last, so a ``|`` inside it cannot shift the others.
The environment that would change these formats (``SQUEUE_FORMAT``, ``SACCT_FORMAT``,
``SQUEUE_SORT``, ``SLURM_TIME_FORMAT``) is cleared for every call (:mod:`.runner`).

Where a release changed a format, the parser is told the version (read once per
discovery, :mod:`.version`) and reads that release's form only, never both:

- ``squeue -O exit_code``: the raw wait status up to 22.05 (137 is ``35072``), Slurm's
  ``exit:signal`` from 23.02 on (:data:`SQUEUE_EXIT_PAIRS_SINCE`);
- a state is its first word (``CANCELLED by 0``: the word, and the uid apart); a state
  word no table knows is kept verbatim, and classified ``unknown`` with Slurm's words;
- ``(null)``, which squeue prints for an unset text field (more of them from 24.05), is
  read as empty.

A line that does not parse raises :class:`ParseError` naming the command, the line and
what is wrong (S-36); the backend turns it into an ``unknown`` cause when it is about one
object, and an error otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from dispatch import BadInput

from dispatch_slurm.version import DEFAULT, SlurmVersion, release

#: ``squeue -O``: the fields, in order; Reason (free text) last. ``JobArrayID`` prints a
#: job's id as ``JobID`` does (``123``), an array task as ``123_4`` and the pending tasks
#: of an array still gathered in one row as ``123_[5-11%4]`` (:func:`array_tasks`).
SQUEUE_FIELDS = (
    "JobArrayID",
    "Name",
    "State",
    "exit_code",
    "DerivedEC",
    "RestartCnt",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "NodeList",
    "Partition",
    "Comment",
    "Reason",
)
#: ``sacct -o``: the fields, in order; Comment last. ``JobID`` is ``JobIDRaw`` for a job
#: (``123``), ``123_4`` for an array task, ``123_[5-11%4]`` for pending tasks.
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Start",
    "End",
    "NodeList",
    "Partition",
    "Comment",
)
_NO_TIME = {"", "Unknown", "N/A", "None", "NONE", "(null)"}
#: the release from which ``squeue -O exit_code`` prints ``exit:signal`` (23.02's
#: changelog: "align print format for exit and derived codes with that of other
#: components"); before it, the raw wait status
SQUEUE_EXIT_PAIRS_SINCE = release("23.02")
# ASCII only: str.isdigit() accepts "²", which int() refuses
_EXIT_PAIR = re.compile(r"([0-9]{1,9}):([0-9]{1,9})", re.ASCII)
_INTEGER = re.compile(r"-?[0-9]{1,12}", re.ASCII)
_COUNT = re.compile(r"[0-9]{1,9}", re.ASCII)
#: the most host names one host-list expression may expand to: a larger one is refused
#: rather than built (``n[1-100000000]`` would take gigabytes)
MAX_HOSTS = 65536


class ParseError(BadInput):
    """A line a Slurm command printed that does not have the shape we asked for."""

    def __init__(self, command: str, line: str, problem: str) -> None:
        self.command = command
        self.line = line
        super().__init__(f"cannot parse {command} output line {line!r}: {problem}")


@dataclass(frozen=True)
class ExitStatus:
    """Slurm's ``code:signal`` pair."""

    code: int
    signal: int

    def __str__(self) -> str:
        return f"{self.code}:{self.signal}"


@dataclass(frozen=True)
class SqueueRow:
    """One job as slurmctld shows it now (fresh; authoritative for the current state)."""

    job_id: str
    name: str
    state: str
    exit: ExitStatus
    derived: ExitStatus
    restarts: int
    submitted: datetime | None
    started: datetime | None
    ended: datetime | None
    nodes: str
    partition: str
    comment: str
    reason: str
    line: str


@dataclass(frozen=True)
class SacctRow:
    """One execution-or-incarnation of a job as slurmdbd recorded it (``-X -D``).

    ``state`` is the state word without ``by N``; ``cancelled_by`` is that N (a uid).
    """

    job_id: str
    name: str
    state: str
    cancelled_by: int | None
    exit: ExitStatus
    derived: ExitStatus
    submitted: datetime | None
    started: datetime | None
    ended: datetime | None
    nodes: str
    partition: str
    comment: str
    raw_state: str
    line: str


@dataclass(frozen=True)
class NodeRow:
    name: str
    state: str
    reason: str

    @property
    def not_responding(self) -> bool:
        """Slurm marks a node whose slurmd stopped answering with a ``*`` suffix."""
        return self.state.endswith("*")

    @property
    def down(self) -> bool:
        return self.state.rstrip("*~#!%$@^-+").lower() in {"down", "fail", "failing"}


def parse_time(text: str, *, command: str = "slurm", line: str = "") -> datetime | None:
    """A Slurm timestamp (local time, no zone) as an aware datetime, or None for Unknown."""
    text = text.strip()
    if text in _NO_TIME:
        return None
    try:
        return _time(text)
    except (ValueError, OverflowError, OSError) as exc:
        raise ParseError(command, line or text, f"bad time {text!r}") from exc


@lru_cache(maxsize=65536)
def _time(text: str) -> datetime:
    """Cached: a discovery of N jobs repeats the same few seconds many times, and the
    local-time conversion is the costliest step of parsing."""
    naive = datetime.fromisoformat(text)
    if naive.tzinfo is not None:
        return naive.astimezone(UTC)
    return naive.astimezone().astimezone(UTC)


def parse_exit_pair(text: str, *, command: str = "sacct", line: str = "") -> ExitStatus:
    """``"1:0"`` as printed by sacct/scontrol; empty (a step without one) is ``0:0``."""
    text = text.strip()
    if not text:
        return ExitStatus(0, 0)
    match = _EXIT_PAIR.fullmatch(text)
    if not match:
        raise ParseError(command, line or text, f"bad exit code {text!r}")
    return ExitStatus(int(match.group(1)), int(match.group(2)))


def parse_wait_status(text: str, *, command: str = "squeue", line: str = "") -> ExitStatus:
    """``squeue -O exit_code`` prints the raw wait status (137 << 8 = 35072): decode it."""
    text = text.strip()
    if text in {"", "N/A"}:
        return ExitStatus(0, 0)
    if not _INTEGER.fullmatch(text):
        raise ParseError(command, line or text, f"bad exit status {text!r}")
    status = int(text)
    if status < 0:  # a requeued job waiting to run again shows -2: no status yet
        return ExitStatus(0, 0)
    return ExitStatus((status >> 8) & 0xFF, status & 0x7F)


def parse_squeue_exit(text: str, version: SlurmVersion, *, line: str = "") -> ExitStatus:
    """``squeue -O exit_code`` in the form ``version`` prints it (see the module doc)."""
    if version.release < SQUEUE_EXIT_PAIRS_SINCE:
        return parse_wait_status(text, line=line)
    text = text.strip()
    if text in {"", "N/A", "(null)"}:
        return ExitStatus(0, 0)
    if _INTEGER.fullmatch(text) and int(text) < 0:  # requeued, no status yet
        return ExitStatus(0, 0)
    return parse_exit_pair(text, command="squeue", line=line)


def _first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""


def _split(command: str, line: str, count: int) -> list[str]:
    parts = line.split("|", count - 1)
    if len(parts) != count:
        raise ParseError(command, line, f"expected {count} '|'-separated fields, got {len(parts)}")
    return parts


def _int(command: str, line: str, text: str, what: str) -> int:
    """A count Slurm prints (restarts, tasks): ASCII digits, never negative."""
    text = text.strip() or "0"
    if not _COUNT.fullmatch(text):
        raise ParseError(command, line, f"bad {what} {text!r}")
    return int(text)


def parse_squeue(text: str, version: SlurmVersion = DEFAULT) -> list[SqueueRow]:
    """``squeue -h -O SQUEUE_FIELDS`` as ``version`` prints it."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _split("squeue", line, len(SQUEUE_FIELDS))
        rows.append(
            SqueueRow(
                job_id=f[0].strip(),
                name=f[1],
                state=_first_word(f[2]),
                exit=parse_squeue_exit(f[3], version, line=line),
                derived=parse_squeue_exit(f[4], version, line=line),
                restarts=_int("squeue", line, f[5], "restart count"),
                submitted=parse_time(f[6], command="squeue", line=line),
                started=parse_time(f[7], command="squeue", line=line),
                ended=parse_time(f[8], command="squeue", line=line),
                nodes=f[9].strip() if f[9].strip() != "(null)" else "",
                partition=f[10].strip(),
                comment=f[11] if f[11] != "(null)" else "",
                reason=f[12].rstrip("|").strip(),
                line=line,
            )
        )
    return rows


_STATE_BY = re.compile(r"^(\S+)(?: by ([0-9]{1,10}))?$", re.ASCII)


def _state(command: str, line: str, text: str) -> tuple[str, int | None]:
    """A state field: its first word, and the uid of ``CANCELLED by <uid>``. Words this
    adapter does not know are kept as they are (classified unknown); only an empty state
    is refused."""
    text = text.strip()
    match = _STATE_BY.match(text)
    if match:
        return match.group(1), int(match.group(2)) if match.group(2) else None
    word = _first_word(text)
    if not word:
        raise ParseError(command, line, f"bad state {text!r}")
    return word, None


def parse_sacct(text: str) -> list[SacctRow]:
    """``sacct -P -n -X -D -o SACCT_FIELDS`` (every release 22.05-26.05 prints it alike;
    what its exit codes mean changed in 25.11: see the classification table)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _split("sacct", line, len(SACCT_FIELDS))
        state, cancelled_by = _state("sacct", line, f[2])
        rows.append(
            SacctRow(
                job_id=f[0].strip(),
                name=f[1],
                state=state,
                cancelled_by=cancelled_by,
                exit=parse_exit_pair(f[3], line=line),
                derived=parse_exit_pair(f[4], line=line),
                submitted=parse_time(f[5], command="sacct", line=line),
                started=parse_time(f[6], command="sacct", line=line),
                ended=parse_time(f[7], command="sacct", line=line),
                nodes=f[8].strip() if f[8].strip() != "None assigned" else "",
                partition=f[9].strip(),
                comment=f[10],
                raw_state=f[2].strip(),
                line=line,
            )
        )
    return rows


def parse_sinfo_nodes(text: str) -> dict[str, NodeRow]:
    """``sinfo -h -N -o %N|%T|%E``: one line per node and partition; keep one per node."""
    nodes: dict[str, NodeRow] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _split("sinfo", line, 3)
        nodes[f[0].strip()] = NodeRow(f[0].strip(), f[1].strip(), f[2].strip())
    return nodes


@lru_cache(maxsize=4096)
def expand_hostlist(expr: str) -> tuple[str, ...]:
    """Slurm's compressed host list (``gpu[01-03,7],login``) as host names.

    :raises ParseError: a range that is not two ASCII numbers in order, a bracket left
        open, or more than :data:`MAX_HOSTS` names.
    """
    hosts: list[str] = []
    for part in _HOST_PART.findall(expr):
        match = _BRACKETED.fullmatch(part)
        if not match:
            if "[" in part or "]" in part:
                raise ParseError("hostlist", expr, f"unbalanced brackets in {part!r}")
            if part:
                hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for rng in ranges.split(","):
            lo, dash, hi = rng.partition("-")
            if not _COUNT.fullmatch(lo) or (dash and not _COUNT.fullmatch(hi)):
                raise ParseError("hostlist", expr, f"bad range {rng!r}")
            first, last = int(lo), int(hi) if dash else int(lo)
            if last < first:
                raise ParseError("hostlist", expr, f"range {rng!r} runs backwards")
            if len(hosts) + last - first + 1 > MAX_HOSTS:
                raise ParseError("hostlist", expr, f"more than {MAX_HOSTS} hosts")
            width = len(lo)
            hosts.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(first, last + 1))
    return tuple(hosts)


_HOST_PART = re.compile(r"[^,\[]+(?:\[[^\]]*\])?[^,]*|\[[^\]]*\][^,]*")
_BRACKETED = re.compile(r"([^\[]*)\[([^\]]*)\](.*)")


#: ``sacct -D -j IDS -o``: the step rows (and the job row that opens each incarnation)
STEP_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NTasks", "Start", "End", "NodeList")
#: ``sacctmgr show event -o``: node events; Reason (free text) last
EVENT_FIELDS = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason")


@dataclass(frozen=True)
class StepRow:
    """One step of one incarnation of a job, as sacct recorded it.

    ``step`` is ``batch``, ``extern`` or the step number; ``incarnation`` counts the job
    rows of the same id before it (sacct -D lists each incarnation's steps after it).
    """

    job_id: str
    step: str
    incarnation: int
    name: str
    state: str
    cancelled_by: int | None
    exit: ExitStatus | None
    tasks: int | None
    started: datetime | None
    ended: datetime | None
    nodes: str
    line: str


@dataclass(frozen=True)
class NodeEvent:
    """A node going down, failing or draining, as slurmdbd recorded it."""

    node: str
    started: datetime | None
    ended: datetime | None
    state: str
    reason: str


def parse_steps(text: str) -> list[StepRow]:
    """Step rows of ``sacct -P -n -D -j IDS -o STEP_FIELDS``; job rows only count
    incarnations. An empty ExitCode (a step whose node never reported) is None."""
    rows: list[StepRow] = []
    seen: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _split("sacct", line, len(STEP_FIELDS))
        raw = f[0].strip()
        job_id, dot, step = raw.partition(".")
        if not dot:
            seen[job_id] = seen.get(job_id, 0) + 1
            continue
        if not job_id:
            raise ParseError("sacct", line, f"bad step {raw!r}")
        state, cancelled_by = _state("sacct", line, f[2])
        rows.append(
            StepRow(
                job_id=job_id,
                step=step,
                incarnation=max(seen.get(job_id, 1) - 1, 0),
                name=f[1],
                state=state,
                cancelled_by=cancelled_by,
                exit=parse_exit_pair(f[3], line=line) if f[3].strip() else None,
                tasks=_int("sacct", line, f[4], "task count") if f[4].strip() else None,
                started=parse_time(f[5], command="sacct", line=line),
                ended=parse_time(f[6], command="sacct", line=line),
                nodes=f[7].strip(),
                line=line,
            )
        )
    return rows


def parse_events(text: str) -> list[NodeEvent]:
    """``sacctmgr -n -P show event ... format=EVENT_FIELDS``; cluster events (no node) are
    left out."""
    events = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _split("sacctmgr", line, len(EVENT_FIELDS))
        if not f[0].strip():
            continue
        events.append(
            NodeEvent(
                node=f[0].strip(),
                started=parse_time(f[1], command="sacctmgr", line=line),
                ended=parse_time(f[2], command="sacctmgr", line=line),
                state=f[3].strip(),
                reason=f[4].strip(),
            )
        )
    return events


_ARRAY_ID = re.compile(
    r"([0-9]{1,18})_([0-9]{1,9}|\[([0-9,\-]{1,4096})(?:%[0-9]{1,9})?\])", re.ASCII
)
#: the most tasks one gathered row may stand for (Slurm's MaxArraySize is at most 4,000,001)
MAX_ARRAY_TASKS = 4_000_001


def array_tasks(text: str, *, command: str = "squeue", line: str = "") -> list[tuple[str, int]]:
    """The array tasks an id field names, each as its own object id and task index:
    ``123_4`` is ``[("123_4", 4)]``, ``123_[0-2,7%4]`` (pending tasks gathered in one
    row; ``%4`` is the array's bound on tasks running at once) is ``123_0``, ``123_1``,
    ``123_2``, ``123_7``. A plain job id (``123``) names no task: ``[]``.

    :raises ParseError: an array id whose task list does not parse or runs backwards.
    """
    text = text.strip()
    if "_" not in text:
        return []
    match = _ARRAY_ID.fullmatch(text)
    if match is None:
        raise ParseError(command, line or text, f"bad array task id {text!r}")
    base, single, listed = match.group(1), match.group(2), match.group(3)
    if listed is None:
        return [(f"{base}_{int(single)}", int(single))]
    tasks: list[tuple[str, int]] = []
    for part in listed.split(","):
        lo, dash, hi = part.partition("-")
        if not _COUNT.fullmatch(lo) or (dash and not _COUNT.fullmatch(hi)):
            raise ParseError(command, line or text, f"bad array task range {part!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or len(tasks) + last - first + 1 > MAX_ARRAY_TASKS:
            raise ParseError(command, line or text, f"bad array task range {part!r}")
        tasks.extend((f"{base}_{task}", task) for task in range(first, last + 1))
    return tasks
