"""Creating jobs and reading their status: the two things every front end needs.

Shell code: it touches the record store and the backend. The decisions it makes are the
pure core's (``Plan.bind``, ``fold``, ``project``), so the CLI, the supervisor and any
other reader compute a job's Status the same way (S-24, S-40).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from dispatch.backends import Registry
from dispatch.core.folding import fold
from dispatch.core.interventions import check_supersede, supersede
from dispatch.core.job import Job
from dispatch.core.policy import Plan, RecoveryPolicy
from dispatch.core.projection import project
from dispatch.core.status import Status
from dispatch.model.discovery import Discovery
from dispatch.model.enums import Capability, Enforcer, State
from dispatch.model.errors import BadInput, RecordConflict
from dispatch.model.events import Event, Group, Identity, JobCreated
from dispatch.model.spec import JobSpec
from dispatch.model.supervision import Supervision
from dispatch.store.base import RecordStore, VersionConflict


def _clock_skew() -> timedelta:
    """``DISPATCH_TEST_CLOCK_SKEW``: seconds (negative: behind) this process's clock runs
    off the machine's, as on a host whose clock is wrong. Only tests set it, to run the
    supervisors of skewed hosts on one machine; a value that is not a number of seconds
    within a day is ignored."""
    try:
        seconds = float(os.environ.get("DISPATCH_TEST_CLOCK_SKEW", "0") or "0")
    except ValueError:
        return timedelta(0)
    return timedelta(seconds=seconds) if abs(seconds) <= 86_400 else timedelta(0)


_SKEW = _clock_skew()


def utc_now() -> datetime:
    """Now, in UTC, by this host's clock."""
    now = datetime.now(UTC)
    return now + _SKEW if _SKEW else now


class RecordClock:
    """Now by the record's clock: this host's clock plus the record's offset from it
    (:meth:`RecordStore.clock_offset`), measured at the first call and again every
    ``every``. A supervisor acts by it, so supervisors on hosts whose clocks disagree
    (by seconds or minutes) time their leases alike: a host whose clock runs ahead never
    sees a live lease of another host as expired, nor one running behind its own as live
    too long (S-35, S-49). For a record of one machine (SQLite) it is this host's clock.
    A record that cannot be read keeps the last offset."""

    def __init__(
        self,
        store: RecordStore,
        base: Callable[[], datetime] = utc_now,
        every: timedelta = timedelta(seconds=60),
    ) -> None:
        self.store = store
        self.base = base
        self.every = every
        self.offset = timedelta(0)
        self._measured: datetime | None = None

    def __call__(self) -> datetime:
        now = self.base()
        measured = self._measured
        if measured is None or not timedelta(0) <= now - measured < self.every:
            self._measure()
            now = self.base()
        return now + self.offset

    def _measure(self) -> None:
        from dispatch.model.errors import DispatchError

        before = self.base()
        try:
            offset = self.store.clock_offset(before)
        except DispatchError:
            return  # the next call tries again; until then the last offset holds
        after = self.base()
        # the database read its clock between before and after: take the middle
        self.offset = offset - (after - before) / 2
        self._measured = after


def identity_of(store: RecordStore) -> Identity:
    """Who this process is, as recorded beside an actor's name: its real uid (never
    ``LOGNAME``, which anyone can set) and the store's database role, where it has roles."""
    return Identity(uid=os.getuid(), role=store.role())


def new_job_id() -> str:
    """Short, unguessable and safe in every scheduler's names and labels."""
    return "j" + secrets.token_hex(6)


def bind_plan(registry: Registry, backend: str, policy: RecoveryPolicy) -> Plan:
    return Plan.bind(policy, registry.get(backend).declarations)


def check_spec(registry: Registry, backend: str, spec: JobSpec) -> None:
    """Refuse options and capabilities the backend does not declare, before anything is
    written (S-36): a job asking what its backend cannot do would otherwise be
    recorded and then refused by every submit."""
    declarations = registry.get(backend).declarations
    declared = declarations.options
    unknown = sorted(set(spec.options) - set(declared))
    if unknown:
        accepted = ", ".join(sorted(declared)) or "none"
        raise BadInput(
            f"backend {backend!r} does not accept the option(s) {', '.join(unknown)} "
            f"(it accepts: {accepted})"
        )
    missing = [
        f"{what} needs the {capability.value!r} capability"
        for capability, what in _asked(spec)
        if capability not in declarations.capabilities
    ]
    if missing:
        can = ", ".join(sorted(c.value for c in declarations.capabilities)) or "none"
        raise BadInput(
            f"backend {backend!r} cannot run this job: {'; '.join(missing)} (it declares: {can})"
        )


