"""Which node (and rank) an ending belongs to (S-42), from Slurm's own records.

sacct's allocation row of a multi-node job covers every node; two more answers name the
node, asked only when some object ended in a way worth attributing (so a tick of healthy
jobs costs nothing more):

- the **step rows** (``sacct -D -j IDS``): the launch wrapper runs one step per node
  (:mod:`dispatch_slurm.launch`), so each step row's NodeList is one node, and its state
  (OUT_OF_MEMORY, FAILED 1:0, ``CANCELLED by 0`` for the steps the wrapper stopped after
  the first failure) is that node's ending. The root-cause rule of the core
  (:func:`dispatch.root_cause`) picks among them: the steps killed in the failing one's
  wake are never the cause;
- the **node events** (``sacctmgr show event``): a NODE_FAIL row says a node failed, not
  which; slurmdbd records each node that went DOWN (``Not responding``, or an admin's
  ``state=down`` with its reason), and the nodes of the execution with such an event
  from its start to shortly after its end are the lost ones. A step row with no exit
  code (its node never reported) names the node when no event does.

The rank is known when a step holds one task: the wrapper names every step
``dsp-ranks-<first>-<last>`` (or ``dsp-node-<i>`` under torchrun, where the step is
the node's torchrun and the rank is torchrun's business).

A job id slurmctld handed out again (its state was wiped) holds the rows of several jobs
in sacct: :func:`holders` tells them apart by name and tag, and an execution's step rows
are those of the incarnation that started when it did, never another job's.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from dispatch import Cause, CauseKind, Provenance, root_cause

from dispatch_slurm.classify import user_of
from dispatch_slurm.parse import (
    NodeEvent,
    ParseError,
    SacctRow,
    StepRow,
    expand_hostlist,
    parse_events,
    parse_steps,
    parse_time,
)
from dispatch_slurm.tags import job_id_from_name, parse_comment

#: sacct states of an allocation row whose steps say which node ended it
STEP_WORTHY = ("FAILED", "OUT_OF_MEMORY", "NODE_FAIL")
#: how long after an execution's end a node event still counts as its cause
EVENT_GRACE = timedelta(seconds=10)
_RANKS = re.compile(r"dsp-ranks-([0-9]{1,9})-([0-9]{1,9})", re.ASCII)
_JOB_ID = re.compile(r"[0-9]{1,12}(?:_[0-9]{1,9})?", re.ASCII)  # a job, or an array task
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}", re.ASCII)


@dataclass(frozen=True)
class Queries:
    """What to ask Slurm for attribution this tick (nothing, in the common case)."""

    steps_of: tuple[str, ...] = ()
    events_nodes: str = ""
    events_since: str = ""


@dataclass
class Attribution:
    steps: dict[tuple[str, int], list[StepRow]] = field(default_factory=dict)
    events: list[NodeEvent] = field(default_factory=list)
    #: when each incarnation's job row says it started (None: not started, or unreadable)
    starts: dict[tuple[str, int], datetime | None] = field(default_factory=dict)


def attribution_queries(squeue_text: str, sacct_text: str, wanted: Collection[str]) -> Queries:
    """The object ids whose step rows to read and the nodes whose events to read, from
    a cheap scan of the rows of the wanted jobs: squeue's (current, ahead of sacct by
    1-10 s) and the allocation rows of ``sacct -X -D`` (one per execution)."""
    ids: list[str] = []
    nodes: list[str] = []
    since = ""
    for line in squeue_text.splitlines():
        f = line.split("|")
        if len(f) < 10 or not f[2].strip().startswith(STEP_WORTHY):
            continue
        job = job_id_from_name(f[1])
        if job is None or job not in wanted or not _JOB_ID.fullmatch(f[0].strip()):
            continue
        ids.append(f[0].strip())
        if f[2].strip() == "NODE_FAIL":
            try:
                nodes += expand_hostlist(f[9].strip())
            except ParseError:
                continue
            start = f[7].strip()
            if _TIME.fullmatch(start) and (not since or start < since):
                since = start
    for line in sacct_text.splitlines():
        f = line.split("|")
        if len(f) < 9 or not f[2].startswith(STEP_WORTHY):
            continue
        job = job_id_from_name(f[1])
        if job is None or job not in wanted:
            continue
        if not _JOB_ID.fullmatch(f[0].strip()):
            continue
        ids.append(f[0].strip())
        if f[2].startswith("NODE_FAIL"):
            try:
                nodes += expand_hostlist(f[8].strip())
            except ParseError:
                continue
            start = f[6].strip()
            if _TIME.fullmatch(start) and (not since or start < since):
                since = start
    unique_nodes = ",".join(dict.fromkeys(nodes))
    return Queries(
        steps_of=tuple(dict.fromkeys(ids)),
        events_nodes=unique_nodes if since else "",
        events_since=since,
    )


def parse_attribution(steps_text: str, events_text: str) -> Attribution:
    """Parse the two answers in one pass; lines that do not parse attribute nothing (the
    ending itself is still classified from the allocation row)."""
    found = Attribution()
    seen: dict[str, int] = {}
    for line in steps_text.splitlines():
        head = line.split("|", 1)[0].strip()
        if head and "." not in head:
            seen[head] = seen.get(head, 0) + 1  # a job row opens an incarnation
            found.starts[(head, seen[head] - 1)] = _start_of(line)
            continue
        try:
            rows = parse_steps(line)
        except ParseError:
            continue
        for row in rows:
            row = replace(row, incarnation=max(seen.get(row.job_id, 1) - 1, 0))
            found.steps.setdefault((row.job_id, row.incarnation), []).append(row)
    for line in events_text.splitlines():
        try:
            found.events += parse_events(line)
        except ParseError:
            continue
    return found


def _start_of(job_row: str) -> datetime | None:
    fields = job_row.split("|")
    try:
        return parse_time(fields[5], command="sacct", line=job_row) if len(fields) > 5 else None
    except ParseError:
        return None


def _incarnation(found: Attribution, object_id: str, index: int, started: datetime | None) -> int:
    """The incarnation in the step answer that is this execution: the one whose job row
    started when the execution did. ``sacct -j`` lists every job that ever held the id,
    so after slurmctld handed the id out again the execution's index counts another
    job's rows too; an incarnation that started at another time is never this one (-1)."""
    if started is None:
        return index
    same = [n for (oid, n), start in found.starts.items() if oid == object_id and start == started]
    if same:
        return same[-1]
    start = found.starts.get((object_id, index))
    return index if start is None else -1


