"""What install.py gives the live plane's Kueue, checked without a cluster: which of
Kueue's webhooks are registered, and the queues an administrator would create."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]
from dispatch_kubeflow_testing.live.install import (
    KUEUE_COHORT,
    KUEUE_GPUS,
    conversion_patches,
    install_base,
    kueue_setup,
    kueue_webhook,
)
from dispatch_kubeflow_testing.live.kubeapi import KubeApi


def _hook(path: str) -> dict[str, object]:
    return {"clientConfig": {"service": {"name": "webhook-service", "path": path}}}


def test_only_kueue_objects_and_the_trainjob_integration_have_webhooks() -> None:
    """An integration that is off serves no handler: registering its webhook would make
    the API server refuse every Pod, Job or JobSet it names."""
    kept = [
        "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
    ]
    dropped = [
        "/mutate--v1-pod",
        "/mutate-batch-v1-job",
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "/validate-kubeflow-org-v1-pytorchjob",
    ]
    assert [p for p in kept + dropped if kueue_webhook(_hook(p))] == kept


def test_the_queues_force_preemption_in_a_cluster_queue_and_reclamation_in_the_cohort() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kueue_setup()}
    gpu = {}
    for name in ("team-a", "team-b"):
        spec = objects[("ClusterQueue", name)]["spec"]
        assert spec["cohortName"] == KUEUE_COHORT
        assert spec["preemption"] == {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
        }
        (group,) = spec["resourceGroups"]
        assert "nvidia.com/gpu" in group["coveredResources"]
        (flavor,) = group["flavors"]
        (gpu[name],) = [r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"]
        assert gpu[name]["nominalQuota"] == KUEUE_GPUS
        local = objects[("LocalQueue", name)]
        assert (local["metadata"]["namespace"], local["spec"]["clusterQueue"]) == ("default", name)
    assert gpu["team-a"]["borrowingLimit"] == 0 and "borrowingLimit" not in gpu["team-b"]
    values = {n: o["value"] for (k, n), o in objects.items() if k == "WorkloadPriorityClass"}
    assert values["low"] < values["high"]


def test_conversion_patches_are_the_ones_the_kustomization_applies(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    for name in ("webhook_in_workloads", "webhook_in_resourceflavors", "cainjection_in_x"):
        (tmp_path / "patches" / f"{name}.yaml").write_text(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            f"metadata:\n  name: {name}\n"
        )
    (tmp_path / "kustomization.yaml").write_text(
        "patches:\n- path: patches/webhook_in_workloads.yaml\n"
        "- path: patches/cainjection_in_x.yaml\n"
    )
    assert [d["metadata"]["name"] for d in conversion_patches(tmp_path)] == ["webhook_in_workloads"]


class _FreshApi:
    """An API server that has just accepted a CRD: its status says nothing yet
    (``conditions: null``), then Established."""

    def __init__(self) -> None:
        self.gets = 0
        self.applied: list[str] = []

    def apply(self, obj: dict[str, object]) -> dict[str, object]:
        self.applied.append(str(obj["kind"]))
        return obj

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, object]:
        self.gets += 1
        if self.gets == 1:
            return {"status": {"conditions": None}}
        return {"status": {"conditions": [{"type": "Established", "status": "True"}]}}

    def wait(self, what: str, check: Any, timeout: float = 60.0) -> Any:
        return KubeApi.wait(self, what, check, timeout=timeout, interval=0.01)  # type: ignore[arg-type]


def test_a_crd_whose_status_has_no_conditions_yet_is_waited_for(tmp_path: Path) -> None:
    """A fresh API server answers a CRD it has just accepted with ``conditions: null``:
    the installer waits for Established (it failed the first start of a new run dir)."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.dev"},
    }
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    api = _FreshApi()
    install_base(api, [tmp_path], nodes=0)  # type: ignore[arg-type]
    assert api.gets == 2
    assert api.applied[0] == "CustomResourceDefinition"
