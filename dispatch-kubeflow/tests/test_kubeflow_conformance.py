"""The conformance kit against the emulated cluster, as part of this package's tests (the
same suite ``dispatch-conformance kubeflow`` runs)."""

from __future__ import annotations

from dispatch_kubeflow_testing.harness import KubeflowHarness
from dispatch_testing.kit import BackendConformance


class TestKubeflowConformance(BackendConformance):
    harness_class = KubeflowHarness
