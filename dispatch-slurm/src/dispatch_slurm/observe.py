"""From one squeue, one sacct (and, when something runs, one sinfo) to ObjectViews (S-19).

Who is believed for what:

- the current state of an object comes from ``squeue`` whenever slurmctld still lists
  it: sacct lags by 1-10 s, keeps a stale Reason, prints ``exit - 128`` above 128, and
  answers stale when slurmctld is down (discovery never gets that far: squeue failing
  first raises Unreachable);
- the executions come from ``sacct -X -D``: one row per incarnation of the job id, so a
  preempted-and-requeued job shows ``PREEMPTED`` then ``PENDING``/``RUNNING``. When
  squeue's ``RestartCnt`` is ahead of sacct's rows (sacct has not caught up, 1-10 s), the
  executions sacct has not recorded are left out rather than guessed (a wrong cause
  would spend the wrong budget); the current execution keeps its true index
  (``RestartCnt``), so a later discovery only adds the missing ones;
- ``CANCELLED by <uid>`` is only in sacct (and only for a while); it names the actor;
- ``DerivedExitCode`` (a step OOM-killed inside a script that then failed) is taken from
  whichever source shows a signal there.

An object slurmctld has forgotten (older than ``MinJobAge``) is reported from sacct alone
when sacct carries its comment (``AccountingStoreFlags=job_comment``); without it the
submission number is unknowable and the object is left out (see the README).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime, timedelta

from dispatch import Cause, CauseKind, Execution, ObjectView, Phase, Provenance
from dispatch.sweep import member_id

from dispatch_slurm.attribute import Attribution, Holders, attribute, holders, parse_attribution
from dispatch_slurm.classify import ALIVE, STARTED, TABLE, Answer, classify
from dispatch_slurm.parse import (
    NodeRow,
    ParseError,
    SacctRow,
    SqueueRow,
    array_tasks,
    expand_hostlist,
    parse_sacct,
    parse_squeue,
)
from dispatch_slurm.tags import Tag, array_group, job_id_from_name, parse_comment
from dispatch_slurm.version import DEFAULT, SlurmVersion, rules_for

#: one list of the states a job is alive in: the classification table's (classify._ALIVE)
ALIVE_STATES = frozenset(ALIVE)
#: the states the classification table reads as an ending
_ENDED_STATES = frozenset(st for row in TABLE if row.phase is Phase.ENDED for st in row.states)
_LAUNCH_HELD = "launch failed requeued held"


def _tag_for(name: str, comment: str, wanted: Collection[str]) -> Tag | None:
    job_id = job_id_from_name(name)
    tag = parse_comment(comment)
    if job_id is None or job_id not in wanted:
        return None
    if tag is not None and tag.job_id != job_id:
        return None
    return tag


def _tags_of(
    object_field: str, name: str, comment: str, wanted: Collection[str], command: str, line: str
) -> list[tuple[str, Tag]]:
    """Each object a row stands for, with its tag: the row's own job, or, for a sweep's
    array, every task the row names whose member is wanted (array task ``i`` is member
    ``<group>-i``, submission 1)."""
    group = array_group(comment)
    if group is None:
        tag = _tag_for(name, comment, wanted)
        return [] if tag is None else [(object_field.strip(), tag)]
    if job_id_from_name(name) != group:
        return []
    found = []
    for object_id, task in array_tasks(object_field, command=command, line=line):
        member = member_id(group, task)
        if member in wanted:
            found.append((object_id, Tag(job_id=member, submission=1)))
    return found


def _lost_nodes(row: SqueueRow, nodes: dict[str, NodeRow] | None) -> list[NodeRow]:
    if not nodes or row.state not in ALIVE_STATES or not row.nodes:
        return []
    lost = [nodes[h] for h in expand_hostlist(row.nodes) if h in nodes]
    return [n for n in lost if n.not_responding or n.down]


def _lost_words(lost: list[NodeRow]) -> str:
    return " ".join(f"sinfo: Node={n.name} State={n.state} Reason={n.reason}" for n in lost)


def _unparsable(
    line: str, command: str, error: ParseError, wanted: Collection[str], at: datetime
) -> ObjectView | None:
    """A line about one of our objects that does not parse: unknown, verbatim (S-36)."""
    fields = line.split("|")
    if len(fields) < 2:
        return None
    job_id = job_id_from_name(fields[1])
    tag = next((parse_comment(f) for f in fields if parse_comment(f)), None)
    if job_id is None or job_id not in wanted or tag is None:
        return None
    cause = Cause(
        kind=CauseKind.UNKNOWN,
        provenance=Provenance.SCHEDULER,
        detail=f"{command}: {line} ({error})",
        at=at,
    )
    return ObjectView(
        object_id=fields[0].strip(),
        job_id=job_id,
        submission=tag.submission,
        phase=Phase.RUNNING,
        scheduler_state="unparsable",
        cause=cause,
    )


def _history_answer(row: SacctRow, version: SlurmVersion) -> Answer:
    return Answer(
        source="sacct",
        state=row.state,
        exit=row.exit,
        derived=row.derived,
        cancelled_by=row.cancelled_by,
        raw_state=row.raw_state,
        version=version,
    )


def build_objects(
    squeue_text: str,
    sacct_text: str,
    nodes: dict[str, NodeRow] | None,
    wanted: Collection[str],
    at: datetime,
    steps_text: str = "",
    events_text: str = "",
    version: SlurmVersion = DEFAULT,
) -> list[ObjectView]:
    """The objects of ``wanted`` jobs; ``steps_text``/``events_text`` are the answers to
    :func:`dispatch_slurm.attribute.attribution_queries` (empty when none were needed);
    ``version`` is the Slurm that printed them: its answers are parsed in that version's
    form and classified with the rules of :func:`.version.rules_for` it."""
    found = parse_attribution(steps_text, events_text)
    rules = rules_for(version)
    objects: list[ObjectView] = []
    current: dict[str, SqueueRow] = {}
    tags: dict[str, Tag] = {}
    unparsable: set[str] = set()
    for line in squeue_text.splitlines():
        if not line.strip():
            continue
        try:
            (row,) = parse_squeue(line, version)
        except ParseError as exc:
            bad = _unparsable(line, "squeue", exc, wanted, at)
            if bad is None:
                raise
            objects.append(bad)
            unparsable.add(bad.object_id)
            continue
        for object_id, row_tag in _tags_of(
            row.job_id, row.name, row.comment, wanted, "squeue", line
        ):
            current[object_id] = row
            tags[object_id] = row_tag

    history: dict[str, list[SacctRow]] = {}
    for line in sacct_text.splitlines():
        if not line.strip():
            continue
        try:
            (srow,) = parse_sacct(line)
        except ParseError as exc:
            bad = _unparsable(line, "sacct", exc, wanted, at)
            if bad is None:
                raise
            if bad.object_id not in current and bad.object_id not in unparsable:
                objects.append(bad)
                unparsable.add(bad.object_id)
            continue
        job_id = job_id_from_name(srow.name)
        if job_id is None:
            continue
        if job_id in wanted:
            history.setdefault(srow.job_id, []).append(srow)
            if srow.job_id not in tags:
                tag = _tag_for(srow.name, srow.comment, wanted)
                if tag is not None:
                    tags[srow.job_id] = tag
        elif "_" in srow.job_id and "[" not in srow.job_id:
            # a task of a sweep's array, named for its group (tasks still pending together
            # are read from squeue, which lists every pending job)
            for object_id, task_tag in _tags_of(
                srow.job_id, srow.name, srow.comment, wanted, "sacct", line
            ):
                history.setdefault(object_id, []).append(srow)
                tags.setdefault(object_id, task_tag)

    for object_id in sorted(set(current) | set(history), key=_numeric):
        tag = tags.get(object_id)
        if object_id in unparsable and object_id not in current:
            continue  # already reported unknown, verbatim
        sq = current.get(object_id)
        held = holders(history.get(object_id, []), (sq.name, sq.comment) if sq else None)
        if held.earlier:
            # the id was handed out again: each job keeps its own rows (classify's
            # id-reused row); the one holding it now is read from its rows alone
            objects += _reused(object_id, held, sq, wanted, nodes, at, rules)
            history[object_id] = held.current
            if sq is None:
                tag = _first_tag(held.current, wanted)
        if tag is None or (sq is None and not history.get(object_id)):
            continue  # forgotten by slurmctld and sacct has no comment: see module docstring
        try:
            objects.append(
                _object(
                    object_id,
                    tag,
                    current.get(object_id),
                    history.get(object_id, []),
                    nodes,
                    found,
                    at,
                    rules,
                )
            )
        except ParseError as exc:
            # a host list (or another field) of this object that does not parse: its
            # object is unknown, verbatim; the others are reported as usual (S-4, S-36)
            cause = Cause(
                kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=str(exc), at=at
            )
            objects.append(
                ObjectView(
                    object_id=object_id,
                    job_id=tag.job_id,
                    submission=tag.submission,
                    phase=Phase.RUNNING,
                    scheduler_state="unparsable",
                    cause=cause,
                )
            )
    return objects


def _first_tag(rows: list[SacctRow], wanted: Collection[str]) -> Tag | None:
    return next((t for r in rows if (t := _tag_for(r.name, r.comment, wanted))), None)


def _reused(
    object_id: str,
    held: Holders,
    sq: SqueueRow | None,
    wanted: Collection[str],
    nodes: dict[str, NodeRow] | None,
    at: datetime,
    rules: SlurmVersion,
) -> list[ObjectView]:
    """The objects of the jobs that held ``object_id`` before the job holding it now,
    each ended ``unknown`` with the words of the job that came after it; a job whose rows
    carry no tag has no submission to be reported under and is left out (the core then
    waits its missing window)."""
    views = []
    for i, run in enumerate(held.earlier):
        tag = _first_tag(run, wanted)
        if tag is None:
            continue
        after = [*held.earlier[i + 1 :], held.current]
        later = next((r[0] for r in after if r), None)
        if later is not None:
            words = f"sacct: JobID={later.job_id} JobName={later.name} Comment={later.comment}"
        elif sq is not None:
            words = f"squeue: JobID={sq.job_id} Name={sq.name} Comment={sq.comment}"
        else:
            continue
        views.append(_object(object_id, tag, None, run, nodes, Attribution(), at, rules, words))
    return views


def _numeric(object_id: str) -> tuple[int, str]:
    head = object_id.split("_")[0].split("+")[0]
    numeric = head.isascii() and head.isdigit() and len(head) <= 18
    return (int(head) if numeric else 0, object_id)


def _object(
    object_id: str,
    tag: Tag,
    sq: SqueueRow | None,
    rows: list[SacctRow],
    nodes: dict[str, NodeRow] | None,
    found: Attribution,
    at: datetime,
    rules: SlurmVersion = DEFAULT,
    reused_by: str = "",
) -> ObjectView:
    # sacct -D lists incarnations in order: the first ``restarts`` ended in a requeue, the
    # next (if sacct has written it yet) is the current one
    split = sq.restarts if sq is not None else max(len(rows) - 1, 0)
    earlier = rows[:split]
    last = rows[split] if len(rows) > split else None
    if sq is not None:
        derived = sq.derived
        if derived.signal == 0 and last is not None and last.derived.signal:
            derived = last.derived
        lost = _lost_nodes(sq, nodes)
        answer = Answer(
            source="squeue",
            state=sq.state,
            reason=sq.reason,
            exit=sq.exit,
            derived=derived,
            restarts=sq.restarts,
            gated=tag.gated,
            cancelled_by=(
                last.cancelled_by if last is not None and last.state == "CANCELLED" else None
            ),
            lost_nodes=_lost_words(lost),
            version=rules,
            sacct_ended=(
                _history_answer(last, rules).words()
                if last is not None
                and last.state in _ENDED_STATES
                and sq.state in ("PENDING", *STARTED)
                else ""
            ),
        )
        ended_at, started_at, ran_on = sq.ended, sq.started, sq.nodes
        submitted = sq.submitted
        restarts = sq.restarts
    else:
        assert last is not None  # an object comes from squeue or from at least one sacct row
        answer = replace(
            _history_answer(last, rules),
            unlisted=last.state in ("PENDING", *STARTED),
            reused_by=reused_by,
        )
        ended_at, started_at, ran_on = last.ended, last.started, last.nodes
        submitted = last.submitted
        restarts = len(earlier)
        lost = []
    verdict = classify(
        answer,
        at=ended_at if answer.state not in ALIVE_STATES else (at if reused_by else None),
    )
    cause = verdict.cause
    if cause is not None and lost and cause.kind is CauseKind.NODE_LOST:
        cause = cause.model_copy(update={"nodes": tuple(n.name for n in lost)})
    phase = verdict.phase

    executions: list[Execution] = []
    for index, row in enumerate(earlier):
        earlier_cause = classify(_history_answer(row, rules), at=row.ended).cause
        if (
            index == len(earlier) - 1
            and sq is not None
            and verdict.phase is Phase.HELD
            and sq.reason.replace("_", " ") == _LAUNCH_HELD
        ):
            earlier_cause = Cause(
                kind=CauseKind.LAUNCH_FAILED,
                provenance=Provenance.SCHEDULER,
                detail=f"{_history_answer(row, rules).words()}; squeue: Reason={sq.reason}",
                at=row.ended,
            )
        hosts = expand_hostlist(row.nodes)
        settled = row.ended is None or at - row.ended >= SETTLE
        attributed, each_node = attribute(
            earlier_cause, object_id, index, hosts, row.started, row.ended, found, settled
        )
        if not settled and _settling(attributed, hosts, row.ended, at):
            continue  # left out until its node is named, like one sacct has not written
        executions.append(
            Execution(
                index=index,
                started_at=row.started,
                ended_at=row.ended,
                nodes=hosts,
                cause=attributed,
                node_causes=each_node,
            )
        )

    ran = bool(ran_on) and phase in (Phase.RUNNING, Phase.ENDED)
    if ran:
        ended = phase is Phase.ENDED
        index = max(len(executions), restarts)
        hosts = expand_hostlist(ran_on)
        per_node: tuple[Cause, ...] = ()
        if ended:
            settled = ended_at is None or at - ended_at >= SETTLE
            cause, per_node = attribute(
                cause, object_id, len(earlier), hosts, started_at, ended_at, found, settled
            )
            if _settling(cause, hosts, ended_at, at):
                # sacct has not written the step rows (or slurmdbd the node event) that
                # name the node yet: report it finishing, so the ending is recorded once,
                # attributed (S-42, S-43); after SETTLE it is reported as it stands
                phase, ended, cause = Phase.RUNNING, False, None
        executions.append(
            Execution(
                index=index,
                started_at=started_at,
                ended_at=ended_at if ended else None,
                nodes=hosts,
                cause=cause if ended else None,
                node_causes=per_node,
            )
        )

    return ObjectView(
        object_id=object_id,
        job_id=tag.job_id,
        submission=tag.submission,
        phase=phase,
        scheduler_state=sq.state if sq is not None else (last.raw_state if last else ""),
        cause=cause,
        executions=tuple(executions),
        # a requeue resets Slurm's SubmitTime: the first incarnation's is the object's
        created_at=rows[0].submitted if rows and rows[0].submitted else submitted,
        pending_reason=(
            sq.reason
            if sq is not None and phase is Phase.PENDING and sq.reason not in ("", "None")
            else None
        ),
    )


#: how long after its end a multi-node failure may wait for the records that name its node
#: (sacct's step rows lag 1-10 s; slurmdbd's DOWN event of a lost node comes
#: SlurmdTimeout + ~15 s after the loss): DISPATCH_SLURM_SETTLE seconds, default 30
SETTLE = timedelta(seconds=float(os.environ.get("DISPATCH_SLURM_SETTLE", "30")))
_ATTRIBUTED = (CauseKind.NODE_LOST, CauseKind.OUT_OF_MEMORY, CauseKind.NON_ZERO_EXIT)


def _settling(
    cause: Cause | None, hosts: tuple[str, ...], ended_at: datetime | None, at: datetime
) -> bool:
    if cause is None or cause.kind not in _ATTRIBUTED or cause.nodes or len(hosts) < 2:
        return False
    return ended_at is None or at - ended_at < SETTLE


def running_any(squeue_text: str, version: SlurmVersion = DEFAULT) -> bool:
    """Whether any listed job is alive on nodes (then sinfo is asked about node health);
    read by the one squeue parser, never by column position."""
    return any(row.state in ALIVE_STATES for row in parse_squeue(squeue_text, version))
