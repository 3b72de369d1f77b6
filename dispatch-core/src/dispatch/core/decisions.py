"""``decide(job, discovery, plan, now) -> effects``: the supervisor's decisions (S-22). Pure.

The supervisor carries out exactly what this returns, in order: first one ``Append`` of
every event decided (intents before the side effects they announce, S-34), then the side
effects (``Submit``, ``OpenGate``, ``Stop``). What an ending means is looked up in
:mod:`dispatch.core.table`; this module only finds the endings and writes the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dispatch.core.cause import Cause
from dispatch.core.effects import Append, Effect, OpenGate, Stop, Submit
from dispatch.core.job import Job, Submission
from dispatch.core.policy import Plan
from dispatch.core.table import OUTCOME, Ruling, Verdict, rule_on_ending, rule_on_execution
from dispatch.model.discovery import Discovery, ObjectView
from dispatch.model.enums import Capability, CauseKind, Enforcer, Phase, Provenance, State
from dispatch.model.events import (
    EscalationRaised,
    Event,
    GateOpened,
    HoldPlaced,
    ObjectFound,
    ObjectMissing,
    OutcomeCommitted,
    RecoveryStarted,
    StopRequested,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.model.spec import JobSpec


class _Draft:
    """Events and effects decided so far, with the job's next sequence numbers."""

    def __init__(self, job: Job, now: datetime) -> None:
        self.job = job
        self.now = now
        self.events: list[Event] = []
        self.effects: list[Effect] = []
        #: the earliest end of a window this decision waited on (see ``Decision``)
        self.wake: datetime | None = None
        #: the decision read ``now`` other than through ``past`` (see ``Decision``)
        self.volatile = False

    def past(self, since: datetime, window: timedelta) -> bool:
        """Whether ``window`` has passed since ``since``; when not yet, its end is noted:
        from then on the same job and objects may be decided otherwise."""
        try:
            due = since + window
        except OverflowError:  # a window longer than the calendar never passes
            return False
        if self.now > due:
            return True
        if self.wake is None or due < self.wake:
            self.wake = due
        return False

    def add(self, cls: type[Any], **fields: Any) -> None:
        seq = self.job.version + len(self.events) + 1
        self.events.append(cls(job_id=self.job.job_id, seq=seq, at=self.now, **fields))

    def stop(self, sub: int, object_id: str, cause: Cause) -> None:
        self.add(StopRequested, submission=sub, object_id=object_id, cause=cause)
        self.effects.append(Stop(self.job.job_id, sub, object_id, cause))

    def result(self) -> list[Effect]:
        head: list[Effect] = []
        if self.events:
            head.append(Append(self.job.job_id, self.job.version, tuple(self.events)))
        return head + self.effects


@dataclass(frozen=True)
class Decision:
    """A decision, and how long it holds: ``quiet`` when it decided nothing and would
    decide nothing for the same job and the same objects at any time up to ``until``
    (None: at any later time). The only rules that read the time compare it with the end
    of a window (node loss, pending, missing from the listing), each through
    ``_Draft.past``, which notes the earliest end still ahead; so a supervisor may skip
    deciding again a job whose record and objects did not change until the clock passes
    ``until`` (deciding is most of a quiet tick over 50,000 jobs)."""

    effects: list[Effect]
    quiet: bool
    until: datetime | None


def decide(job: Job, discovery: Discovery, plan: Plan, now: datetime) -> list[Effect]:
    """What to record and do now for ``job``, given what ``discovery`` shows."""
    return decision(job, discovery.of_job(job.job_id), plan, now).effects


def decision(job: Job, objects: tuple[ObjectView, ...], plan: Plan, now: datetime) -> Decision:
    """``decide`` given the job's own objects, with how long its answer holds."""
    if job.outcome is not None:
        return Decision([], True, None)
    draft = _Draft(job, now)
    _decide(job, objects, plan, draft)
    effects = draft.result()
    return Decision(effects, not effects and not draft.volatile, draft.wake)


def _decide(job: Job, objects: tuple[ObjectView, ...], plan: Plan, draft: _Draft) -> None:
    kept = {view.submission: view for view in objects}
    if len(kept) < len(objects):  # two objects for one submission: keep one, stop the rest
        by_sub: dict[int, list[ObjectView]] = {}
        for view in objects:
            by_sub.setdefault(view.submission, []).append(view)
        kept = _stop_duplicates(job, by_sub, draft)
    _stop_again(job, objects, draft)

    if job.cancel is not None:
        _cancel(job, kept, objects, draft)
        return
    if job.hold is not None:
        return
    if job.awaiting_submission or not job.submissions:
        _request_next(job, plan, kept, draft)
        return

    current = job.submissions[-1]
    obj = kept.get(current.number)
    if current.object_id is None and current.failed is None:
        if obj is None:
            # Intent recorded, object never seen: the submit was lost in a crash. Submit
            # again; if the first one does show up later, it is stopped as a duplicate.
            spec = _spec(job, current.exclude_nodes)
            draft.effects.append(Submit(job.job_id, current.number, spec, current.gated))
            return
        draft.add(
            SubmissionCreated, submission=current.number, object_id=obj.object_id, adopted=True
        )
    if current.handled:
        return
    if current.failed is not None:
        _apply(
            job,
            plan,
            current,
            None,
            rule_on_ending(job, plan, current.failed),
            current.failed,
            draft,
        )
        return
    _watch(job, plan, current, obj, kept, draft)