def _step_cause(row: StepRow) -> Cause:
    try:
        nodes = expand_hostlist(row.nodes)
    except ParseError:
        nodes = ()
    rank = None
    match = _RANKS.fullmatch(row.name)
    if match and match.group(1) == match.group(2):
        rank = int(match.group(1))
    exit_text = str(row.exit) if row.exit is not None else "(none)"
    detail = (
        f"sacct step {row.job_id}.{row.step} ({row.name}): State={row.state} "
        f"ExitCode={exit_text} NodeList={row.nodes}"
    )
    state = (
        "CANCELLED by" if row.state == "CANCELLED" and row.cancelled_by is not None else row.state
    )
    kind, provenance, _ = STEP_TABLE.get(state, _NO_ROW)
    exit_code, actor = None, None
    if kind is CauseKind.NON_ZERO_EXIT:
        if row.exit is None:
            kind, provenance = _NO_ROW[:2]
        elif row.state == "FAILED":
            exit_code = row.exit.code if row.exit.code else 128 + row.exit.signal
    if kind is CauseKind.CANCELLED and row.cancelled_by is not None:
        actor = user_of(row.cancelled_by)
    return Cause(
        kind=kind,
        provenance=provenance,
        actor=actor,
        detail=detail,
        exit_code=exit_code,
        at=row.ended,
        nodes=nodes,
        rank=rank,
    )


#: step states that are not an ending yet
_UNSETTLED = ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED")


