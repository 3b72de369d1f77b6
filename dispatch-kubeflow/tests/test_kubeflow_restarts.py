"""Earlier JobSet restart attempts are reported from the cluster alone (S-24, S-38, S-40):
a fresh backend (a new ``dispatch status``) and a long-lived one (the supervisor) report
the same executions for the same cluster state, over real HTTP to the emulated cluster."""

from __future__ import annotations

from collections.abc import Callable

from dispatch import CauseKind, JobSpec, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator

SPEC = JobSpec(name="restarts", command=("torchrun", "train.py"), resources=Resources(nodes=2))


def restarting(make_backend: Callable[..., KubeflowBackend]) -> KubeflowBackend:
    return make_backend(native_restart=True, runtime="restarting")


def test_fresh_and_long_lived_backends_report_the_same_executions_after_a_restart_S40(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-40: the long-lived backend saw attempt 0 fail before the JobSet restarted it and
    kept its ending on the TrainJob; a backend made after the restart reads the same."""
    emulator.add_runtime("restarting", failure_policy={"maxRestarts": 3, "rules": []})
    long_lived = restarting(make_backend)
    object_id = long_lived.dispatch_submit("job-r", 1, SPEC, False)
    name = tags.split_object_id(object_id)[1]
    emulator.reconcile()
    emulator.preempt(name, pod=1)
    # the long-lived backend polls while time passes, as the supervisor does, until it
    # sees the restart (JobSet 0.11.1 counts it at once and deletes attempt 0's Jobs)
    for _ in range(40):
        before = long_lived.dispatch_discover(["job-r"]).objects[0]
        if len(before.executions) == 2:
            break
        emulator.advance()
    assert len(before.executions) == 2
    assert before.executions[0].cause.kind is CauseKind.PREEMPTED
    emulator.settle()
    assert emulator.jobset(name)["status"]["restarts"] == 1
    assert not [
        p for p in emulator.pods(name) if p["metadata"]["labels"].get(tags.RESTART_ATTEMPT) == "0"
    ]

    after_long = long_lived.dispatch_discover(["job-r"]).objects
    after_fresh = restarting(make_backend).dispatch_discover(["job-r"]).objects
    assert after_long == after_fresh
    (view,) = after_fresh
    assert [e.index for e in view.executions] == [0, 1]
    first = view.executions[0]
    assert first.cause.kind is CauseKind.PREEMPTED and first.cause.nodes
    assert first == before.executions[0]
    assert view.executions[1].cause is None


def test_a_restart_nobody_saw_is_unknown_for_every_reader_alike_S24(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-24: when no discovery saw attempt 0's pods before the restart, every reader says
    unknown with the JobSet's words: no reader knows more than the cluster shows."""
    emulator.add_runtime("restarting", failure_policy={"maxRestarts": 3, "rules": []})
    long_lived = restarting(make_backend)
    object_id = long_lived.dispatch_submit("job-u", 1, SPEC, False)
    name = tags.split_object_id(object_id)[1]
    emulator.reconcile()
    long_lived.dispatch_discover(["job-u"])
    emulator.preempt(name, pod=0)
    emulator.settle()  # nobody looks while the victim terminates and the JobSet restarts
    long = long_lived.dispatch_discover(["job-u"]).objects
    fresh = restarting(make_backend).dispatch_discover(["job-u"]).objects
    assert long == fresh
    first = fresh[0].executions[0]
    assert first.cause.kind is CauseKind.UNKNOWN and "restart attempt 0" in first.cause.detail
