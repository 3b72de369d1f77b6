"""The ``arrays`` capability: a sweep's first submissions go to the backend as one array
(``dispatch_submit_array``), one object id back per member; a backend without it keeps
getting one submit per member, and a member's later submissions are single submits."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from core_bench import policy
from dispatch import (
    Action,
    BadInput,
    Capability,
    CauseKind,
    Client,
    Declarations,
    JobSpec,
    Registry,
    State,
    SubmitRefused,
    hookimpl,
)
from dispatch.client import SweepDryRun
from dispatch.job_records import load_group, load_job
from dispatch.model.errors import BackendBroken, BackendFailed
from dispatch.model.prepared import Prepared
from dispatch.model.spec import ArrayMember
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever, succeed

PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)
TRAIN = JobSpec(command=("python", "train.py", "--seed", "{seed}"))


class ArraysBackend(SimulatedBackend):
    """The simulated scheduler behind an adapter that declares ``arrays``: an array is
    recorded as one call, and makes one scheduler object per member (ids as returned)."""

    def __init__(self, scheduler: SimScheduler, limit: int = 8) -> None:
        super().__init__(scheduler, name="arrays")
        self.limit = limit
        self.arrays: list[tuple[str, list[ArrayMember], int | None]] = []
        self.singles: list[tuple[str, int]] = []
        self.answer: str | None = "ids"

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        made = super().dispatch_declare()
        return made.model_copy(update={"capabilities": made.capabilities | {Capability.ARRAYS}})

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        self.singles.append((job_id, submission))
        return super().dispatch_submit(job_id, submission, spec, gated)

    @hookimpl
    def dispatch_check_array(self, size: int, max_running: int | None) -> None:
        if size > self.limit:
            raise BadInput(f"sweep: {size} members; MaxArraySize is {self.limit}")

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        self.arrays.append((group_id, list(members), max_running))
        if self.answer is None:
            return None
        if self.answer == "refuse":
            raise SubmitRefused("sbatch: error: Batch job submission failed: QOSMaxSubmitJob")
        return [SimulatedBackend.dispatch_submit(self, m.job_id, 1, m.spec, False) for m in members]


class Rig:
    def __init__(self, store: RecordStore, arrays: bool = True) -> None:
        self.sched = SimScheduler()
        self.backend = (
            ArraysBackend(self.sched) if arrays else SimulatedBackend(self.sched, name="arrays")
        )
        self.registry = Registry.from_plugins({"arrays": self.backend})
        self.store = store
        self.client = Client(store, registry=self.registry, actor="ann")
        self.sup = Supervisor(store, self.registry, owner="sup", clock=self.sched.now)

    def sweep(self, grid: str, max_running: int | None = None) -> list[str]:
        made = self.client.sweep_spec(
            TRAIN,
            grid,
            backend="arrays",
            policy=policy(PREEMPT),
            max_running=max_running,
            start=False,
        )
        return made.job_ids


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    return Rig(store)


def test_a_sweeps_first_submissions_are_one_array_call_one_object_id_per_member(
    rig: Rig,
) -> None:
    ids = rig.sweep("seed=0..5", max_running=2)
    report = rig.sup.tick()
    assert report.submitted == 6
    assert isinstance(rig.backend, ArraysBackend)
    ((group_id, members, bound),) = rig.backend.arrays
    assert rig.backend.singles == []
    assert group_id == ids[0].rsplit("-", 1)[0]
    assert [m.job_id for m in members] == ids
    assert [m.index for m in members] == list(range(6))
    assert members[4].spec.command == ("python", "train.py", "--seed", "4")
    assert bound == 2  # the scheduler bounds the array's tasks, not the supervisor
    objects = {o.tags[SimScheduler.TAG_JOB]: o.object_id for o in rig.sched.objects()}
    for job in load_group(rig.store, group_id):
        (submission,) = job.submissions
        assert submission.object_id == objects[job.job_id]


def test_a_members_resubmission_is_a_single_submit_and_the_others_are_untouched(
    rig: Rig,
) -> None:
    ids = rig.sweep("seed=0..3")
    victim = ids[2]
    for job_id in ids:
        rig.sched.plan(job_id, 1, succeed(after=20) if job_id != victim else runs_forever())
    rig.sched.plan(victim, 2, succeed(after=2))
    rig.sup.tick()
    rig.sched.advance(1)
    (obj,) = [o for o in rig.sched.objects() if o.tags[SimScheduler.TAG_JOB] == victim]
    rig.sched.preempt(obj.object_id)
    for _ in range(30):
        rig.sup.tick()
        rig.sched.advance(1)
    assert isinstance(rig.backend, ArraysBackend)
    assert len(rig.backend.arrays) == 1
    assert rig.backend.singles == [(victim, 2)]
    for job_id in ids:
        job = load_job(rig.store, job_id)
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job_id
        assert len(job.submissions) == (2 if job_id == victim else 1), job_id


def test_a_sweep_over_the_schedulers_array_limit_is_refused_and_nothing_recorded(
    rig: Rig,
) -> None:
    with pytest.raises(BadInput, match="MaxArraySize is 8"):
        rig.sweep("seed=0..8")
    assert rig.store.jobs() == []


def test_an_array_the_backend_declines_goes_one_by_one(rig: Rig) -> None:
    assert isinstance(rig.backend, ArraysBackend)
    rig.backend.answer = None
    ids = rig.sweep("seed=0..2")
    rig.sup.tick()
    assert len(rig.backend.arrays) == 1
    assert rig.backend.singles == [(job_id, 1) for job_id in ids]


def test_a_refused_array_fails_each_members_first_submission_with_its_words(rig: Rig) -> None:
    assert isinstance(rig.backend, ArraysBackend)
    rig.backend.answer = "refuse"
    ids = rig.sweep("seed=0..2")
    rig.sup.tick()
    for job_id in ids:
        (submission,) = load_job(rig.store, job_id).submissions
        assert submission.failed is not None
        assert submission.failed.kind is CauseKind.LAUNCH_FAILED
        assert "QOSMaxSubmitJob" in submission.failed.detail
    assert rig.backend.singles == []


def test_a_backend_without_arrays_gets_one_submit_per_member_S30(store: RecordStore) -> None:
    rig = Rig(store, arrays=False)
    ids = rig.sweep("seed=0..9", max_running=3)  # no array limit is asked for
    rig.sup.tick()
    alive = [o for o in rig.sched.objects() if not o.ended]
    assert len(alive) == 3  # the supervisor's slots bound it, as before
    assert sorted(o.tags[SimScheduler.TAG_JOB] for o in alive) == ids[:3]


def test_declaring_arrays_without_its_hooks_is_refused_at_load_S31() -> None:
    class Half(SimulatedBackend):
        @hookimpl
        def dispatch_declare(self) -> Declarations:
            made = super().dispatch_declare()
            return made.model_copy(update={"capabilities": made.capabilities | {Capability.ARRAYS}})

    registry = Registry.from_plugins({"simulated": Half(SimScheduler())})
    with pytest.raises(BackendBroken, match="declares 'arrays' but does not implement"):
        registry.get("simulated")


class PreparingArrays(ArraysBackend):
    """An adapter with ``dispatch_prepare_array``: its array submit sends what that hook
    builds (recorded in ``sent``), as the hook's spec asks."""

    def __init__(self, scheduler: SimScheduler) -> None:
        super().__init__(scheduler)
        self.sent: list[Prepared] = []
        self.prepared = 0

    @hookimpl
    def dispatch_prepare_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> Prepared | None:
        self.prepared += 1
        if self.answer is None:
            return None
        if self.answer == "wrong":
            return "sbatch --array=0-3"  # type: ignore[return-value]
        return Prepared(
            backend="arrays",
            job_id=group_id,
            submission=1,
            gated=False,
            parts={
                "array": f"0-{len(members) - 1}%{max_running}",
                "tasks": {str(m.index): list(m.spec.command) for m in members},
            },
        )

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        prepared = self.dispatch_prepare_array(group_id, members, max_running)
        if prepared is not None:
            self.sent.append(prepared)
        return super().dispatch_submit_array(group_id, members, max_running)