#: A step's state -> its node's own ending (one step per node, see the module docstring).
STEP_TABLE: dict[str, tuple[CauseKind, Provenance, str]] = {
    "COMPLETED": (CauseKind.NONE, Provenance.APPLICATION, "the node's tasks exited 0"),
    "OUT_OF_MEMORY": (
        CauseKind.OUT_OF_MEMORY,
        Provenance.SCHEDULER,
        "a task on the node was OOM-killed (its cgroup)",
    ),
    "FAILED": (
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        "a task on the node exited non-zero (code, or 128 + signal)",
    ),
    "NODE_FAIL": (CauseKind.NODE_LOST, Provenance.SCHEDULER, "the node failed"),
    "TIMEOUT": (CauseKind.TIME_LIMIT, Provenance.SCHEDULER, "the job's time limit"),
    "CANCELLED by": (
        CauseKind.CANCELLED,
        Provenance.ACTOR,
        "stopped by the wrapper after another node's failure (or by a user): "
        "the root-cause rule ranks it last",
    ),
    "CANCELLED": (
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        "no `by <uid>`, in a FAILED job: srun --kill-on-bad-exit ended the step "
        "because one of its tasks failed (sacct keeps no per-task exit code: the "
        "job's exit code is that task's, set by the wrapper)",
    ),
}
_NO_ROW = (CauseKind.UNKNOWN, Provenance.SCHEDULER, "any other state: unknown")


def render_markdown() -> str:
    """The step table as Markdown, for docs/mapping.md."""
    lines = ["| sacct step state | the node's ending | provenance | why |", "|---|---|---|---|"]
    for state, (kind, provenance, why) in STEP_TABLE.items():
        lines.append(f"| {state} | {kind.value} | {provenance.value} | {why} |")
    kind, provenance, why = _NO_ROW
    lines.append(f"| anything else | {kind.value} | {provenance.value} | {why} |")
    return "\n".join(lines) + "\n"


def _rank_steps(rows: list[StepRow]) -> list[StepRow]:
    return [r for r in rows if r.step.isascii() and r.step.isdigit() and r.state not in _UNSETTLED]


def attribute(
    cause: Cause | None,
    object_id: str,
    incarnation: int,
    hosts: tuple[str, ...],
    started: datetime | None,
    ended: datetime | None,
    found: Attribution,
    settled: bool = True,
) -> tuple[Cause | None, tuple[Cause, ...]]:
    """The execution's cause with ``nodes``/``rank`` filled where Slurm says them, and
    each node's own ending (``Execution.node_causes``).

    ``settled`` is False while the records that name a node may still be on their way
    (:data:`dispatch_slurm.observe.SETTLE`): a failure then stays unattributed rather
    than blamed on the wrong node.
    """
    if cause is None or cause.kind is CauseKind.NONE or cause.nodes:
        return cause, ()
    rows = found.steps.get((object_id, _incarnation(found, object_id, incarnation, started)), [])
    steps = _rank_steps(rows)
    per_node = tuple(_step_cause(r) for r in steps)
    if not settled and any(r.state in _UNSETTLED for r in rows if r.step.isdigit()):
        # a step still shown running under an ended job: its node has not reported (a
        # lost node's step ends only when Slurm declares the node down); wait for it
        return cause, per_node
    silent = tuple(n for r in steps if r.exit is None for n in expand_safe(r.nodes))
    if cause.kind is CauseKind.NODE_LOST:
        lost = _lost_by_events(hosts, started, ended, found.events) or silent
        return (_lost(cause, lost, found) if lost else cause), per_node
    if silent:
        # a node whose step never reported an exit status, under a failure: the others
        # failed because it went away (a torchrun peer sees its connection close, then the
        # wrapper ends the job before Slurm declares the node down); slurmdbd's DOWN
        # event confirms it
        # the silent step ends when Slurm declares its node down: that is when the event is
        lost = tuple(
            n
            for r in steps
            if r.exit is None
            for n in _lost_by_events(
                expand_safe(r.nodes), r.started or started, r.ended or ended, found.events
            )
        )
        if lost:
            return _lost(
                cause.model_copy(
                    update={
                        "kind": CauseKind.NODE_LOST,
                        "provenance": Provenance.SCHEDULER,
                        "exit_code": None,
                    }
                ),
                lost,
                found,
            ), per_node
        if not settled:
            return cause, per_node
    root = root_cause(per_node)
    if root is None or root.kind is CauseKind.NONE:
        return cause, per_node
    update: dict[str, object] = {
        "nodes": root.nodes,
        "rank": root.rank,
        "detail": f"{cause.detail}; root step: {root.detail}",
    }
    if root.kind is CauseKind.OUT_OF_MEMORY and cause.kind is not CauseKind.OUT_OF_MEMORY:
        # sacct's DerivedExitCode races (0:0 in one run of three); the step state does not
        update.update(kind=CauseKind.OUT_OF_MEMORY, provenance=Provenance.SCHEDULER, exit_code=None)
    return cause.model_copy(update=update), per_node