def refuse_early(
    registry: Registry, backend: str, spec: JobSpec, *, recording_only: bool = False
) -> None:
    """Everything the core and the backend can refuse of a spec, before it is recorded:
    what the backend does not declare, its ``validate``, then its ``dispatch_check`` (last:
    it may read the scheduler). ``recording_only``: the job is recorded for a supervisor
    to submit, maybe from a host that cannot reach the scheduler, so a check that cannot
    be made lets it be recorded (the submission then meets the scheduler's own refusal),
    while what the check refuses still is."""
    from dispatch.model.errors import Unreachable

    check_spec(registry, backend, spec)
    selected = registry.get(backend)
    selected.validate(spec)
    try:
        selected.check(spec)
    except Unreachable:
        if not recording_only:
            raise


def _asked(spec: JobSpec) -> list[tuple[Capability, str]]:
    """The capabilities ``spec`` needs, each with the field that needs it."""
    resources = spec.resources
    asked: list[tuple[Capability, str]] = []
    if resources.nodes > 1:
        asked.append((Capability.MULTI_NODE, f"resources.nodes={resources.nodes}"))
    if resources.gpus_per_node:
        asked.append((Capability.GPUS, f"resources.gpus_per_node={resources.gpus_per_node}"))
    if resources.time_limit is not None:
        asked.append((Capability.TIME_LIMIT, f"resources.time_limit={resources.time_limit}"))
    if spec.exclude_nodes:
        asked.append((Capability.EXCLUDE_NODES, "exclude_nodes"))
    return asked


def create_job(
    store: RecordStore,
    registry: Registry,
    *,
    backend: str,
    spec: JobSpec,
    policy: RecoveryPolicy,
    job_id: str | None = None,
    now: datetime | None = None,
    actor: str | None = None,
    supersedes: str | None = None,
    environment: Mapping[str, str] | None = None,
    by: Identity | None = None,
    group: Group | None = None,
) -> str:
    """Record a new job; the supervisor submits it on its next tick. Returns the job id.

    :param environment: the submitter's environment (default: this process's), kept by a
        backend that runs jobs in it (the local backend, :mod:`dispatch.local.environment`),
        never recorded: it may hold secrets.
    :param by: who submits it (default: this process, :func:`identity_of`); a supervisor
        runs a local job only as this uid (:mod:`dispatch.core.submitters`).
    """

    plan = bind_plan(registry, backend, policy)
    check_spec(registry, backend, spec)
    native = frozenset(b.rule.action for b in plan.bindings if b.enforcer is Enforcer.BACKEND)
    spec = spec.model_copy(update={"native_actions": native})
    job_id = job_id or new_job_id()
    _keep_environment(registry, backend, job_id, environment)
    created = JobCreated(
        job_id=job_id,
        seq=1,
        at=now or utc_now(),
        actor=actor,
        name=spec.name,
        backend=backend,
        spec=spec,
        plan=plan,
        supersedes=supersedes,
        by=by or identity_of(store),
        group=group,
    )
    store.append(job_id, 0, [created])
    return job_id


def create_group(
    store: RecordStore,
    registry: Registry,
    *,
    backend: str,
    specs: Sequence[JobSpec],
    policy: RecoveryPolicy,
    group_id: str,
    values: Sequence[Mapping[str, str]],
    max_running: int | None = None,
    now: datetime | None = None,
    actor: str | None = None,
    by: Identity | None = None,
) -> list[str]:
    """Record the members of a sweep (:mod:`dispatch.sweep`) in one write: member ``i``
    is job ``<group_id>-<i>`` with ``specs[i]`` and ``values[i]``. Every spec is checked
    before anything is recorded. Returns the job ids in member order."""
    from dispatch.store.base import Batch
    from dispatch.sweep import member_id

    if len(specs) != len(values) or not specs:
        raise BadInput("a sweep needs one spec and one set of values per member, at least one")
    plan = bind_plan(registry, backend, policy)
    native = frozenset(b.rule.action for b in plan.bindings if b.enforcer is Enforcer.BACKEND)
    for spec in specs:
        check_spec(registry, backend, spec)
    # a backend with the arrays capability submits the sweep as one array: a limit of
    # its scheduler's arrays refuses the sweep now, before anything is recorded
    registry.get(backend).check_array(len(specs), max_running)
    at = now or utc_now()
    who = by or identity_of(store)
    batches: list[Batch] = []
    for index, (spec, chosen) in enumerate(zip(specs, values, strict=True)):
        job_id = member_id(group_id, index)
        group = Group(
            id=group_id,
            index=index,
            size=len(specs),
            values=dict(chosen),
            max_running=max_running,
        )
        created = JobCreated(
            job_id=job_id,
            seq=1,
            at=at,
            actor=actor,
            name=spec.name,
            backend=backend,
            spec=spec.model_copy(update={"native_actions": native}),
            plan=plan,
            by=who,
            group=group,
        )
        batches.append(Batch(job_id, 0, [created]))
    for batch in batches:
        _keep_environment(registry, backend, batch.job_id, None)
    results = store.append_many(batches)
    for result in results.values():
        if isinstance(result, RecordConflict):
            raise result
    return [batch.job_id for batch in batches]


