"""Whether a running job has stopped making progress, and what dispatch does then (S-47).

A job declaring a progress window is given a heartbeat file (``DISPATCH_HEARTBEAT``) to
touch; its last modification (or the job's log growing, which each backend folds into the
heartbeat: the local runner, the Slurm launch wrapper) is its last sign of progress. A job
hung in a collective, frozen or deadlocked ends by itself only at its time limit, if it
has one; it is no ending, so no cause is invented for it.

:func:`stall` says when an escalation is due: once per silence, when nothing moved for
the whole window since the later of the last progress and the execution's start, and not
already raised for that same last progress. :func:`on_stall` is the decision, looked up
in :data:`dispatch.core.table.STALL_TABLE`: by default an escalation only (a person
decides); with the policy's stall rule ``resubmit`` and budget left, the same escalation
and then dispatch's own stop and a resubmission. That stop's cause is ``cancelled`` by
actor ``dispatch``, its detail naming the stall: what ended the execution is dispatch's
decision, which dispatch knows, not a guess at why the job hung, which it does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from dispatch.core.cause import Cause
from dispatch.core.decisions import _Draft, _submit_next
from dispatch.core.effects import Effect
from dispatch.core.job import Job
from dispatch.core.policy import Plan
from dispatch.core.table import Verdict, rule_on_stall
from dispatch.model.discovery import Discovery
from dispatch.model.enums import Action, Capability, CauseKind, Enforcer, Phase, Provenance
from dispatch.model.events import EscalationRaised, RecoveryStarted

#: how an escalation of this kind reads, so a later tick finds the last one raised
PREFIX = "no progress for "
#: who stops a stalled job under the policy's stall rule (``Cause.actor``)
ACTOR = "dispatch"


@dataclass(frozen=True)
class Stall:
    """An escalation to raise: silent since ``since`` (the last progress, or the start)."""

    job_id: str
    since: datetime
    silent_for: timedelta
    window: timedelta
    progressed: bool

    def observed(self) -> str:
        """What was seen, in words: ``no progress for 20 min (window 20 min); last ...``."""
        last = (
            f"last progress {self.since:%Y-%m-%d %H:%M:%S} UTC"
            if self.progressed
            else f"no heartbeat since it started at {self.since:%Y-%m-%d %H:%M:%S} UTC"
        )
        return f"{PREFIX}{words(self.silent_for)} (window {words(self.window)}); {last}"

    def message(self, decided: str = "state and cause unchanged, a person decides") -> str:
        return f"{self.observed()}; {decided}"


def words(span: timedelta) -> str:
    """``20 min``, ``1 h 5 min``, ``45 s``: a span as people read it."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    hours, rest = divmod(seconds // 60, 60)
    return f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"


def stall(
    job_id: str,
    *,
    window: timedelta,
    started: datetime,
    last_progress: datetime | None,
    now: datetime,
    raised_for: datetime | None = None,
) -> Stall | None:
    """The escalation due now, if any.

    :param started: when the running execution started (a heartbeat older than it is an
        earlier execution's and counts as none).
    :param last_progress: the heartbeat's modification time, None when never touched.
    :param raised_for: when the last stall escalation of this job was raised, so a
        silence is escalated once and a new silence (after progress) again.
    """
    progressed = last_progress is not None and last_progress > started
    since = last_progress if progressed and last_progress is not None else started
    silent = now - since
    if silent < window:
        return None
    if raised_for is not None and raised_for >= since:
        return None
    return Stall(
        job_id=job_id, since=since, silent_for=silent, window=window, progressed=progressed
    )


def on_stall(
    job: Job, discovery: Discovery, plan: Plan, now: datetime, last_progress: datetime | None
) -> list[Effect]:
    """What to record and do for a job ``decide`` left alone, given its last progress.

    Only the current submission's running object counts, and only while the job is
    neither held, cancelled nor between submissions. Returns ``[]`` or the effects in
    ``decide``'s order: one ``Append`` (the escalation; with the stall rule also the stop,
    the recovery and the next submission's request), then the ``Stop`` and ``Submit``.
    """
    window = job.spec.progress_window
    current = job.current
    if window is None or current is None or current.handled:
        return []
    if job.outcome or job.hold or job.cancel or job.awaiting_submission:
        return []
    running = next(
        (
            v
            for v in discovery.of_job(job.job_id)
            if v.submission == current.number and v.phase is Phase.RUNNING and v.executions
        ),
        None,
    )
    started = running.executions[-1].started_at if running is not None else None
    if running is None or started is None or running.object_id in current.stopped:
        return []
    raised = [e.at for e in job.escalations if e.reason.startswith(PREFIX)]
    due = stall(
        job.job_id,
        window=window,
        started=started,
        last_progress=last_progress,
        now=now,
        raised_for=max(raised) if raised else None,
    )
    if due is None:
        return []
    ruling = rule_on_stall(job, plan)
    draft = _Draft(job, now)
    draft.add(EscalationRaised, reason=due.message(ruling.reason))
    if ruling.verdict is Verdict.STOP_RESUBMIT:
        cause = Cause(
            kind=CauseKind.CANCELLED,
            provenance=Provenance.ACTOR,
            actor=ACTOR,
            detail=f"stopped by dispatch for {due.observed()}: {ruling.reason}",
            at=now,
        )
        draft.stop(current.number, running.object_id, cause)
        draft.add(
            RecoveryStarted,
            submission=current.number,
            rule=plan.policy.stall_index,
            action=Action.RESUBMIT,
            enforcer=Enforcer.SUPERVISOR,
            cause=cause,
        )
        if plan.declarations.supports(Capability.GATING):
            _submit_next(job, plan, cause, True, draft)
        # else: requested on a later tick, once the stopped object is seen ended (decide)
    return draft.result()
