"""The simulated scheduler and its adapter: the faults the supervisor's tests rely on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dispatch import (
    Backend,
    Cause,
    CauseKind,
    JobSpec,
    LogSelection,
    ObjectView,
    Phase,
    Provenance,
    Registry,
    Resources,
    SubmitRefused,
    Unreachable,
)
from dispatch.model.errors import BadInput
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated import scheduler as sim

LONG = JobSpec(command=("sleep", "3600"))
STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="ann", detail="no")


@pytest.fixture
def scheduler() -> SimScheduler:
    return SimScheduler(nodes=4)


@pytest.fixture
def backend(scheduler: SimScheduler) -> Backend:
    return Registry.from_plugins({"simulated": SimulatedBackend(scheduler)}).get("simulated")


def only(backend: Backend, job_id: str) -> ObjectView:
    (obj,) = backend.discover([job_id]).of_job(job_id)
    return obj


def test_sim_time_passes_only_when_advanced(scheduler: SimScheduler, backend: Backend) -> None:
    backend.submit("a", 1, JobSpec(command=("sleep", "30")), False)
    start = scheduler.now()
    assert only(backend, "a").phase is Phase.RUNNING
    scheduler.advance(29)
    assert only(backend, "a").phase is Phase.RUNNING
    scheduler.advance(1)
    obj = only(backend, "a")
    assert obj.phase is Phase.ENDED and obj.cause and obj.cause.kind is CauseKind.NONE
    assert obj.executions[0].ended_at == start + timedelta(seconds=30)


def test_sim_preemption_keeps_the_schedulers_words(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-2: detail is the scheduler's reason verbatim."""
    object_id = backend.submit("a", 1, LONG, False)
    scheduler.preempt(object_id, "Preempted by job 99 (partition urgent)")
    cause = only(backend, "a").cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.SCHEDULER)
    assert cause.detail == "Preempted by job 99 (partition urgent)"