def _lost(cause: Cause, lost: tuple[str, ...], found: Attribution) -> Cause:
    events = [e for e in found.events if e.node in lost]
    words = "; ".join(
        f"sacctmgr: Node={e.node} State={e.state} Reason={e.reason} "
        f"Start={e.started.isoformat() if e.started else '?'}"
        for e in events
    )
    detail = f"{cause.detail} {words}".strip() if words else cause.detail
    return cause.model_copy(update={"nodes": tuple(dict.fromkeys(lost)), "detail": detail})


def silent_nodes(steps_text: str) -> tuple[str, str]:
    """The nodes (comma-joined) of finished steps that never reported an exit status,
    and the earliest start among them: their node events are worth asking for."""
    nodes: list[str] = []
    since = ""
    for row in parse_attribution(steps_text, "").steps.values():
        for step in _rank_steps(row):
            if step.exit is None:
                nodes += expand_safe(step.nodes)
                start = (
                    step.started.astimezone().strftime("%Y-%m-%dT%H:%M:%S") if step.started else ""
                )  # sacctmgr reads local time
                if start and (not since or start < since):
                    since = start
    return ",".join(dict.fromkeys(nodes)), since


def expand_safe(text: str) -> tuple[str, ...]:
    try:
        return expand_hostlist(text)
    except ParseError:
        return ()


def _lost_by_events(
    hosts: tuple[str, ...],
    started: datetime | None,
    ended: datetime | None,
    events: list[NodeEvent],
) -> tuple[str, ...]:
    lost = []
    for event in events:
        if event.node not in hosts or event.started is None:
            continue
        state = event.state.upper()
        if not any(word in state for word in ("DOWN", "FAIL", "NOT_RESPONDING")):
            continue
        if started is not None and event.started < started:
            continue
        if ended is not None and event.started > ended and event.started - ended > EVENT_GRACE:
            continue
        lost.append(event.node)
    return tuple(dict.fromkeys(lost))


@dataclass(frozen=True)
class Holders:
    """The sacct rows of one job id, by the job they belong to (:func:`holders`)."""

    #: the rows of the job that holds the id now
    current: list[SacctRow]
    #: the rows of each job that held it before, oldest first
    earlier: list[list[SacctRow]]


def _owner(row: SacctRow) -> tuple[str, int | None]:
    tag = parse_comment(row.comment)
    return row.name, tag.submission if tag is not None else None


def _same_job(a: tuple[str, int | None], b: tuple[str, int | None]) -> bool:
    return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


def holders(rows: list[SacctRow], now: tuple[str, str] | None = None) -> Holders:
    """Tell apart the jobs that held one job id (``sacct -D`` lists them in order): a row
    whose name differs, or whose comment's tag names another submission, is another
    job's. ``now`` is squeue's ``(name, comment)`` of the job holding the id, when squeue
    lists it: rows of any other job are earlier holders. A row with no comment (sacct
    before the job ended, or a site without ``job_comment``) goes with the rows around it
    of the same name."""
    runs: list[tuple[tuple[str, int | None], list[SacctRow]]] = []
    for row in rows:
        owner = _owner(row)
        if runs and _same_job(runs[-1][0], owner):
            known, run = runs[-1]
            runs[-1] = ((known[0], known[1] if known[1] is not None else owner[1]), run)
            run.append(row)
        else:
            runs.append((owner, [row]))
    if not runs:
        return Holders([], [])
    if now is not None:
        tag = parse_comment(now[1])
        holder = (now[0], tag.submission if tag is not None else None)
        if not _same_job(runs[-1][0], holder):
            return Holders([], [run for _, run in runs])
    return Holders(runs[-1][1], [run for _, run in runs[:-1]])