def load_group(store: RecordStore, group_id: str) -> list[Job]:
    """The members of sweep ``group_id``, in member order (two reads of the record).

    :raises UnknownJob: the record has no such group.
    """
    from dispatch.sweep import member_id

    first = load_job(store, member_id(group_id, 0))
    if first.group is None or first.group.id != group_id:
        raise BadInput(f"{group_id}: not a sweep's group id")
    rest = [member_id(group_id, i) for i in range(1, first.group.size)]
    read = store.read_many(rest) if rest else {}
    return [first, *(fold(read[job_id]) for job_id in rest)]


def _keep_environment(
    registry: Registry, backend: str, job_id: str, environment: Mapping[str, str] | None
) -> None:
    keep = getattr(registry.get(backend).plugin, "keep_environment", None)
    if callable(keep):
        keep(job_id, dict(os.environ if environment is None else environment))


def load_job(store: RecordStore, job_id: str) -> Job:
    return fold(store.read(job_id))


def status_of(
    store: RecordStore | None,
    registry: Registry,
    job_id: str,
    *,
    backend: str | None = None,
    now: datetime | None = None,
    timeout: float | None = None,
) -> Status:
    """The record folded plus ONE fresh discovery, projected (S-40). Without a store, the
    backend's objects alone (S-29), which needs ``backend``.

    A scheduler that cannot be asked (``Unreachable``, or no answer within ``timeout``)
    gives, for a recorded job, what the record alone knows with ``Status.unreachable``
    set (:func:`record_only`); without a record it is raised."""

    job = load_job(store, job_id) if store is not None else None
    name = job.backend if job is not None else backend
    if name is None:
        raise BadInput("without a record, say which backend to ask: --backend NAME")
    if job is not None and store is not None:
        mine = _not_ours(store, registry, job, now)
        if mine is not None:
            return mine
    from dispatch.model.errors import Unreachable

    try:
        discovery = discover_within(registry, name, job_id, timeout)
    except Unreachable as exc:
        if job is None:
            raise
        return record_only(job, name, str(exc), now or utc_now())
    return project(job, discovery, now or discovery.at, job_id=job_id)


def discover_within(registry: Registry, name: str, job_id: str, timeout: float | None) -> Discovery:
    """One discovery; with ``timeout``, one that has not answered within it is
    :class:`Unreachable` (a read-only command does not wait out a frozen scheduler's own
    timeouts). The call left behind finishes on its own in a daemon thread."""
    import threading

    from dispatch.model.errors import Unreachable

    backend = registry.get(name)
    if timeout is None:
        return backend.discover([job_id])
    answer: list[Discovery] = []
    failure: list[BaseException] = []

    def ask() -> None:
        try:
            answer.append(backend.discover([job_id]))
        except BaseException as exc:
            failure.append(exc)

    asking = threading.Thread(target=ask, name=f"discover-{name}", daemon=True)
    asking.start()
    asking.join(timeout)
    if failure:
        raise failure[0]
    if not answer:
        raise Unreachable(f"{name}: the scheduler did not answer within {timeout:g} s")
    return answer[0]


def record_only(job: Job, backend: str, words: str, now: datetime) -> Status:
    """What the record alone knows of ``job`` when its scheduler could not be asked:
    a committed outcome, a hold and a submission not yet made are the record's; a job
    whose object exists is ``unknown`` (running, pending or ended, only the scheduler
    knows). Nothing is decided and nothing is appended."""
    from dispatch.core.status import Unreached

    status = project(job, Discovery(backend=backend, at=now), now)
    current = job.current
    unseen = (
        job.outcome is None
        and job.hold is None
        and not job.awaiting_submission
        and current is not None
        and current.object_id is not None
        and current.failed is None
    )
    first_line = words.splitlines()[0] if words.strip() else "could not be asked"
    update: dict[str, object] = {
        "unreachable": Unreached(backend=backend, words=first_line, since=now),
    }
    # nothing ever sent: no object can exist, so the record's projection is the whole truth
    # (a cancel of a job not yet submitted shows as cancelled, not yet committed)
    if (unseen or not status.settled) and job.submissions:
        update.update(state=State.UNKNOWN, cause=None, settled=True)
    return status.model_copy(update=update)