def _preparing(store: RecordStore) -> Rig:
    rig = Rig(store)
    rig.backend = PreparingArrays(rig.sched)
    rig.registry = Registry.from_plugins({"arrays": rig.backend})
    rig.client = Client(store, registry=rig.registry, actor="ann")
    rig.sup = Supervisor(store, rig.registry, owner="sup", clock=rig.sched.now)
    return rig


def _dry(rig: Rig, grid: str, max_running: int | None = None) -> SweepDryRun:
    return rig.client.dry_run_sweep_spec(
        TRAIN, grid, backend="arrays", policy=policy(PREEMPT), max_running=max_running
    )


def test_a_sweeps_dry_run_is_the_prepared_array_the_supervisor_then_sends_S30(
    store: RecordStore,
) -> None:
    rig = _preparing(store)
    assert isinstance(rig.backend, PreparingArrays)
    dry = _dry(rig, "seed=0..3", max_running=2)
    assert dry.as_array and dry.members == () and dry.array is not None
    assert dry.array.parts["tasks"]["3"] == ["python", "train.py", "--seed", "3"]
    assert rig.backend.arrays == [] and rig.backend.sent == [] and rig.store.jobs() == []

    ids = rig.sweep("seed=0..3", max_running=2)
    rig.sup.tick()

    (sent,) = rig.backend.sent
    group_id = ids[0].rsplit("-", 1)[0]
    assert sent == dry.array.model_copy(update={"job_id": group_id})


