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
from dispatch.job_records import load_group, load_job
from dispatch.model.errors import BackendBroken
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