def _stop_duplicates(
    job: Job, by_sub: dict[int, list[ObjectView]], draft: _Draft
) -> dict[int, ObjectView]:
    """Keep one object per submission (the recorded one, else the first created); stop the
    others with cause ``duplicate`` (S-34). Returns the kept object of each submission."""

    kept: dict[int, ObjectView] = {}
    for number, found in by_sub.items():
        if len(found) == 1:  # the usual case, kept cheap: a tick decides for every job
            kept[number] = found[0]
            continue
        sub = next((s for s in job.submissions if s.number == number), None)
        chosen = next((o for o in found if sub is not None and o.object_id == sub.object_id), None)
        if chosen is None:
            if any(o.created_at is None for o in found):
                draft.volatile = True  # the order below reads the clock
            chosen = min(found, key=lambda o: (o.created_at or draft.now, o.object_id))
        kept[number] = chosen
        for other in found:
            already = sub is not None and other.object_id in sub.stopped
            if other is chosen or not other.alive or already:
                continue
            cause = Cause(
                kind=CauseKind.DUPLICATE,
                provenance=Provenance.ACTOR,
                actor="dispatch",
                detail=f"second object for submission {number}; keeping {chosen.object_id}",
                at=draft.now,
            )
            draft.stop(number, other.object_id, cause)
    return kept


def _stop_again(job: Job, objects: tuple[ObjectView, ...], draft: _Draft) -> None:
    """An object asked to stop that still lives is asked again (stop is idempotent): the
    first request may have been lost to a crash or an unreachable scheduler."""

    for submission in job.submissions:
        if submission.stopped:
            break
    else:
        return
    stopped = {oid: (s.number, c) for s in job.submissions for oid, c in s.stopped.items()}
    for obj in objects:
        if obj.alive and obj.object_id in stopped:
            number, cause = stopped[obj.object_id]
            draft.effects.append(Stop(job.job_id, number, obj.object_id, cause))


def _cancel(
    job: Job, kept: dict[int, ObjectView], objects: tuple[ObjectView, ...], draft: _Draft
) -> None:
    assert job.cancel is not None
    stopped = {oid for s in job.submissions for oid in s.stopped}
    alive = [o for o in objects if o.alive]
    for obj in alive:
        if obj.object_id not in stopped:
            draft.stop(obj.submission, obj.object_id, job.cancel)
    if not alive:
        draft.add(OutcomeCommitted, state=State.CANCELLED, cause=job.cancel)


def _request_next(job: Job, plan: Plan, kept: dict[int, ObjectView], draft: _Draft) -> None:
    """Start the next submission; gated while an older object still lives (S-28)."""

    older_alive = any(o.alive for o in kept.values())
    if older_alive and not plan.declarations.supports(Capability.GATING):
        return  # no gate to hold it behind: wait until the old object is seen ended
    ended_by = job.current.ended_by if job.current is not None else None
    _submit_next(job, plan, ended_by, older_alive, draft)


def _submit_next(job: Job, plan: Plan, ended_by: Cause | None, gated: bool, draft: _Draft) -> None:
    """Request the next submission, kept off the nodes earlier endings are blamed on."""

    exclude = _keep_off(job, plan, ended_by)
    number = len(job.submissions) + 1
    draft.add(SubmissionRequested, submission=number, gated=gated, exclude_nodes=exclude)
    draft.effects.append(Submit(job.job_id, number, _spec(job, exclude), gated))


def _keep_off(job: Job, plan: Plan, ended_by: Cause | None) -> frozenset[str]:
    """S-43: the nodes the next submission keeps off: the current submission's, and those
    of the ending it follows when the policy blames that kind of ending on its nodes. None
    on a backend that cannot keep off a node: nothing is recorded that nobody enforces."""

    if not plan.declarations.supports(Capability.EXCLUDE_NODES):
        return frozenset()
    earlier = job.current.exclude_nodes if job.current is not None else frozenset()
    if ended_by is None or ended_by.kind not in plan.policy.avoid_nodes_after:
        return earlier
    return earlier | frozenset(ended_by.nodes)


def _spec(job: Job, exclude: frozenset[str]) -> JobSpec:
    if not exclude - job.spec.exclude_nodes:
        return job.spec
    return job.spec.model_copy(update={"exclude_nodes": job.spec.exclude_nodes | exclude})