def test_members_the_backend_would_not_array_are_dry_run_one_by_one_S30(
    store: RecordStore,
) -> None:
    rig = _preparing(store)
    assert isinstance(rig.backend, PreparingArrays)
    rig.backend.answer = None
    dry = _dry(rig, "seed=0..2")
    assert not dry.as_array and dry.array is None
    assert [one.job_id for one in dry.members] == list(dry.job_ids)
    assert [one.spec.command[-1] for one in dry.members] == ["0", "1", "2"]
    assert rig.backend.singles == [] and rig.store.jobs() == []


def test_a_backend_with_arrays_but_not_prepare_array_dry_runs_without_calling_it_S30(
    rig: Rig,
) -> None:
    """The hook is optional: the dry run says the members go as one array (the backend
    builds it only when it sends it) and asks the backend nothing."""
    assert isinstance(rig.backend, ArraysBackend)
    dry = _dry(rig, "seed=0..3", max_running=2)
    assert dry.as_array and dry.array is None and dry.members == ()
    assert [s.command[-1] for s in dry.specs] == ["0", "1", "2", "3"]
    assert rig.backend.arrays == [] and rig.backend.singles == [] and rig.store.jobs() == []
    with pytest.raises(BadInput, match="MaxArraySize is 8"):  # checked as the sweep is
        _dry(rig, "seed=0..8")


def test_a_prepared_array_of_the_wrong_type_is_the_backends_fault(store: RecordStore) -> None:
    rig = _preparing(store)
    assert isinstance(rig.backend, PreparingArrays)
    rig.backend.answer = "wrong"
    with pytest.raises(BackendFailed, match="dispatch_prepare_array returned 'str', not a Prep"):
        _dry(rig, "seed=0..3")


def test_prepare_array_is_never_asked_of_a_backend_without_arrays(store: RecordStore) -> None:
    class Undeclared(PreparingArrays):
        @hookimpl
        def dispatch_declare(self) -> Declarations:
            return SimulatedBackend.dispatch_declare(self)

    sched = SimScheduler()
    backend = Undeclared(sched)
    client = Client(store, registry=Registry.from_plugins({"arrays": backend}), actor="ann")
    dry = client.dry_run_sweep_spec(TRAIN, "seed=0..2", backend="arrays")
    assert not dry.as_array and len(dry.members) == 3 and backend.prepared == 0
