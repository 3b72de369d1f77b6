"""Multi-node endings attributed (S-42) and bad nodes kept off (S-43), through the
emulated cluster over real HTTP: a node lost out of four, a rank failing while the Job
kills the others in its wake, an OOM on one node."""

from __future__ import annotations

from dispatch import Capability, CauseKind, JobSpec, Phase, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.evidence import COMPLETION_INDEX
from dispatch_kubeflow_testing.emulator import Emulator

FOUR = JobSpec(name="four", command=("torchrun", "train.py"), resources=Resources(nodes=4))


def start(backend: KubeflowBackend, emulator: Emulator, spec: JobSpec = FOUR) -> str:
    object_id = backend.dispatch_submit(job_id="job-m", submission=1, spec=spec, gated=False)
    emulator.reconcile()
    return tags.split_object_id(object_id)[1]


def view(backend: KubeflowBackend):  # type: ignore[no-untyped-def]
    (obj,) = backend.dispatch_discover(["job-m"]).objects
    return obj


def node_of(emulator: Emulator, name: str, index: int) -> str:
    node: str = emulator.pods(name)[index]["spec"]["nodeName"]
    return node


def test_a_node_lost_out_of_four_names_that_node_and_its_rank_S42(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-42: the cause is node-lost naming exactly the lost node (and its node rank),
    not the nodes of the ranks killed in its wake; the execution lists all four nodes."""
    name = start(backend, emulator)
    before = view(backend)
    assert before.phase is Phase.RUNNING and len(before.executions[-1].nodes) == 4
    lost = emulator.lose_node(name, pod=2)
    obj = view(backend)
    assert obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST
    assert obj.cause.nodes == (lost,) and obj.cause.rank == 2
    assert len(obj.executions[-1].nodes) == 4


def test_a_failing_rank_is_the_cause_not_those_killed_after_it_S42(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-42: rank 2 exits 3, the Job deletes the other three (they end 143 and go, as on
    the real controllers, docs/controllers.md F-3): the ending is rank 2's non-zero-exit
    3 on its node, not the 143s; only rank 2's Failed pod is left to show it."""
    name = start(backend, emulator)
    failed_on = node_of(emulator, name, 2)
    emulator.exit(name, 3, pod=2)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause is not None
    assert (obj.cause.kind, obj.cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)
    assert obj.cause.nodes == (failed_on,) and obj.cause.rank == 2
    left = emulator.pods(name)
    assert [p["metadata"]["labels"][COMPLETION_INDEX] for p in left] == ["2"]


def test_an_oom_on_one_node_is_out_of_memory_on_that_node_S42(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-42: one rank OOM-killed, the others killed in its wake: out-of-memory, that node."""
    name = start(backend, emulator)
    oom_on = node_of(emulator, name, 1)
    emulator.oom(name, pod=1)
    emulator.settle()
    obj = view(backend)
    assert obj.cause is not None and obj.cause.kind is CauseKind.OUT_OF_MEMORY
    assert obj.cause.nodes == (oom_on,) and obj.cause.rank == 1


def test_with_several_tasks_per_node_the_cause_names_the_node_not_a_guessed_rank_S42(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-42: a pod holding two tasks cannot say which of them failed: the node is named,
    the rank left empty rather than guessed."""
    spec = FOUR.model_copy(update={"resources": Resources(nodes=2, tasks_per_node=2)})
    name = start(backend, emulator, spec)
    failed_on = node_of(emulator, name, 1)
    emulator.exit(name, 3, pod=1)
    emulator.settle()
    obj = view(backend)
    assert obj.cause is not None and obj.cause.nodes == (failed_on,) and obj.cause.rank is None


def test_excluded_nodes_are_kept_off_by_node_affinity_S43(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-43: a submission excluding two of four nodes runs only on the other two; the
    TrainJob carries the exclusion as a required NotIn node affinity."""
    assert Capability.EXCLUDE_NODES in backend.dispatch_declare().capabilities
    all_nodes = sorted(n["metadata"]["name"] for n in emulator.nodes())
    avoid = frozenset(all_nodes[:2])
    name = start(backend, emulator, FOUR.model_copy(update={"exclude_nodes": avoid}))
    obj = view(backend)
    assert obj.phase is Phase.RUNNING
    assert set(obj.executions[-1].nodes) == set(all_nodes[2:])
    patch = emulator.trainjob(name)["spec"]["runtimePatches"][0]
    pod_spec = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]
    term = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": sorted(avoid)}
    ]


def test_excluding_every_node_leaves_it_pending_no_capacity_S43(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-43: nothing left to run on is the scheduler's Unschedulable: pending no-capacity,
    never a silent run on an excluded node."""
    every = frozenset(n["metadata"]["name"] for n in emulator.nodes())
    start(backend, emulator, FOUR.model_copy(update={"exclude_nodes": every}))
    obj = view(backend)
    assert obj.phase is Phase.PENDING and obj.cause is not None
    assert obj.cause.kind is CauseKind.NO_CAPACITY and "node affinity" in obj.cause.detail


def test_trainer_2_1_carries_the_exclusion_in_its_pod_template_override_S43(
    make_backend,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """S-43: before runtimePatches (Trainer 2.1) the affinity rides podTemplateOverrides."""
    emu = Emulator(trainer_version="2.1").start()
    try:
        backend = make_backend(
            kubeconfig=str(emu.write_kubeconfig(tmp_path / "kc21")), trainer_version=(2, 1)
        )
        avoid = frozenset({sorted(n["metadata"]["name"] for n in emu.nodes())[0]})
        name = start(backend, emu, FOUR.model_copy(update={"exclude_nodes": avoid}))
        override = emu.trainjob(name)["spec"]["podTemplateOverrides"][0]
        assert "affinity" in override["spec"]
        assert not set(view(backend).executions[-1].nodes) & avoid
    finally:
        emu.stop()
