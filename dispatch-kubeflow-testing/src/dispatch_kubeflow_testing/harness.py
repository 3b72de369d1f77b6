"""The conformance-kit harness for ``kubeflow``: the emulated Trainer cluster, provoked
through its scenario driver (``dispatch-conformance kubeflow``).

Loaded only by the kit (entry point ``dispatch.harnesses: kubeflow``), so it may import
``dispatch_testing``. The offline tier starts the emulator on loopback and points the
backend at it with a real kubeconfig; the client does real HTTP. The live tier
(``--live``) is :class:`dispatch_kubeflow_testing.live.harness.LiveKubeflowHarness`, on a
real kube-apiserver with JobSet and the Trainer: asking this class for it hands it over.
Both submit each scenario's spec the same way
(:class:`dispatch_kubeflow_testing.scenarios.KubeflowScenarios`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Set
from contextlib import contextmanager
from pathlib import Path

from dispatch.backends import Backend
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_testing.kit.harness import MULTI_NODE_SCENARIOS, NotProvokable, Provoked, Scenario

from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.scenarios import KubeflowScenarios

UNMAPPABLE = ("QuotaWizardRejected", "the quota wizard rejected this TrainJob at 03:14")


class KubeflowHarness(KubeflowScenarios):
    timeout = 30.0

    def __new__(cls, live: bool = False) -> KubeflowHarness:
        """The entry point names this class for both tiers; the live one is its own."""
        if live and cls is KubeflowHarness:
            from dispatch_kubeflow_testing.live.harness import LiveKubeflowHarness

            return LiveKubeflowHarness(live=True)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self.emulator: Emulator | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="dispatch-kubeflow-kit-"))
        self._lost: list[str] = []

    @property
    def emu(self) -> Emulator:
        if self.emulator is None:
            raise NotProvokable("the emulated cluster is not started (plugin() was not called)")
        return self.emulator

    def plugin(self) -> object:
        self.emulator = Emulator().start()
        kubeconfig = self.emulator.write_kubeconfig(self._dir / "kubeconfig")
        return KubeflowBackend(
            KubeflowConfig(
                kubeconfig=str(kubeconfig), retries=1, connect_timeout=2.0, read_timeout=10.0
            )
        )

    def close(self) -> None:
        if self.emulator is not None:
            self.emulator.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def wait(self, seconds: float) -> None:
        """The emulated controllers take one reconcile step; nothing sleeps."""
        self.emu.reconcile()

    def calls(self) -> int:
        return len(self.emu.log.entries)

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        self.emu.go_unreachable()
        try:
            yield
        finally:
            self.emu.come_back()

    def scenarios(self) -> Set[Scenario]:
        return frozenset({*super().scenarios(), Scenario.UNMAPPABLE})

    def restore_nodes(self, nodes: Set[str]) -> None:
        for node in nodes:
            self.emu.recover_node(node)
            if node in self._lost:
                self._lost.remove(node)

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        """Nodes an earlier scenario lost come back first, so the new pods have room."""
        emu = self.emu
        for node in self._lost:
            emu.recover_node(node)
        self._lost.clear()
        return super().provoke(scenario, backend, job_id)

    def act(self, scenario: Scenario, object_id: str, name: str, exit_code: int | None) -> Provoked:
        emu = self.emu
        raw: str | None = None
        if scenario in MULTI_NODE_SCENARIOS:
            # node rank 1 of 2: not the master's node, the stronger test
            emu.reconcile()
            node = emu.pods(name)[1]["spec"]["nodeName"]
            if scenario is Scenario.NODE_LOST_OF_N:
                self._lost.append(emu.lose_node(name, pod=1))
                return Provoked(object_id=object_id, timeout=self.timeout, nodes=(node,), rank=1)
            emu.exit(name, 3, pod=1)
            return Provoked(
                object_id=object_id, timeout=self.timeout, exit_code=3, nodes=(node,), rank=1
            )
        if scenario is Scenario.SIGNAL:
            emu.exit(name, 137)
            exit_code = 137
        elif scenario is Scenario.TIME_LIMIT:
            emu.expire_deadline(name)
        elif scenario is Scenario.PREEMPTED:
            emu.preempt(name)
        elif scenario is Scenario.NODE_LOST:
            self._lost.append(emu.lose_node(name))
        elif scenario is Scenario.OUT_OF_MEMORY:
            emu.oom(name, pod=1)
        elif scenario is Scenario.HELD_BY_SCHEDULER:
            emu.suspend_behind_back(name)
        elif scenario is Scenario.UNMAPPABLE:
            emu.fail_unmappable(name, *UNMAPPABLE)
            raw = f"{UNMAPPABLE[0]}: {UNMAPPABLE[1]}"
        return Provoked(object_id=object_id, timeout=self.timeout, exit_code=exit_code, raw=raw)