def test_sim_node_loss_can_keep_reporting_running(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-26: the FailureTarget case: running, with cause node-lost, for as long as it lasts."""
    scheduler.plan("a", 1, sim.node_loss(10, keeps_running=True))
    backend.submit("a", 1, LONG, False)
    scheduler.advance(3600)
    obj = only(backend, "a")
    assert obj.phase is Phase.RUNNING
    assert obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST


def test_sim_unreachable_period_raises_then_recovers(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-5."""
    backend.submit("a", 1, LONG, False)
    scheduler.go_down(seconds=60)
    with pytest.raises(Unreachable, match="connection refused"):
        backend.discover(["a"])
    with pytest.raises(Unreachable):
        backend.submit("b", 1, LONG, False)
    scheduler.advance(60)
    assert only(backend, "a").phase is Phase.RUNNING
    assert backend.discover(["b"]).objects == ()


def test_sim_slow_answers_move_the_clock(scheduler: SimScheduler, backend: Backend) -> None:
    scheduler.latency = 7.5
    before = scheduler.now()
    discovery = backend.discover(["a"])
    assert discovery.at == before + timedelta(seconds=7.5)


def test_sim_duplicate_objects_share_the_tags(scheduler: SimScheduler, backend: Backend) -> None:
    """S-34: what a crash-retried submit leaves behind: two objects for one submission."""
    scheduler.duplicate_next("a", 1)
    returned = backend.submit("a", 1, LONG, False)
    objects = backend.discover(["a"]).of_job("a")
    assert len(objects) == 2 and {o.submission for o in objects} == {1}
    assert returned in {o.object_id for o in objects}


def test_sim_objects_vanish_from_listings_and_come_back(
    scheduler: SimScheduler, backend: Backend
) -> None:
    object_id = backend.submit("a", 1, LONG, False)
    scheduler.hide(object_id, seconds=30)
    assert backend.discover(["a"]).objects == ()
    scheduler.advance(30)
    assert only(backend, "a").object_id == object_id


def test_sim_unmappable_answer_is_unknown_verbatim(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-4: never stretched to another kind."""
    object_id = backend.submit("a", 1, LONG, False)
    scheduler.garble(object_id, "REVOKED_BY_FEDERATION")
    obj = only(backend, "a")
    assert obj.cause is not None and obj.cause.kind is CauseKind.UNKNOWN
    assert obj.cause.detail == "REVOKED_BY_FEDERATION"
    assert obj.alive, "an unknown answer about a started object is not taken as its end"


def test_sim_no_capacity_waits_then_runs(scheduler: SimScheduler, backend: Backend) -> None:
    """S-39: pending with the scheduler's reason while the nodes are busy."""
    wide = JobSpec(command=("sleep", "100"), resources=Resources(nodes=3))
    backend.submit("a", 1, wide, False)
    backend.submit("b", 1, wide, False)
    waiting = only(backend, "b")
    assert waiting.phase is Phase.PENDING
    assert waiting.cause is not None and waiting.cause.kind is CauseKind.NO_CAPACITY
    scheduler.advance(100)
    assert only(backend, "b").phase is Phase.RUNNING
    backend.submit("c", 1, JobSpec(command=("true",), resources=Resources(nodes=5)), False)
    scheduler.advance(10_000)
    assert only(backend, "c").cause.kind is CauseKind.NO_CAPACITY  # type: ignore[union-attr]


def test_sim_time_limit_oom_exit_and_launch_failure(
    scheduler: SimScheduler, backend: Backend
) -> None:
    limited = LONG.model_copy(update={"resources": Resources(time_limit=timedelta(seconds=5))})
    backend.submit("t", 1, limited, False)
    scheduler.plan("m", 1, sim.out_of_memory(2))
    backend.submit("m", 1, LONG, False)
    scheduler.plan("x", 1, sim.exit_with(42, 2))
    backend.submit("x", 1, LONG, False)
    scheduler.plan("l", 1, sim.launch_failure("BootFail: image not found"))
    backend.submit("l", 1, LONG, False)
    scheduler.advance(10)
    causes = {j: only(backend, j).cause for j in "tmxl"}
    assert {j: c.kind for j, c in causes.items() if c} == {
        "t": CauseKind.TIME_LIMIT,
        "m": CauseKind.OUT_OF_MEMORY,
        "x": CauseKind.NON_ZERO_EXIT,
        "l": CauseKind.LAUNCH_FAILED,
    }
    assert causes["x"] is not None and causes["x"].exit_code == 42
    assert causes["l"] is not None and causes["l"].detail == "BootFail: image not found"


def test_sim_native_requeue_makes_new_executions_within_its_count(
    scheduler: SimScheduler, backend
) -> None:  # type: ignore[no-untyped-def]
    """S-38: each native requeue is a new execution of the same object."""
    spec = LONG.model_copy(update={"options": {"requeue": "1"}})
    object_id = backend.submit("a", 1, spec, False)
    scheduler.preempt(object_id)
    obj = only(backend, "a")
    assert obj.alive and len(obj.executions) == 2
    assert obj.executions[0].cause is not None
    assert obj.executions[0].cause.kind is CauseKind.PREEMPTED
    scheduler.preempt(object_id)
    obj = only(backend, "a")
    assert obj.phase is Phase.ENDED and len(obj.executions) == 2


def test_sim_refuses_a_bad_option_and_creates_nothing(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-36: refused before anything is recorded (validate: BadInput), and refused again
    by submit as a refusal the core records (SubmitRefused), creating nothing."""
    bad = LONG.model_copy(update={"options": {"requeue": "twice"}})
    with pytest.raises(BadInput, match="requeue='twice'"):
        backend.validate(bad)
    with pytest.raises(SubmitRefused, match="requeue='twice'"):
        backend.submit("a", 1, bad, False)
    assert backend.discover(["a"]).objects == ()


def test_sim_stop_names_the_actor_and_is_idempotent(
    scheduler: SimScheduler, backend: Backend
) -> None:
    object_id = backend.submit("a", 1, LONG, False)
    backend.stop(object_id, STOP)
    backend.stop(object_id, STOP)
    backend.stop("sim-999999", STOP)
    cause = only(backend, "a").cause
    assert cause is not None and (cause.kind, cause.actor) == (CauseKind.CANCELLED, "ann")
    assert cause.detail == "cancelled by ann: no"


def test_sim_discovery_of_ten_thousand_jobs_is_one_call(scheduler: SimScheduler) -> None:
    """S-32: the supervisor benchmark's scale, counted in scheduler calls."""
    big = SimScheduler()
    backend = SimulatedBackend(big)
    ids = [f"j{n}" for n in range(10_000)]
    for job_id in ids:
        backend.dispatch_submit(job_id, 1, LONG, False)
    before = big.calls
    discovery = backend.dispatch_discover([*ids, "nobody"])
    assert big.calls - before == 1
    assert len(discovery.objects) == 10_000


def test_sim_every_change_shows_in_the_next_listing(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """Listings are cached per object; each change, listed right after, must show."""
    seen = []

    def look() -> None:
        obj = only(backend, "a")
        seen.append((obj.phase, obj.cause.kind if obj.cause else None, len(obj.executions)))

    scheduler.plan("a", 1, sim.node_loss(5, keeps_running=True))
    object_id = backend.submit("a", 1, LONG.model_copy(update={"options": {"requeue": "1"}}), True)
    look()
    scheduler.admin_hold(object_id)
    look()
    scheduler.admin_release(object_id)
    look()
    backend.open_gate(object_id)
    look()
    scheduler.advance(5)
    look()
    scheduler.preempt(object_id)
    look()
    scheduler.garble(object_id, "WEIRD")
    look()
    backend.stop(object_id, STOP)
    assert seen == [
        (Phase.GATED, None, 1),
        (Phase.HELD, CauseKind.HELD, 1),
        (Phase.GATED, None, 1),
        (Phase.RUNNING, None, 1),
        (Phase.RUNNING, CauseKind.NODE_LOST, 1),
        (Phase.RUNNING, None, 2),
        (Phase.RUNNING, CauseKind.UNKNOWN, 2),
    ]
    last = only(backend, "a").executions[-1]
    assert last.cause is not None and last.cause.kind is CauseKind.CANCELLED, (
        "the garbled answer is the object's state word; its executions still show the stop"
    )


WIDE = JobSpec(command=("sleep", "3600"), resources=Resources(nodes=2, tasks_per_node=2))


def test_sim_every_task_sees_one_launch_contract(scheduler: SimScheduler, backend: Backend) -> None:
    """S-41: one MASTER_ADDR/PORT for every task, distinct ranks, node and local ranks."""
    spec = WIDE.model_copy(update={"command": ("env",)})
    object_id = backend.submit("a", 1, spec, False)
    scheduler.advance(5)
    envs = []
    for rank in range(4):
        text = b"".join(backend.logs(object_id, LogSelection(rank=rank).of("a", 1))).decode()
        envs.append(dict(line.split("=", 1) for line in text.splitlines()))
    (obj,) = backend.discover(["a"]).of_job("a")
    assert {e["MASTER_ADDR"] for e in envs} == {obj.executions[0].nodes[0]}
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert [(e["RANK"], e["NODE_RANK"], e["LOCAL_RANK"]) for e in envs] == [
        ("0", "0", "0"),
        ("1", "0", "1"),
        ("2", "1", "0"),
        ("3", "1", "1"),
    ]
    assert {(e["WORLD_SIZE"], e["NNODES"], e["LOCAL_WORLD_SIZE"]) for e in envs} == {
        ("4", "2", "2")
    }


def test_sim_rank_failure_kills_the_others_and_is_the_root_cause(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-42: rank 3 exits 5; the others are killed in its wake and are not the cause."""
    scheduler.plan("a", 1, sim.rank_fails(3, 5, after=10))
    backend.submit("a", 1, WIDE, False)
    scheduler.advance(10)
    (obj,) = backend.discover(["a"]).of_job("a")
    assert obj.phase is Phase.RUNNING, "the others are killed a moment later, not at once"
    scheduler.advance(1)
    (obj,) = backend.discover(["a"]).of_job("a")
    cause = obj.cause
    assert obj.phase is Phase.ENDED and cause is not None
    assert (cause.kind, cause.exit_code, cause.rank) == (CauseKind.NON_ZERO_EXIT, 5, 3)
    assert cause.nodes == (obj.executions[0].nodes[1],)
    kinds = [c.kind for c in obj.executions[0].node_causes]
    assert kinds.count(CauseKind.CANCELLED) == 3, kinds


def test_sim_lost_node_is_named_and_a_resubmission_keeps_off_it(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-42, S-43: the lost node is the cause's node; excluded, it is not used again."""
    first = backend.submit("a", 1, WIDE, False)
    lost = scheduler.lose_node(first)
    (obj,) = backend.discover(["a"]).of_job("a")
    assert obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST
    assert obj.cause.nodes == (lost,) and lost in obj.cause.detail
    again = WIDE.model_copy(update={"exclude_nodes": frozenset({lost})})
    backend.submit("a", 2, WIDE, False)
    backend.submit("b", 1, again, False)
    nodes = {
        o.job_id: o.executions[0].nodes for o in backend.discover(["a", "b"]).objects if o.alive
    }
    assert lost in nodes["a"], "without exclusion the lowest free nodes are taken again"
    assert lost not in nodes["b"] and len(nodes["b"]) == 2


def test_sim_logs_are_per_submission_and_resume_from_an_offset(
    scheduler: SimScheduler, backend: Backend
) -> None:
    """S-46."""
    one = backend.submit("a", 1, JobSpec(command=("echo", "first")), False)
    two = backend.submit("a", 2, JobSpec(command=("echo", "second")), False)
    scheduler.advance(5)
    assert b"".join(backend.logs(one, LogSelection().of("a", 1))) == b"first\n"
    assert b"".join(backend.logs(two, LogSelection().of("a", 2))) == b"second\n"
    assert b"".join(backend.logs(two, LogSelection().of("a", 2, 3))) == b"ond\n"
    with pytest.raises(BadInput, match="rank 7"):
        backend.logs(one, LogSelection(rank=7).of("a", 1))


def test_sim_script_runs_by_its_own_interpreter(scheduler: SimScheduler, backend: Backend) -> None:
    """A script (JobSpec.script: the file's text) really runs, by its #! line."""
    script = "#!/usr/bin/env python3\nimport sys\nprint('py', sys.version_info[0])\nsys.exit(4)\n"
    object_id = backend.submit("a", 1, JobSpec(script=script), False)
    scheduler.advance(5)
    (obj,) = backend.discover(["a"]).of_job("a")
    assert obj.cause is not None and obj.cause.exit_code == 4
    assert b"".join(backend.logs(object_id, LogSelection().of("a", 1))) == b"py 3\n"