def _watch(
    job: Job,
    plan: Plan,
    current: Submission,
    obj: ObjectView | None,
    kept: dict[int, ObjectView],
    draft: _Draft,
) -> None:
    """The current submission has an object: find whether (and how) its execution ended."""

    decl = plan.declarations
    object_id = current.object_id or (obj.object_id if obj else "")
    if obj is None:
        if current.missing_since is None:
            draft.add(ObjectMissing, submission=current.number, object_id=object_id)
        elif draft.past(current.missing_since, decl.node_loss_window):
            cause = Cause(
                kind=CauseKind.UNKNOWN,
                provenance=Provenance.SCHEDULER,
                detail=f"object {object_id} is no longer listed by backend {decl.name!r} "
                f"(missing since {current.missing_since.isoformat()})",
                at=draft.now,
            )
            _apply(job, plan, current, None, rule_on_ending(job, plan, cause), cause, draft)
        return
    if current.missing_since is not None:
        draft.add(ObjectFound, submission=current.number, object_id=obj.object_id)

    if obj.phase is Phase.GATED and current.gated:
        older = [o for n, o in kept.items() if n < current.number]
        if all(not o.alive for o in older):
            if not current.gate_opened:
                draft.add(GateOpened, submission=current.number, object_id=obj.object_id)
            draft.effects.append(OpenGate(job.job_id, current.number, obj.object_id))
        return

    if obj.phase is Phase.ENDED:
        cause = _ending_cause(obj)
        _apply(job, plan, current, None, rule_on_ending(job, plan, cause), cause, draft)
        return

    if _native_executions(job, plan, current, obj, draft):
        return

    why = obj.cause
    if why is None or why.at is None:
        return
    if obj.phase is Phase.RUNNING and why.kind is CauseKind.NODE_LOST:
        window = decl.node_loss_window
    elif obj.phase is Phase.PENDING and why.kind in decl.pending_windows:
        window = decl.pending_windows[why.kind]
    else:
        return
    if draft.past(why.at, window):
        _apply(job, plan, current, obj, rule_on_ending(job, plan, why), why, draft)


def _native_executions(
    job: Job, plan: Plan, current: Submission, obj: ObjectView, draft: _Draft
) -> bool:
    """Record each execution the backend recovered natively (S-38). True if the job's
    course was decided here (the object must be stopped)."""

    spending = 0  # several executions may have ended since the last tick
    for execution in obj.executions:
        if execution.cause is None or execution.index in current.native_recoveries:
            continue
        ruling = rule_on_execution(job, plan, execution.cause, spending)
        if ruling.verdict is Verdict.IGNORE:
            continue
        if ruling.verdict is Verdict.NATIVE and ruling.binding is not None:
            spending += 1
            draft.add(
                RecoveryStarted,
                submission=current.number,
                execution=execution.index,
                rule=ruling.binding.index,
                action=ruling.binding.rule.action,
                enforcer=Enforcer.BACKEND,
                cause=execution.cause,
            )
            continue
        _apply(job, plan, current, obj, ruling, execution.cause, draft)
        return True
    return False


def _ending_cause(obj: ObjectView) -> Cause:
    if obj.cause is not None:
        return obj.cause
    if obj.executions and obj.executions[-1].cause is not None:
        return obj.executions[-1].cause
    return Cause(
        kind=CauseKind.UNKNOWN,
        provenance=Provenance.SCHEDULER,
        detail=f"object {obj.object_id} ended ({obj.scheduler_state}) without a cause",
    )


def _apply(
    job: Job,
    plan: Plan,
    current: Submission,
    live: ObjectView | None,
    ruling: Ruling,
    cause: Cause,
    draft: _Draft,
) -> None:
    """Write the events of a ruling on the current submission's ending; ``live`` is its
    object when it still lives (the core fenced it off), stopped first."""

    if live is not None and live.object_id not in current.stopped:
        draft.stop(current.number, live.object_id, cause)
    verdict = ruling.verdict
    if verdict in (Verdict.SUCCEED, Verdict.CANCEL):
        draft.add(OutcomeCommitted, state=OUTCOME[verdict], cause=cause)
    elif verdict is Verdict.HOLD:
        rule = ruling.binding.index if ruling.binding else None
        draft.add(HoldPlaced, submission=current.number, rule=rule, cause=cause)
    elif verdict is Verdict.RESUBMIT:
        assert ruling.binding is not None
        draft.add(
            RecoveryStarted,
            submission=current.number,
            rule=ruling.binding.index,
            action=ruling.binding.rule.action,
            enforcer=Enforcer.SUPERVISOR,
            cause=cause,
        )
        still_alive = live is not None  # a fenced object is being stopped, not yet ended
        if still_alive and not plan.declarations.supports(Capability.GATING):
            return  # submitted on a later tick, once the old object is seen ended
        _submit_next(job, plan, cause, still_alive, draft)
    elif verdict is Verdict.FAIL:
        draft.add(EscalationRaised, reason=ruling.reason, cause=cause)
        draft.add(OutcomeCommitted, state=OUTCOME[verdict], cause=cause)
