"""Each ending provoked for real on Slurm 22.05 and classified by the adapter (S-2, S-4, S-19).

All scenarios are submitted at once by one module fixture, so the whole module waits about
as long as its slowest ending (the one-minute time limit).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from dispatch import CauseKind, Phase, Provenance
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.version import release
from dispatch_slurm_testing.cluster import cgroup_memory
from dispatch_slurm_testing.provoke import CannotProvoke, Provocation, Provoker, wait_for

pytestmark = pytest.mark.live(server="slurm")

SCENARIOS = (
    "success",
    "exit_nonzero",
    "exit_137",
    "signal",
    "oom_batch",
    "oom_step",
    "launch_failed",
    "refused",
    "no_capacity",
    "unmappable",
    "held_by_scheduler",
    "cancelled",
    "time_limit",
)


@pytest.fixture(scope="module")
def provoked(slurm_cluster: str) -> Iterator[tuple[SlurmBackend, dict[str, Provocation | str]]]:
    backend = SlurmBackend()
    workdir = tempfile.mkdtemp(prefix="dispatch-slurm-endings-", dir="/var/tmp")
    provoker = Provoker(backend.dispatch_submit, workdir)
    run = uuid.uuid4().hex[:8]
    made: dict[str, Provocation | str] = {}
    for name in SCENARIOS:
        job_id = f"live-{run}-{name}"
        try:
            if name == "oom_batch":
                made[name] = provoker.out_of_memory(job_id)
            elif name == "oom_step":
                made[name] = provoker.out_of_memory(job_id, in_step=True)
            else:
                made[name] = getattr(provoker, name)(job_id)
        except CannotProvoke as exc:
            made[name] = str(exc)
    yield backend, made
    provoker.cleanup(
        [p.object_id for p in made.values() if isinstance(p, Provocation) and p.object_id]
    )
    provoker.cleanup([h for p in made.values() if isinstance(p, Provocation) for h in p.helpers])
    shutil.rmtree(workdir, ignore_errors=True)


def _settled(backend: SlurmBackend, p: Provocation, phases: set[Phase], timeout: float = 120):
    return wait_for(
        backend.dispatch_discover,
        [p.job_id],
        lambda seen: (
            p.job_id in seen
            and seen[p.job_id].phase in phases
            and seen[p.job_id].cause is not None
            and seen[p.job_id].cause.kind is p.expect
        ),
        timeout=timeout,
    )[p.job_id]


def _get(provoked, name: str) -> tuple[SlurmBackend, Provocation]:
    backend, made = provoked
    p = made[name]
    if isinstance(p, str):
        pytest.fail(f"could not provoke {name}: {p}")
    return backend, p


def test_success_is_none_from_the_application_S2(provoked) -> None:
    backend, p = _get(provoked, "success")
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.object_id == p.object_id and obj.submission == 1
    assert obj.cause.provenance is Provenance.APPLICATION
    assert obj.executions[-1].cause == obj.cause


def test_exit_1_is_non_zero_exit_with_its_code_S2(provoked) -> None:
    backend, p = _get(provoked, "exit_nonzero")
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.cause.exit_code == p.exit_code == 3
    assert obj.cause.provenance is Provenance.APPLICATION
    assert "NonZeroExitCode" in obj.cause.detail


def test_exit_137_keeps_137_not_sacct_9_S2(provoked) -> None:
    backend, p = _get(provoked, "exit_137")
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.cause.exit_code == 137


def test_batch_script_killed_by_sigkill_is_exit_137_not_launch_failure_S4(provoked) -> None:
    backend, p = _get(provoked, "signal")
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.cause.exit_code == 137
    # the reason Slurm gives: FAIL_LAUNCH up to 22.05, FAIL_SIGNAL from 23.02
    reason = "JobLaunchFailure" if backend.version() < release("23.02") else "RaisedSignal:9"
    assert reason in obj.cause.detail and "0:9" in obj.cause.detail


@pytest.mark.parametrize("name", ["oom_batch", "oom_step"])
def test_out_of_memory_in_batch_and_in_srun_step_S2(provoked, name: str) -> None:
    usable, why = cgroup_memory()
    if not usable:
        # not provokable here: the start script said why; the test says so and fails
        pytest.fail(f"OUT_OF_MEMORY cannot be provoked on this machine: {why}")
    backend, p = _get(provoked, name)
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.cause.provenance is Provenance.SCHEDULER
    if name == "oom_step":
        assert "DerivedExitCode=0:125" in obj.cause.detail
    else:
        assert "OUT_OF_MEMORY" in obj.cause.detail


def test_accepted_then_unable_to_start_is_launch_failed_S2(provoked) -> None:
    backend, p = _get(provoked, "launch_failed")
    obj = _settled(backend, p, {Phase.ENDED})
    # signal 53 either way (22.05's raw wait status reads 15:53, 26.05 prints 0:53); the
    # reason is JobLaunchFailure up to 22.05, RaisedSignal:53 from 23.02
    reason = "JobLaunchFailure" if backend.version() < release("23.02") else "RaisedSignal:53"
    assert reason in obj.cause.detail and ":53" in obj.cause.detail


def test_refused_submission_raises_submit_refused_with_sbatch_words_verbatim_S2(provoked) -> None:
    backend, p = _get(provoked, "refused")
    assert p.refused is not None
    assert "Requested node configuration is not available" in p.refused.detail
    assert p.refused.detail.startswith("sbatch: error:")
    # the record sbatch leaves behind (FAILED/BadConstraints) is tagged and reads launch-failed
    seen = wait_for(backend.dispatch_discover, [p.job_id], lambda s: p.job_id in s, timeout=30)
    leftover = seen[p.job_id]
    assert leftover.phase is Phase.ENDED and leftover.cause.kind is CauseKind.LAUNCH_FAILED
    assert leftover.executions == ()


def test_pending_on_partition_config_is_no_capacity_S39(provoked) -> None:
    backend, p = _get(provoked, "no_capacity")
    obj = _settled(backend, p, {Phase.PENDING}, timeout=30)
    assert "PartitionConfig" in obj.cause.detail
    assert backend.dispatch_declare().pending_windows[CauseKind.NO_CAPACITY].total_seconds() > 0


def test_dependency_never_satisfied_is_unknown_verbatim_S4(provoked) -> None:
    backend, p = _get(provoked, "unmappable")
    obj = _settled(backend, p, {Phase.PENDING}, timeout=30)
    assert p.raw in obj.cause.detail
    assert obj.cause.provenance is Provenance.SCHEDULER


def test_admin_hold_is_held_by_the_scheduler_not_a_gate_S37(provoked) -> None:
    backend, p = _get(provoked, "held_by_scheduler")
    obj = _settled(backend, p, {Phase.HELD}, timeout=30)
    assert "JobHeldAdmin" in obj.cause.detail


def test_scancel_by_someone_else_is_cancelled_with_the_actor_S2(provoked) -> None:
    backend, p = _get(provoked, "cancelled")
    obj = _settled(backend, p, {Phase.ENDED})
    assert obj.cause.provenance is Provenance.ACTOR
    assert len(obj.executions) == 1 and obj.executions[0].cause.kind is CauseKind.CANCELLED


def test_time_limit_is_time_limit_from_the_scheduler_S2(provoked) -> None:
    backend, p = _get(provoked, "time_limit")
    obj = _settled(backend, p, {Phase.ENDED}, timeout=150)
    assert "TIMEOUT" in obj.cause.detail
    assert obj.cause.at is not None
