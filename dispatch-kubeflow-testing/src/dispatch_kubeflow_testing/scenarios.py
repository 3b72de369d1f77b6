"""What both Kubeflow tiers of the conformance kit share: the spec each scenario is
submitted with, and submitting it.

The offline tier (:class:`dispatch_kubeflow_testing.harness.KubeflowHarness`, the
emulated cluster) and the live tier
(:class:`dispatch_kubeflow_testing.live.harness.LiveKubeflowHarness`, the real control
plane) differ only in how they act on the object once it exists (:meth:`act`) and in a
few figures (:attr:`time_limit`, :attr:`preempt_gpus`, :attr:`image`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Set
from datetime import timedelta

from dispatch.backends import Backend
from dispatch.model.errors import SubmitRefused
from dispatch.model.spec import JobSpec, Resources
from dispatch_kubeflow import tags
from dispatch_testing.kit.harness import MULTI_NODE_SCENARIOS, Harness, Provoked, Scenario

#: the command of the ``exit-nonzero`` scenario and the code it exits with
EXIT_NONZERO = (("sh", "-c", "exit 3"), 3)
#: a runtime no cluster has: the create is refused (``launch-failed``)
MISSING_RUNTIME = "kit-no-such-runtime"
#: more GPUs per node than any node has: no pod can be scheduled (``no-capacity``)
TOO_MANY_GPUS = 16


class KubeflowScenarios(Harness):
    """A Kubeflow harness: submit each scenario's spec, then :meth:`act` on its TrainJob."""

    name = "kubeflow"
    poll_interval = 1.0
    #: one task per node: a pod is one node and Kubernetes keeps one log per container,
    #: so a rank's own output is a pod's log only with one task per node (with several,
    #: the node's tasks share it; the launcher itself is tested with several in
    #: dispatch-kubeflow/tests/test_kubeflow_launch.py)
    multi_node_shape = (2, 1)
    #: the ``time-limit`` scenario's limit
    time_limit = timedelta(minutes=5)
    #: GPUs per node the ``preempted`` scenario asks for (None: the tier preempts any pod)
    preempt_gpus: int | None = None
    #: the container image of the long job (None: the runtime's)
    image: str | None = None

    def long_spec(self) -> JobSpec:
        return JobSpec(
            name="kit-long",
            command=("torchrun", "train.py"),
            resources=Resources(nodes=2),
            options={"image": self.image} if self.image else {},
        )

    def quick_spec(self) -> JobSpec:
        return JobSpec(name="kit-quick", command=("true",), resources=Resources(nodes=2))

    def scenarios(self) -> Set[Scenario]:
        return frozenset(
            {
                Scenario.SUCCESS,
                Scenario.EXIT_NONZERO,
                Scenario.SIGNAL,
                Scenario.TIME_LIMIT,
                Scenario.PREEMPTED,
                Scenario.NODE_LOST,
                Scenario.OUT_OF_MEMORY,
                Scenario.LAUNCH_FAILED,
                Scenario.NO_CAPACITY,
                Scenario.HELD_BY_SCHEDULER,
                Scenario.NODE_LOST_OF_N,
                Scenario.RANK_FAILED,
            }
        )

    def not_provokable(self) -> Mapping[Scenario, str]:
        return {
            Scenario.CANCELLED_BY_SCHEDULER: (
                "Kubernetes records no cancel: a TrainJob deleted by someone other than "
                "dispatch is reported unknown ('deletion without a recorded stop', "
                "docs/mapping.md); only dispatch's own stop ends an object cancelled"
            ),
        }

    def scenario_spec(self, scenario: Scenario) -> tuple[JobSpec, int | None]:
        """The spec ``scenario`` is submitted with, and the exit code it makes (if any)."""
        spec = self.multi_node_spec() if scenario in MULTI_NODE_SCENARIOS else self.long_spec()
        resources = spec.resources
        exit_code: int | None = None
        if scenario is Scenario.SUCCESS:
            spec = self.quick_spec()
        elif scenario is Scenario.EXIT_NONZERO:
            command, exit_code = EXIT_NONZERO
            spec = spec.model_copy(update={"command": command})
        elif scenario is Scenario.TIME_LIMIT:
            resources = resources.model_copy(update={"time_limit": self.time_limit})
        elif scenario is Scenario.NO_CAPACITY:
            resources = resources.model_copy(update={"gpus_per_node": TOO_MANY_GPUS})
        elif scenario is Scenario.PREEMPTED and self.preempt_gpus is not None:
            resources = resources.model_copy(update={"gpus_per_node": self.preempt_gpus})
        elif scenario is Scenario.LAUNCH_FAILED:
            spec = spec.model_copy(update={"options": {"runtime": MISSING_RUNTIME}})
        return spec.model_copy(update={"resources": resources}), exit_code

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        spec, exit_code = self.scenario_spec(scenario)
        try:
            object_id = backend.submit(job_id, 1, spec, False)
        except SubmitRefused as exc:
            if scenario is Scenario.LAUNCH_FAILED:
                return Provoked(object_id=None, refused=exc)
            raise
        return self.act(scenario, object_id, tags.split_object_id(object_id)[1], exit_code)

    @abstractmethod
    def act(self, scenario: Scenario, object_id: str, name: str, exit_code: int | None) -> Provoked:
        """Provoke ``scenario`` on the TrainJob ``name`` just submitted (``object_id``);
        ``exit_code`` is what its spec makes it exit with, if anything."""