def with_supervision(store: RecordStore, status: Status, now: datetime | None = None) -> Status:
    """``status`` with whether a supervisor watches the job (``Status.supervisor``): its
    lease's owner and the supervisors' last ticks (two small reads), as
    :func:`dispatch.core.supervision.supervision` words it. A job whose ending is committed
    needs no supervisor and is returned as it is."""
    from dispatch.core.supervision import supervision
    from dispatch.model.enums import TERMINAL_STATES, Level

    if status.level is not Level.RECORD or (status.settled and status.state in TERMINAL_STATES):
        return status
    now = now or RecordClock(store)()  # leases and beats are in the record's time
    owner = store.lease_owners([status.job_id], now).get(status.job_id)
    watch: Supervision = supervision(owner, store.beats(), now)
    return status.model_copy(update={"supervisor": watch})


def submitter_refusal(store: RecordStore, registry: Registry, job: Job) -> str | None:
    """Why this process may not act on ``job``'s objects (S-51,
    :func:`dispatch.core.submitters.refusal`, given this process's uid, its database role
    and the role the database says created the job), or None."""
    from dispatch.core.submitters import refusal

    caller = registry.get(job.backend).declarations.runs_as_caller
    if not caller:
        return None
    role = store.role()
    owner = store.job_owners([job.job_id]).get(job.job_id) if role is not None else None
    return refusal(job, uid=os.getuid(), runs_as_caller=True, role=role, owner_role=owner)


def _not_ours(
    store: RecordStore, registry: Registry, job: Job, now: datetime | None
) -> Status | None:
    """The Status of another user's job on a backend that runs commands as their
    submitter (S-51), None for a job of this process's uid. Its objects are not this
    process's to look at (they live in the submitter's state directory), so nobody asks
    for them: a job with no object recorded yet, or finished, is shown from its record;
    otherwise there is nothing true to show here, and the error says whose objects they
    are."""
    from dispatch.model.discovery import Discovery
    from dispatch.model.errors import Unreachable

    why = submitter_refusal(store, registry, job)
    if why is None:
        return None
    now = now or utc_now()
    objects = [s.object_id for s in job.submissions if s.object_id]
    if job.outcome is not None or not objects:
        return project(job, Discovery(backend=job.backend, at=now, objects=()), now)
    raise Unreachable(
        f"job {job.job_id}: its {job.backend} objects ({', '.join(objects)}) are not visible "
        f"to this process (uid {os.getuid()}): {why.split(';')[0]}, and only that user can "
        f"see them; `dispatch history {job.job_id}` shows its record"
    )


#: How often a request is made again when the record moved under it (a supervisor's tick).
REQUEST_ATTEMPTS = 20


def request(
    store: RecordStore,
    job_id: str,
    make: Callable[[Job], list[Event]],
    *,
    attempts: int = REQUEST_ATTEMPTS,
) -> Job:
    """Make a person's request (cancel, resubmit, give up) on the job as it is now, and
    append it; when another writer (a supervisor) appended first, read the job again and
    make the request again, instead of failing on a conflict the person did not cause.
    ``make`` refuses with
    ``NotAllowed`` what the job's new state no longer allows (a hold resolved by someone
    else: pass the hold to ``interventions.resubmit``)."""
    job = load_job(store, job_id)
    for _ in range(attempts):
        events = make(job)
        if not events:
            return job
        try:
            store.append(job.job_id, job.version, events)
        except VersionConflict:
            job = load_job(store, job_id)
            continue
        return fold(events, job)
    raise RecordConflict(
        f"job {job_id}: the record moved on {attempts} times while this request was made; try again"
    )


def append_request(store: RecordStore, job: Job, events: list[Event]) -> Job:
    """Append what a person asked (cancel, resubmit, give up) at the folded version."""
    if events:
        store.append(job.job_id, job.version, events)
        return fold(events, job)
    return job


def supersede_job(
    store: RecordStore,
    registry: Registry,
    job_id: str,
    *,
    actor: str,
    now: datetime | None = None,
    by: Identity | None = None,
) -> str:
    """Run a finished job again as a new job naming the old one (S-18)."""

    now = now or utc_now()
    by = by or identity_of(store)
    old = load_job(store, job_id)
    check_supersede(old)
    # the old spec passed when it was first recorded; the scheduler may have changed since
    # (a queue deleted), and a new job is refused now rather than at every submission
    refuse_early(registry, old.backend, old.spec, recording_only=True)
    new_id = create_job(
        store,
        registry,
        backend=old.backend,
        spec=old.spec,
        policy=old.plan.policy,
        now=now,
        actor=actor,
        supersedes=old.job_id,
        by=by,
    )
    store.append(
        old.job_id, old.version, supersede(old, new_job_id=new_id, actor=actor, now=now, by=by)
    )
    return new_id
