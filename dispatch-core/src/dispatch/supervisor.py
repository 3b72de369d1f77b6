"""The supervisor: the imperative shell around ``decide`` (S-22, S-32, S-34, S-35).

Per tick: bring the cached jobs up to date from the record, take or renew a lease on each
active job, ask each backend ONCE (per ``max_discovery_batch``) about all its jobs,
``decide`` for each job, append every intent in one write, carry out the side effects,
and append their results in a second write. It never decides anything itself.

Each backend, and each job's effects, are isolated (S-50): a backend whose discovery
fails (for any reason but ``Unreachable``, which only defers it) leaves its jobs for the
next tick, and an effect that fails ends that job's effects for this tick; every other
backend's and job's go on. The error, naming the backend and the hook, is in the report.
Each backend is asked on a thread of its own, all at once, and the tick waits for them up
to ``discovery_timeout``: a backend that has not answered by then is unreachable for the
tick, however long its own call blocks (:class:`_Asking`). Only the backend call runs
there; the record and every decision stay on the supervisor's thread.

Crash safety comes from the order (intent, effect, result) and from ``decide`` reading the
record: a submit whose result was lost is found by its tag next tick and adopted; a
second object for one submission is stopped as a duplicate.

The lease fences the side effects as well as the appends (S-49): each effect starts only
while the job's lease has at least half its length left (renewed when it runs short), and
not at all once another supervisor may have taken the job over. A tick that outlasts its
lease (a stop waiting out a grace, one after another) therefore cannot race a second
supervisor into submitting the same submission twice; what it did not get to is done by
whoever holds the lease next. A single effect must end within half the lease.

A supervisor runs commands only as the user who submitted them (S-51): on a backend that
runs commands as the caller (the local backend, Slurm), it leaves another uid's jobs alone, names
them in the report (``refused``) and records why once, as an escalation, while nobody else
holds the job's lease (:mod:`dispatch.core.submitters`).

Over 500 lines on purpose: a tick is one algorithm (refresh, own, lease, discover, decide,
record intents, act under the lease, record results), and its fencing is easiest to check
when every step is in one place; the decisions themselves are the pure core's.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from itertools import groupby
from operator import attrgetter, is_
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from dispatch.backends import Backend, Registry
from dispatch.core.cause import Cause
from dispatch.core.compact import (
    BACKEND,
    CANCEL,
    GROUP,
    HOLD,
    JOB_ID,
    OUTCOME,
    SPEC,
    SUBMISSIONS,
    SUBMITTER,
    VERSION,
    Folded,
    Packed,
    unpack,
)
from dispatch.core.decisions import decision
from dispatch.core.effects import Append, Effect, OpenGate, Stop, Submit
from dispatch.core.folding import fold
from dispatch.core.job import Job
from dispatch.core.submitters import refusal, refusal_notice
from dispatch.heartbeat import progress_effects
from dispatch.job_records import utc_now
from dispatch.model.discovery import Discovery, ObjectView
from dispatch.model.enums import Capability, CauseKind, Provenance
from dispatch.model.errors import (
    DecodeError,
    DispatchError,
    RecordConflict,
    SubmitRefused,
    Unreachable,
)
from dispatch.model.events import Event, Group, Identity, SubmissionCreated, SubmissionFailed
from dispatch.model.spec import ArrayMember
from dispatch.store.base import Batch, Lease, RecordStore
from dispatch.store.codec import collector_paused

if TYPE_CHECKING:
    from dispatch.notify import Notifier
    from dispatch.supervising import Heartbeat

log = logging.getLogger("dispatch.supervisor")

#: Feed rows decoded and folded at a time: a cold start holds one page, not the record.
FEED_PAGE = 20_000

#: How long a tick waits for each backend's discovery (``dispatch supervise
#: --discovery-timeout``): one that has not answered by then is unreachable for the tick.
DISCOVERY_TIMEOUT = timedelta(seconds=10)


_JOB_ID = attrgetter("job_id")


def _unsubmitted(job: Job | _Member) -> bool:
    """A job that would be submitted for the first time if decided now."""
    return not job.submissions and job.outcome is None and job.cancel is None and job.hold is None


class _Member(NamedTuple):
    """What the sweep slots read of a member, taken from a packed job without unpacking
    it (``submissions``, ``outcome``, ``cancel`` and ``hold`` only tested for emptiness)."""

    job_id: str
    group: Group | None
    submissions: tuple[object, ...]
    outcome: object
    cancel: object
    hold: object

    @classmethod
    def of(cls, packed: Packed) -> _Member:
        return cls(
            packed[JOB_ID],
            packed[GROUP],
            packed[SUBMISSIONS],
            packed[OUTCOME],
            packed[CANCEL],
            packed[HOLD],
        )


def _by_job(objects: tuple[ObjectView, ...]) -> dict[str, tuple[ObjectView, ...]]:
    """``Discovery.of_job`` for every job at once: backends list a job's objects together,
    so cutting the runs (``groupby``, in C) is a third of grouping view by view."""
    index: dict[str, tuple[ObjectView, ...]] = {}
    for job_id, run in groupby(objects, _JOB_ID):
        found = tuple(run)
        index[job_id] = index[job_id] + found if job_id in index else found
    return index


class _Asking:
    """One backend's discovery, asked on a daemon thread of its own (only the backend call
    runs there, never the record store): the answer, or the error, is in ``future``.

    ``asked`` is the tick time it was asked at, ``order`` its place among the supervisor's
    calls, ``jobs`` the jobs and records it was asked for (the very packed tuples: an
    answer is used only for a job whose record has not moved since), ``calls`` how many
    ``discover`` calls it made (its batches)."""

    _made = itertools.count(1)

    def __init__(
        self, backend: Backend, jobs: list[tuple[str, Packed]], asked: datetime, batch: int
    ) -> None:
        self.order = next(self._made)
        self.backend = backend
        self.jobs = jobs
        self.asked = asked
        self.batch = batch
        self.calls = 0
        self.future: Future[Discovery] = Future()
        self.future.set_running_or_notify_cancel()
        thread = threading.Thread(
            target=self._ask, name=f"dispatch-discover-{backend.name}", daemon=True
        )
        thread.start()

    def _ask(self) -> None:
        try:
            self.future.set_result(self._discover())
        except BaseException as exc:  # handed to the supervisor's thread as it is
            self.future.set_exception(exc)

    def _discover(self) -> Discovery:
        backend = self.backend
        job_ids = [job_id for job_id, _ in self.jobs]
        batch = self.batch or len(job_ids)
        answers: list[Discovery] = []
        for start in range(0, len(job_ids), batch):
            answers.append(backend.discover(job_ids[start : start + batch]))
            self.calls += 1
        if len(answers) == 1 and answers[0].backend == backend.name:
            return answers[0]  # the usual case: not copied (350,000 views over 50,000 jobs)
        at = answers[-1].at if answers else self.asked
        objects = tuple(view for found in answers for view in found.objects)
        return Discovery(backend=backend.name, at=at, objects=objects)


@dataclass(frozen=True, slots=True)
class _Quiet:
    """A job decided quiet: the record (the packed job, the same object while its record
    did not change) and objects it was decided on, and until when."""

    job: Packed
    objects: tuple[ObjectView, ...]
    until: datetime | None


@dataclass
class TickReport:
    """What one tick did; ``dispatch supervise --once --json`` prints it."""

    at: datetime
    active: int = 0
    leased: int = 0
    #: Jobs decided afresh; the other leased jobs were quiet, and unchanged since.
    decided: int = 0
    appended: int = 0
    submitted: int = 0
    stopped: int = 0
    opened: int = 0
    discovery_calls: dict[str, int] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    #: Jobs whose lease was lost during the tick: their remaining effects were not done.
    fenced: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: Jobs left to a supervisor running as their submitter, and why (S-51).
    refused: dict[str, str] = field(default_factory=dict)


class Supervisor:
    """Acts on jobs it holds a lease on; any number may share one store (S-35).

    ``step`` is called with a step name at each point where a crash would matter
    (``intent-recorded``, ``submitted``, ``result-recorded``...): the crash-injection
    tests kill the process there.

    ``reuse_decisions=False`` decides every job every tick, as the differential test's
    reference: by default a job decided quiet is not decided again until its record, its
    objects or a window it waits on change (``_decide``).

    ``uid`` is the uid this supervisor's commands run as (default: its real uid): only jobs
    submitted by it are acted on where the backend runs commands as the caller.

    ``discovery_timeout`` bounds each tick's wait for the backends' discoveries, which are
    asked all at once, each on a thread of its own (``_discover_all``).
    """

    def __init__(
        self,
        store: RecordStore,
        registry: Registry,
        *,
        owner: str | None = None,
        lease_ttl: timedelta = timedelta(seconds=90),
        clock: Callable[[], datetime] = utc_now,
        step: Callable[[str], None] | None = None,
        jobs: Iterable[str] | None = None,
        notifier: Notifier | None = None,
        reuse_decisions: bool = True,
        uid: int | None = None,
        heartbeat: Heartbeat | None = None,
        snapshot: Path | None = None,
        discovery_timeout: timedelta = DISCOVERY_TIMEOUT,
    ) -> None:
        self.store = store
        self._notifier = notifier  # told after each tick; it delivers in its own thread
        self.registry = registry
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_ttl = lease_ttl
        #: The lease an effect needs left before it starts: an effect (one submit, one
        #: stop) must end within it, so half the lease leaves the rest as margin.
        self.effect_window = lease_ttl / 2
        self.clock = clock
        self._step = step or (lambda name: None)
        self._only = frozenset(jobs) if jobs is not None else None
        #: The folded jobs, held packed (:mod:`dispatch.core.compact`): memory per job.
        self._jobs = Folded()
        self._broken: dict[str, str] = {}
        self._position = 0
        self._retry_at: dict[str, datetime] = {}
        self._backoff: dict[str, float] = {}
        self._leases: dict[str, Lease] = {}
        self._reuse = reuse_decisions
        self._quiet: dict[str, _Quiet] = {}
        #: Each backend's last listed views, and them grouped by job (``_views_by_job``).
        self._views: dict[
            str, tuple[tuple[ObjectView, ...], dict[str, tuple[ObjectView, ...]]]
        ] = {}
        self.uid = os.getuid() if uid is None else uid
        self._identity: Identity | None = None
        #: The database role that created each job (never changes), where the store has roles.
        self._owners: dict[str, str] = {}
        #: Records this supervisor's beat once per tick, so ``status`` says who watches a
        #: job; None for the one tick a command runs on its own job.
        self.heartbeat = heartbeat
        #: Where the folded jobs are kept between runs (:mod:`dispatch.store.snapshot`): a
        #: cache read at the cold start, checked against the record, never the truth.
        self._snapshot = snapshot if jobs is None else None
        self._saved_at: int | None = None  # the feed position of the snapshot on disk
        self.discovery_timeout = discovery_timeout
        #: Each backend's discovery still unanswered at the end of the tick that waited
        #: for it: never asked again while it runs, its answer used later if still fresh.
        self._asking: dict[str, _Asking] = {}
        #: The order (``_Asking.order``) of each backend's last applied answer.
        self._applied: dict[str, int] = {}

    # ------------------------------------------------------------------ record
    def _refresh(self) -> None:
        # The feed misses nothing (the stores serialise appends), so only what is new is
        # read; a job whose append conflicts is re-read whole (see _append).
        # An undecodable row quarantines its job only (S-48): it is dropped, named in every
        # tick's errors, and nothing is decided or appended for it; the others go on.
        # Page by page with the collector paused: a cold start never holds the
        # whole decoded feed, and the collector does not walk every folded job.
        with collector_paused():
            if self._snapshot is not None and self._position == 0 and not self._jobs:
                self._from_snapshot(self._snapshot)
            while self._refresh_page():
                pass

    def _from_snapshot(self, path: Path) -> None:
        """Start from the jobs of a snapshot that checks out against the record; the feed
        after its position is then read as usual. Jobs it lacks are read from the record."""
        from dispatch.store.snapshot import load

        found = load(path, self.store)
        if found is None:
            return
        self._jobs = Folded(found.jobs)
        self._position = self._saved_at = found.position
        for job_id in found.missing:
            self._reload(job_id)

    def save_snapshot(self) -> bool:
        """Write the snapshot of the folded jobs, up to date with the feed, when none was
        loaded or written yet or the feed has moved on by a tenth of the jobs since."""
        path = self._snapshot
        if path is None:
            return False
        due = max(1000, len(self._jobs) // 10)
        if self._saved_at is not None and self._position - self._saved_at < due:
            return False
        self._refresh()  # so every folded job is exactly the record up to the position
        from dispatch.store.snapshot import save

        if save(path, self.store, self._position, self._jobs.packed):
            self._saved_at = self._position
            return True
        return False

    def _refresh_page(self) -> bool:
        """Fold one page of the feed; True when there may be more."""
        before = self._position
        feed = self.store.read_feed(self._position, FEED_PAGE, job_ids=self._only)
        self._position = feed.position
        for bad in feed.quarantined:
            self._jobs.pop(bad.job_id, None)
            self._broken[bad.job_id] = bad.message
        by_job: dict[str, list[Event]] = {}
        for event in feed.events:
            if event.job_id not in self._broken:
                by_job.setdefault(event.job_id, []).append(event)
        for job_id, new in by_job.items():
            if self._only is not None and job_id not in self._only:
                continue
            held = self._jobs.packed.get(job_id)
            version = 0 if held is None else held[VERSION]
            fresh = [e for e in new if e.seq > version]
            if not fresh:
                continue
            try:
                self._jobs[job_id] = fold(fresh, None if held is None else unpack(held))
            except DecodeError:
                self._reload(job_id)
        return feed.position != before

    def _fold_fresh(self, job_id: str, events: list[Event]) -> None:
        try:
            self._jobs[job_id] = fold(events)
            self._broken.pop(job_id, None)
        except DecodeError as exc:
            self._broken[job_id] = str(exc)

    def _reload(self, job_id: str) -> None:
        try:
            self._fold_fresh(job_id, self.store.read(job_id))
        except DispatchError as exc:
            self._broken[job_id] = str(exc)
            self._jobs.pop(job_id, None)

    def job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    # ------------------------------------------------------------------ tick
    def tick(self, now: datetime | None = None) -> TickReport:
        # The collector stays out of the tick: its many objects (discovery views,
        # decisions) are freed by their reference counts; it runs between ticks.
        with collector_paused(freeze_over=None):
            report = self._tick(now)
        if self.heartbeat is not None:
            self.heartbeat.tick(report.at)  # one small write; a failure is logged, not raised
        if self._notifier is not None:
            self._notifier.poke()  # returns at once: a hook never delays or fails a tick
        return report

    def _tick(self, now: datetime | None) -> TickReport:
        now = now or self.clock()
        report = TickReport(at=now)
        self._refresh()
        active = [job_id for job_id, job in self._jobs.packed.items() if job[OUTCOME] is None]
        report.active = len(active)
        for job_id, why in self._broken.items():
            report.errors.append(f"job {job_id}: {why}")
        active = self._own(active, now, report)
        if not active:
            return report
        leases = self._leases_for(active, now)
        report.leased = len(leases)
        slotless = self._waiting_for_slot(leases)

        # Jobs stay packed through the tick: one is unpacked only to be decided afresh.
        packed = self._jobs.packed
        by_backend: dict[str, list[tuple[str, Packed]]] = {}
        for job_id in leases:
            if job_id in slotless:
                continue  # a sweep member with no free slot: not submitted this tick
            held = packed[job_id]
            by_backend.setdefault(held[BACKEND], []).append((job_id, held))

        planned: dict[str, list[Effect]] = {}
        backends: dict[str, Backend] = {}
        quiet: dict[str, _Quiet] = {}
        for name, (backend, discovery, jobs) in self._discover_all(by_backend, now, report).items():
            backends[name] = backend
            views_of = self._views_by_job(name, discovery.objects).get
            last_quiet = self._quiet.get
            for job_id, held in jobs:
                objects = views_of(job_id, ())
                last = last_quiet(job_id)
                try:
                    job: Job | None = None
                    if (  # quiet last tick, and nothing it was decided on changed (_decide)
                        last is not None
                        and last.job is held
                        and (last.until is None or now <= last.until)
                        and last.objects == objects  # identical views first, then equal ones
                    ):
                        quiet[job_id] = last
                        if held[SPEC].progress_window is None:
                            continue  # quiet, and no progress to check (S-47)
                        effects = []
                    else:
                        job = unpack(held)
                        effects = self._decide(job, held, objects, now, quiet, report)
                    if not effects and held[SPEC].progress_window is not None:
                        job = job or unpack(held)
                        effects = progress_effects(job, discovery, now)  # S-47
                except Exception as exc:  # a fault deciding one job must not stop the rest
                    log.exception("job %s: deciding failed", job_id)
                    report.errors.append(f"job {job_id}: deciding failed: {exc!r}")
                    continue
                if effects:
                    planned[job_id] = effects
        self._quiet = quiet

        intents = [
            (e, leases[j])
            for j, effects in planned.items()
            for e in effects
            if isinstance(e, Append)
        ]
        if self._append(intents, report):
            self._step("intent-recorded")
        waiting = [j for j in planned if j not in report.conflicts]
        results = self._submit_arrays(waiting, planned, backends, leases, now, report)
        arrayed = {a.job_id for a in results}
        waiting = [j for j in waiting if j not in arrayed]
        for index, job_id in enumerate(waiting):
            job = self._jobs[job_id]
            if job.backend in report.unreachable:
                continue
            later = waiting[index:]  # renewed together when one runs short
            new = self._carry_out(
                job,
                backends[job.backend],
                [e for e in planned[job_id] if not isinstance(e, Append)],
                now,
                report,
                partial(self._fenced, job_id, leases, later, report),
            )
            if new:
                results.append(Append(job_id, self._jobs.packed[job_id][VERSION], tuple(new)))
        # The leases as renewed during the effects: a result is a fact worth recording
        # under any lease still ours.
        if self._append([(a, leases[a.job_id]) for a in results], report):
            self._step("result-recorded")
        return report

    def _submit_arrays(
        self,
        waiting: list[str],
        planned: dict[str, list[Effect]],
        backends: dict[str, Backend],
        leases: dict[str, Lease],
        now: datetime,
        report: TickReport,
    ) -> list[Append]:
        """The first submissions of a sweep's members as ONE object per group, on a
        backend that declares ``arrays`` (``dispatch_submit_array``): the results of the
        members it submitted; the others are left to the one-by-one submits.

        A member goes in when its only side effect this tick is its first, ungated
        submission and its lease allows an effect (S-49). A group with one such member,
        and a group the backend answers None for, is submitted one by one."""
        groups: dict[tuple[str, str], list[tuple[Job, Submit]]] = {}
        for job_id in waiting:
            job = self._jobs[job_id]
            if job.group is None or job.backend in report.unreachable:
                continue
            backend = backends.get(job.backend)
            if backend is None or not backend.declarations.supports(Capability.ARRAYS):
                continue
            effects = [e for e in planned[job_id] if not isinstance(e, Append)]
            if len(effects) != 1 or not isinstance(effects[0], Submit):
                continue
            submit = effects[0]
            if submit.submission != 1 or submit.gated:
                continue
            groups.setdefault((job.backend, job.group.id), []).append((job, submit))
        results: list[Append] = []
        for (name, group_id), found in groups.items():
            if len(found) < 2 or name in report.unreachable:
                continue
            ids = [job.job_id for job, _ in found]
            found = [(j, e) for j, e in found if self._fenced(j.job_id, leases, ids, report)]
            if len(found) < 2:
                continue
            first = found[0][0].group
            assert first is not None
            members = [
                ArrayMember(job_id=job.job_id, index=job.group.index, spec=submit.spec)
                for job, submit in found
                if job.group is not None
            ]
            refusal: Cause | None = None
            try:
                object_ids = backends[name].submit_array(group_id, members, first.max_running)
            except Unreachable as exc:
                self._unreachable(name, exc, now, report)
                continue
            except DispatchError as exc:
                object_ids = None
                detail = exc.detail if isinstance(exc, SubmitRefused) else str(exc)
                refusal = Cause(
                    kind=CauseKind.LAUNCH_FAILED,
                    provenance=Provenance.SCHEDULER,
                    detail=detail,
                    at=now,
                )
                report.errors.append(f"sweep {group_id}: {exc}")
            if object_ids is None and refusal is None:
                continue  # the backend cannot make one array of them: one by one
            self._step("submitted")
            for position, (job, _) in enumerate(found):
                event: Event
                if object_ids is not None:
                    event = SubmissionCreated(
                        job_id=job.job_id,
                        seq=job.version + 1,
                        at=now,
                        submission=1,
                        object_id=object_ids[position],
                    )
                else:
                    assert refusal is not None
                    event = SubmissionFailed(
                        job_id=job.job_id, seq=job.version + 1, at=now, submission=1, cause=refusal
                    )
                results.append(Append(job.job_id, job.version, (event,)))
                report.submitted += 1
        return results

    def _waiting_for_slot(self, leased: Iterable[str]) -> set[str]:
        """The members of sweeps with ``max_running`` that may not be submitted now.

        A member holds a slot from its first submission until its outcome (its
        resubmissions use the slot it holds; a held member keeps it). Free slots go to
        the unsubmitted members in member order, over the whole group: a member this
        supervisor holds no lease on keeps its turn. The count is of the record as this
        supervisor folded it (every job, unless it watches chosen jobs, when the group's
        members are read from the record)."""
        waiting: dict[str, list[Job]] = {}
        packed = self._jobs.packed
        for job_id in [j for j in leased if packed[j][GROUP] is not None]:
            member = _Member.of(packed[job_id])
            group = member.group
            if group is not None and group.max_running is not None and _unsubmitted(member):
                waiting.setdefault(group.id, []).append(self._jobs[job_id])
        if not waiting:
            return set()
        members = self._members(set(waiting))
        blocked: set[str] = set()
        for group_id, jobs in waiting.items():
            found = members.get(group_id)
            limit = jobs[0].group.max_running if jobs[0].group is not None else None
            if found is None or limit is None:
                blocked.update(j.job_id for j in jobs)  # the group could not be read
                continue
            if len(jobs) == len(found) and self._arrays(jobs[0].backend):
                continue  # the whole group goes as one array, bounded by the scheduler
            holding = sum(1 for m in found if m.submissions and m.outcome is None)
            queue = sorted(m.group.index for m in found if m.group and _unsubmitted(m))
            turn = set(queue[: max(0, limit - holding)])
            blocked.update(j.job_id for j in jobs if j.group and j.group.index not in turn)
        return blocked

    def _arrays(self, backend: str) -> bool:
        try:
            return self.registry.get(backend).declarations.supports(Capability.ARRAYS)
        except DispatchError:
            return False

    def _members(self, group_ids: set[str]) -> dict[str, list[_Member]]:
        """Each group's members as folded here, or read from the record when this
        supervisor watches chosen jobs only; a group that cannot be read is left out."""
        if self._only is None:
            found: dict[str, list[_Member]] = {}
            for held in self._jobs.packed.values():
                group = held[GROUP]
                if group is not None and group.id in group_ids:
                    found.setdefault(group.id, []).append(_Member.of(held))
            return found
        from dispatch.core.compact import pack
        from dispatch.job_records import load_group

        read: dict[str, list[_Member]] = {}
        for group_id in group_ids:
            try:
                read[group_id] = [_Member.of(pack(j)) for j in load_group(self.store, group_id)]
            except DispatchError as exc:
                log.warning("sweep %s: its members could not be read: %s", group_id, exc)
        return read

    def _views_by_job(
        self, backend: str, objects: tuple[ObjectView, ...]
    ) -> dict[str, tuple[ObjectView, ...]]:
        """``_by_job``, kept from the tick before while the backend listed the very same
        views in the same order (checked by identity, in C): a quiet world costs no
        regrouping, and each job's views are the identical tuple its quiet check compares."""
        last = self._views.pop(backend, None)
        if last is not None and len(last[0]) == len(objects) and all(map(is_, last[0], objects)):
            index = last[1]
        else:
            del last  # the old index goes before the new one is built
            index = _by_job(objects)
        self._views[backend] = (objects, index)
        return index

    def _decide(
        self,
        job: Job,
        held: Packed,
        objects: tuple[ObjectView, ...],
        now: datetime,
        quiet: dict[str, _Quiet],
        report: TickReport,
    ) -> list[Effect]:
        """``decide``, noting a quiet job in ``quiet``: the tick skips deciding it again
        while its record (the same packed job) and its objects (equal views) are the same
        and no window it waited on has ended (deciding is most of a quiet tick;
        :class:`dispatch.core.decisions.Decision` says why that gives the same answer)."""
        decided = decision(job, objects, job.plan, now)
        report.decided += 1
        if decided.quiet and self._reuse:
            quiet[job.job_id] = _Quiet(held, objects, decided.until)
        return decided.effects

    def _own(self, active: list[str], now: datetime, report: TickReport) -> list[str]:
        """The active jobs this supervisor may act on (S-51, :mod:`dispatch.core.submitters`).

        On a store with roles, the role that created each job is the database's fact, read
        once per job. The others are named in ``report.refused``. Their reason is recorded
        once, under the job's lease, taken for that append only and released at once; a job
        whose lease another supervisor holds (its submitter's, presumably) gets no notice.
        """
        jobs = self._jobs.packed
        callers = {
            name
            for name in {jobs[job_id][BACKEND] for job_id in active}
            if self._runs_as_caller(name)
        }
        if not callers:  # no backend here runs commands as the caller: nothing to check
            return active
        role = self.store.role()
        owners = self._owners
        if role is not None:  # the database's own fact: which role created each job
            unknown = [j for j in active if j not in owners and jobs[j][BACKEND] in callers]
            if unknown:
                owners.update(self.store.job_owners(unknown))
        own: list[str] = []
        notices: list[str] = []
        # A refusal reads only the submitter's uid, the backend and the owner role: one
        # answer per distinct three, the job unpacked only to ask the first time.
        answers: dict[tuple[int | None, str, str | None], str | None] = {}
        for job_id in active:
            held = jobs[job_id]
            backend = held[BACKEND]
            if backend not in callers:
                own.append(job_id)
                continue
            submitter = held[SUBMITTER]
            owner_role = owners.get(job_id)
            key = (None if submitter is None else submitter.uid, backend, owner_role)
            if key in answers:
                why = answers[key]
            else:
                why = answers[key] = refusal(
                    unpack(held),
                    uid=self.uid,
                    runs_as_caller=True,
                    role=role,
                    owner_role=owner_role,
                )
            if why is None:
                own.append(job_id)
                continue
            report.refused[job_id] = why
            self._leases.pop(job_id, None)
            if not any(e.reason == why for e in unpack(held).escalations):
                notices.append(job_id)
        if notices:
            self._record_refusals(notices, now, report)
        return own

    def _runs_as_caller(self, backend: str) -> bool:
        try:
            return self.registry.get(backend).declarations.runs_as_caller
        except DispatchError:
            return False  # a broken backend is reported where its jobs are acted on

    def identity(self) -> Identity:
        """Who this supervisor is, as recorded on the notices it appends."""
        if self._identity is None:
            self._identity = Identity(uid=self.uid, role=self.store.role())
        return self._identity

    def _record_refusals(self, job_ids: list[str], now: datetime, report: TickReport) -> None:
        got = self.store.acquire_leases(job_ids, self.owner, self.lease_ttl, now)
        try:
            appends = []
            for job_id, lease in got.items():
                job = self._jobs[job_id]
                events = refusal_notice(job, report.refused[job_id], by=self.identity(), now=now)
                if events:
                    appends.append((Append(job_id, job.version, tuple(events)), lease))
            self._append(appends, report)
        finally:
            if got:
                self.store.release_leases(list(got), self.owner)

    def _leases_for(self, active: list[str], now: datetime) -> dict[str, Lease]:
        """The leases to act under: one with at least ``effect_window`` left is used as it
        is (nobody can take a live lease, and ``_fenced`` trusts the same margin), so the
        store writes only the leases running short, not every lease every tick.
        Leases past three quarters of their length are renewed early, an eighth of the
        jobs a tick at most, so renewals spread over ticks instead of all coming due in one.
        """
        held = self._leases
        short: list[str] = []
        aging: list[tuple[datetime, str]] = []
        short_before = now + self.effect_window  # expires_at - now < window, per job
        aging_before = now + self.lease_ttl * 0.75
        lease_of = held.get
        # most leases are fresh: one pass picks the others out, then they are sorted out
        for job_id, lease in [
            (j, lease)
            for j in active
            if (lease := lease_of(j)) is None or lease.expires_at < aging_before
        ]:
            if lease is None or lease.expires_at < short_before:
                short.append(job_id)
            else:
                aging.append((lease.expires_at, job_id))
        if not short and not aging and len(held) == len(active):
            return dict(held)  # every active job holds a fresh lease, and no other job does
        aging.sort()
        short += [job_id for _, job_id in aging[: max(1, len(active) // 8)]]
        if short:
            got = self.store.acquire_leases(short, self.owner, self.lease_ttl, now)
            for job_id in short:
                if job_id in got:
                    held[job_id] = got[job_id]
                else:
                    held.pop(job_id, None)
        self._leases = {j: held[j] for j in active if j in held}
        return dict(self._leases)

    def _fenced(
        self, job_id: str, leases: dict[str, Lease], renew: list[str], report: TickReport
    ) -> bool:
        """Whether a side effect for ``job_id`` may start now (S-49).

        An effect starts only under a lease with at least ``effect_window`` left, so it ends
        before another supervisor can take the job over. When less is left, the leases of
        every job still waiting for its effects are renewed in one call; a lease that came
        back with a token other than ours (or the next one, which only we can have taken
        from an expired lease nobody else held) means someone else may have acted: this
        supervisor does nothing more for that job in this tick.
        """
        if job_id in report.fenced:
            return False
        lease = leases[job_id]
        now = self.clock()
        if lease.expires_at - now >= self.effect_window:
            return True
        ids = [j for j in renew if j not in report.fenced]
        renewed = self.store.acquire_leases(ids, self.owner, self.lease_ttl, now)
        for other in ids:
            got = renewed.get(other)
            held = leases[other]
            if got is not None and got.token in (held.token, held.token + 1):
                leases[other] = got
            else:
                report.fenced.append(other)
                self._leases.pop(other, None)
                log.warning(
                    "job %s: lease of token %d lost during the tick; no further effects",
                    other,
                    held.token,
                )
        return job_id not in report.fenced

    def _backend(self, name: str, now: datetime, report: TickReport) -> Backend | None:
        retry = self._retry_at.get(name)
        if retry is not None and now < retry:
            report.unreachable[name] = f"waiting until {retry.isoformat()} before asking again"
            return None
        try:
            return self.registry.get(name)
        except DispatchError as exc:
            report.errors.append(str(exc))
            return None

    def _discover_all(
        self,
        by_backend: dict[str, list[tuple[str, Packed]]],
        now: datetime,
        report: TickReport,
    ) -> dict[str, tuple[Backend, Discovery, list[tuple[str, Packed]]]]:
        """Each backend's discovery of its jobs, asked at once on a thread per backend and
        waited for up to ``discovery_timeout`` in all: what each backend that answered
        showed, and the jobs to decide on it.

        A backend that has not answered by then is treated as ``Unreachable`` for the tick
        (its jobs are left alone, the report says so, and it is waited for again after the
        usual back-off), and it is never asked again while that call runs. When the call
        answers, the answer is used at a later tick if it is still fresh (``_late``)."""
        asking: dict[str, _Asking] = {}
        earlier: set[str] = set()  # waited for again: asked at an earlier tick
        found: dict[str, tuple[Backend, Discovery, list[tuple[str, Packed]]]] = {}
        for name, jobs in by_backend.items():
            call = self._asking.pop(name, None)  # put back below while it still runs
            if call is not None and call.future.done():
                late = self._late(call, jobs, now, report) if self._fresh(call, now) else None
                if late is not None:
                    found[name] = late
                    continue
                call = None  # failed, stale or too old: asked afresh (after any back-off)
            if call is not None:  # still running since an earlier tick: wait for it again
                retry = self._retry_at.get(name)
                if retry is not None and now < retry:
                    self._asking[name] = call
                    report.unreachable[name] = (
                        f"{name}: no answer within {self._deadline():g} s to the discovery "
                        f"asked at {call.asked.isoformat()}; waiting until "
                        f"{retry.isoformat()} before waiting for it again"
                    )
                    continue
                asking[name] = call
                earlier.add(name)
                continue
            backend = self._backend(name, now, report)
            if backend is None:
                continue
            try:
                batch = backend.declarations.max_discovery_batch or 0
            except DispatchError as exc:
                report.errors.append(str(exc))
                continue
            asking[name] = _Asking(backend, jobs, now, batch)
        if asking:
            wait_for([call.future for call in asking.values()], timeout=self._deadline())
        for name, call in asking.items():
            if not call.future.done():
                self._asking[name] = call  # one call in flight per backend at most
                words = f"{name}: no answer within {self._deadline():g} s"
                self._unreachable(name, Unreachable(words), now, report)
                continue
            if name in earlier:  # asked at an earlier tick, answered during this one
                if not self._fresh(call, now):
                    report.unreachable[name] = (
                        f"{name}: the discovery asked at {call.asked.isoformat()} answered "
                        "too late to be used; asked again at the next tick"
                    )
                    continue
                late = self._late(call, by_backend[name], now, report)
                if late is not None:
                    found[name] = late
                continue
            discovery = self._answer(call, now, report)
            if discovery is not None:
                found[name] = (call.backend, discovery, by_backend[name])
        return found

    def _deadline(self) -> float:
        return self.discovery_timeout.total_seconds()

    def _answer(self, call: _Asking, now: datetime, report: TickReport) -> Discovery | None:
        """The discovery a finished call brought, or None after reporting why it failed."""
        name = call.backend.name
        if call.calls:
            report.discovery_calls[name] = report.discovery_calls.get(name, 0) + call.calls
        try:
            discovery = call.future.result()
        except Unreachable as exc:
            self._unreachable(name, exc, now, report)
            return None
        except DispatchError as exc:  # one backend's fault: its jobs wait, the others go on
            report.errors.append(str(exc))
            log.error("%s", exc)
            return None
        self._backoff.pop(name, None)
        self._retry_at.pop(name, None)
        if call.order <= self._applied.get(name, 0):
            log.warning("backend %s: an answer asked before the last one applied is dropped", name)
            return None  # an older answer never overrides a newer one, nor is used twice
        self._applied[name] = call.order
        return discovery

    def _fresh(self, call: _Asking, now: datetime) -> bool:
        """Whether a call's answer may still be decided on: asked within ``effect_window``,
        the margin every decision is already carried out within."""
        return now - call.asked <= self.effect_window

    def _late(
        self, call: _Asking, jobs: list[tuple[str, Packed]], now: datetime, report: TickReport
    ) -> tuple[Backend, Discovery, list[tuple[str, Packed]]] | None:
        """A discovery asked at an earlier tick, used now as any answer taken when it was
        asked (once ``_fresh``): only if asked after the last answer applied, and only for
        the jobs it was asked about whose record has not moved since (the others wait for
        the next tick's discovery). A late failure is reported as any."""
        discovery = self._answer(call, now, report)
        if discovery is None:
            return None
        asked = dict(call.jobs)
        unmoved = [(job_id, held) for job_id, held in jobs if asked.get(job_id) is held]
        return call.backend, discovery, unmoved

    def _unreachable(self, name: str, exc: Exception, now: datetime, report: TickReport) -> None:
        """S-5: no state changes; ask again later, waiting longer each time (up to 5 min)."""
        wait = min(self._backoff.get(name, 0.5) * 2, 300.0)
        self._backoff[name] = wait
        self._retry_at[name] = now + timedelta(seconds=wait)
        report.unreachable[name] = str(exc)
        log.warning("backend %s unreachable (%s); retrying in %.0f s", name, exc, wait)

    def _append(self, appends: list[tuple[Append, Lease]], report: TickReport) -> int:
        """Append in one write; return how many jobs' appends were accepted."""
        if not appends:
            return 0
        accepted = 0
        batches = [Batch(a.job_id, a.expected_version, a.events, lease) for a, lease in appends]
        results = self.store.append_many(batches)
        for append, _ in appends:
            result = results[append.job_id]
            if isinstance(result, RecordConflict):
                report.conflicts.append(append.job_id)
                self._leases.pop(append.job_id, None)
                log.info("job %s: %s; reloading it", append.job_id, result)
                self._reload(append.job_id)
                continue
            report.appended += len(append.events)
            accepted += 1
            self._jobs[append.job_id] = fold(append.events, self._jobs[append.job_id])
        return accepted

    def _carry_out(
        self,
        job: Job,
        backend: Backend,
        effects: list[Effect],
        now: datetime,
        report: TickReport,
        may_act: Callable[[], bool],
    ) -> list[Event]:
        """Do the side effects in order, each only while the job's lease is still ours
        (``may_act``, S-49); return the events that record their results."""

        results: list[Event] = []
        seq = job.version
        for effect in effects:
            if not may_act():
                break
            try:
                if isinstance(effect, Submit):
                    event: Event
                    try:
                        object_id = backend.submit(
                            effect.job_id, effect.submission, effect.spec, effect.gated
                        )
                        self._step("submitted")
                        seq += 1
                        event = SubmissionCreated(
                            job_id=job.job_id,
                            seq=seq,
                            at=now,
                            submission=effect.submission,
                            object_id=object_id,
                        )
                    except Unreachable:
                        raise
                    except DispatchError as exc:
                        # Refused, or failed in a way no retry mends: a
                        # recorded, visible ending in the backend's words, never a retry
                        # for ever. Only Unreachable is tried again.
                        seq += 1
                        detail = exc.detail if isinstance(exc, SubmitRefused) else str(exc)
                        cause = Cause(
                            kind=CauseKind.LAUNCH_FAILED,
                            provenance=Provenance.SCHEDULER,
                            detail=detail,
                            at=now,
                        )
                        event = SubmissionFailed(
                            job_id=job.job_id,
                            seq=seq,
                            at=now,
                            submission=effect.submission,
                            cause=cause,
                        )
                    results.append(event)
                    report.submitted += 1
                elif isinstance(effect, Stop):
                    backend.stop(effect.object_id, effect.cause)
                    self._step("stopped")
                    report.stopped += 1
                elif isinstance(effect, OpenGate):
                    backend.open_gate(effect.object_id)
                    self._step("gate-opened")
                    report.opened += 1
            except Unreachable as exc:
                self._unreachable(backend.name, exc, now, report)
                break
            except DispatchError as exc:
                report.errors.append(f"job {job.job_id}: {exc}")
                log.error("job %s: %s", job.job_id, exc)
                break
        return results

    # ------------------------------------------------------------------ loop
    def run(
        self,
        *,
        interval: float = 5.0,
        stop: threading.Event | None = None,
        until: Callable[[TickReport], bool] | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
    ) -> TickReport:
        """Tick every ``interval`` seconds until ``stop`` is set or ``until(report)`` is true."""

        stop = stop or threading.Event()
        while True:
            try:
                report = self.tick()
            except Unreachable as exc:
                # The record store could not be reached for the tick (a server restarting,
                # a disk full): nothing half-done is trusted, and the next tick reads the
                # record again (the store reconnects); the loop never dies of it.
                log.warning("tick skipped: %s", exc)
                report = TickReport(at=self.clock(), errors=[f"tick skipped: {exc}"])
            if on_tick is not None:
                on_tick(report)
            if until is not None and until(report):
                return report
            if stop.wait(interval):
                return report

    def release(self) -> None:
        """Give up this supervisor's leases so another can take over at once."""
        self.store.release_leases(list(self._jobs), self.owner)
        self._leases.clear()
