"""The emulated API server keeps the promises the adapter's tests rely on, checked with the
official client over HTTP: server-side label selectors, the status subresource kept
apart, 404/409 Status bodies, Foreground deletion held by a pod on a lost node, going
away and coming back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.selectors import SelectorError, parse
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

G, V = "trainer.kubeflow.org", "v1alpha1"


@pytest.fixture
def api(emulator: Emulator, kubeconfig: Path) -> Iterator[client.ApiClient]:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    with client.ApiClient(configuration) as api_client:
        yield api_client


def trainjob(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}, **spec},
    }


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=a", ["t1", "t2"]),
        ("team!=a", ["t3", "t4"]),
        ("team in (a,b)", ["t1", "t2", "t3"]),
        ("team notin (a)", ["t3", "t4"]),
        ("team", ["t1", "t2", "t3"]),
        ("!team", ["t4"]),
        ("team=a,tier in (gold)", ["t2"]),
    ],
)
def test_label_selectors_are_applied_by_the_server(
    api: client.ApiClient, selector: str, expected: list[str]
) -> None:
    custom = client.CustomObjectsApi(api)
    for name, labels in [
        ("t1", {"team": "a"}),
        ("t2", {"team": "a", "tier": "gold"}),
        ("t3", {"team": "b"}),
        ("t4", {}),
    ]:
        custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob(name, labels))
    found = custom.list_namespaced_custom_object(
        G, V, "default", "trainjobs", label_selector=selector
    )
    assert [item["metadata"]["name"] for item in found["items"]] == expected


def test_a_malformed_selector_is_refused() -> None:
    with pytest.raises(SelectorError):
        parse("team in a,b")


def test_status_is_a_subresource(api: client.ApiClient, emulator: Emulator) -> None:
    """A main-resource patch cannot write status; the status subresource can."""
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    fake = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    custom.patch_namespaced_custom_object(G, V, "default", "trainjobs", "t1", fake)
    conditions = emulator.trainjob("t1")["status"].get("conditions", [])
    assert all(c["type"] != "Complete" for c in conditions)
    custom.patch_namespaced_custom_object_status(G, V, "default", "trainjobs", "t1", fake)
    assert emulator.trainjob("t1")["status"]["conditions"] == fake["status"]["conditions"]


def test_missing_and_duplicate_objects_answer_404_and_409(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(G, V, "default", "trainjobs", "nope")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["reason"] == "NotFound"
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    with pytest.raises(ApiException) as twice:
        custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    assert twice.value.status == 409
    assert "already exists" in json.loads(twice.value.body)["message"]


def test_unknown_fields_are_pruned_unless_validation_is_strict(
    api: client.ApiClient, emulator: Emulator
) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        G, V, "default", "trainjobs", trainjob("t1", colour="blue")
    )
    assert "colour" not in emulator.trainjob("t1")["spec"]
    with pytest.raises(ApiException) as strict:
        custom.create_namespaced_custom_object(
            G, V, "default", "trainjobs", trainjob("t2", colour="blue"), field_validation="Strict"
        )
    assert strict.value.status == 400
    assert 'unknown field "spec.colour"' in json.loads(strict.value.body)["message"]


def test_foreground_deletion_waits_for_a_pod_stuck_on_a_lost_node(
    api: client.ApiClient, emulator: Emulator
) -> None:
    """Foreground keeps the owner until its dependents are gone; a pod on a NotReady node
    stays Terminating until force-deleted."""
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    emulator.lose_node("t1", pod=0)
    custom.delete_namespaced_custom_object(
        G,
        V,
        "default",
        "trainjobs",
        "t1",
        body=client.V1DeleteOptions(propagation_policy="Foreground"),
    )
    emulator.settle()
    held = emulator.trainjob("t1")
    assert "deletionTimestamp" in held["metadata"]
    (stuck,) = emulator.pods("t1")
    assert "deletionTimestamp" in stuck["metadata"]
    core.delete_namespaced_pod(stuck["metadata"]["name"], "default", grace_period_seconds=0)
    emulator.settle()
    assert emulator.names() == [] and emulator.pods("t1") == []


def test_background_deletion_removes_the_owner_then_its_dependents(
    api: client.ApiClient, emulator: Emulator
) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    assert len(emulator.pods("t1")) == 2
    custom.delete_namespaced_custom_object(
        G,
        V,
        "default",
        "trainjobs",
        "t1",
        body=client.V1DeleteOptions(propagation_policy="Background"),
    )
    assert emulator.names() == []
    emulator.settle()
    assert emulator.pods("t1") == []


def test_a_patch_of_annotations_or_owner_references_lets_no_time_pass(
    api: client.ApiClient, emulator: Emulator
) -> None:
    """No controller acts on annotations or owner references, so a client writing them
    (a reader's bookkeeping, a submit owning its runtime copy) runs no controller step: a
    preempted pod stays terminating, as on a real cluster for its grace period, until
    time passes; any other write is a step."""
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    emulator.settle()
    emulator.preempt("t1", pod=1)
    step = emulator.cluster.step
    owner = {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "name": "t1", "uid": "u-1"}
    for body in (
        {"metadata": {"annotations": {"seen": "yes"}}},
        {"metadata": {"ownerReferences": [owner]}},
        {"metadata": {"annotations": {"seen": "again"}, "ownerReferences": [owner]}},
    ):
        custom.patch_namespaced_custom_object(G, V, "default", "trainjobs", "t1", body)
    assert emulator.cluster.step == step
    (victim,) = [p for p in emulator.pods("t1") if "deletionTimestamp" in p["metadata"]]
    assert victim["status"]["phase"] == "Running"
    custom.patch_namespaced_custom_object(
        G, V, "default", "trainjobs", "t1", {"metadata": {"labels": {"team": "a"}}}
    )
    assert emulator.cluster.step == step + 1


def test_going_away_refuses_connections_and_coming_back_keeps_the_objects(
    api: client.ApiClient, emulator: Emulator
) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(G, V, "default", "trainjobs", trainjob("t1"))
    emulator.go_unreachable()
    with pytest.raises(Exception) as down:
        custom.get_namespaced_custom_object(
            G, V, "default", "trainjobs", "t1", _request_timeout=(1, 1)
        )
    assert not isinstance(down.value, ApiException)
    emulator.come_back()
    assert custom.get_namespaced_custom_object(G, V, "default", "trainjobs", "t1")["metadata"][
        "uid"
    ]


# -- what the torch runtime, the scheduler and the kubelet do for multi-node jobs ------


def test_the_torch_plugin_gives_each_node_pod_the_pet_variables(
    api: client.ApiClient, emulator: Emulator
) -> None:
    """As Trainer 2.2's torch.go: PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK from the
    completion index (downward API), PET_MASTER_ADDR node 0's headless name, port 29500."""
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        G, V, "default", "trainjobs", trainjob("t1", trainer={"numNodes": 2, "numProcPerNode": 3})
    )
    emulator.reconcile()
    pods = emulator.pods("t1")
    assert len(pods) == 2
    env = {e["name"]: e for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env["PET_NNODES"]["value"] == "2" and env["PET_NPROC_PER_NODE"]["value"] == "3"
    assert env["PET_MASTER_ADDR"]["value"] == "t1-node-0-0.t1"
    assert env["PET_MASTER_PORT"]["value"] == "29500"
    assert "job-completion-index" in env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods} == {
        "0",
        "1",
    }


def test_the_webhook_refuses_reserved_torch_variables(api: client.ApiClient) -> None:
    body = trainjob("t1", trainer={"numNodes": 1, "env": [{"name": "PET_NNODES", "value": "4"}]})
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            G, V, "default", "trainjobs", body
        )
    assert err.value.status == 422
    assert "must not have reserved envs" in json.loads(err.value.body)["message"]


def test_required_node_affinity_keeps_pods_off_nodes(
    api: client.ApiClient, emulator: Emulator
) -> None:
    avoid = [n["metadata"]["name"] for n in emulator.nodes()][:3]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": avoid}
                        ]
                    }
                ]
            }
        }
    }
    patch = {
        "manager": "test",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"affinity": affinity}}}},
                        }
                    ]
                }
            }
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        G, V, "default", "trainjobs", trainjob("t1", runtimePatches=[patch])
    )
    emulator.reconcile()
    assert {p["spec"]["nodeName"] for p in emulator.pods("t1")}.isdisjoint(avoid)


def test_pod_logs_are_served_as_text_with_the_previous_run(
    api: client.ApiClient, emulator: Emulator
) -> None:
    """``read_namespaced_pod_log``: the current run, ``previous=True`` the one before the
    container's last restart, 400 when there is none."""
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        G, V, "default", "trainjobs", trainjob("t1")
    )
    emulator.reconcile()
    pod = emulator.pods("t1")[0]["metadata"]["name"]
    core = client.CoreV1Api(api)
    emulator.print_log("t1", "first run\n", pod=0)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod, "default", container="node", previous=True)
    assert err.value.status == 400
    emulator.oom("t1", pod=0, restart_policy="OnFailure")
    emulator.advance()
    emulator.print_log("t1", "second run\n", pod=0)
    assert core.read_namespaced_pod_log(pod, "default", container="node") == "second run\n"
    previous = core.read_namespaced_pod_log(pod, "default", container="node", previous=True)
    assert previous == "first run\n"
    assert core.read_namespaced_pod_log(pod, "default", container="node", tail_lines=0) == ""


def test_harmless_commands_run_for_real_and_print_to_the_log(
    api: client.ApiClient, emulator: Emulator
) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        G,
        V,
        "default",
        "trainjobs",
        trainjob("t1", trainer={"numNodes": 2, "command": ["echo", "hello from the node"]}),
    )
    emulator.reconcile()
    emulator.reconcile()
    core = client.CoreV1Api(api)
    for pod in emulator.pods("t1"):
        assert pod["status"]["phase"] == "Succeeded"
        log = core.read_namespaced_pod_log(pod["metadata"]["name"], "default", container="node")
        assert log == "hello from the node\n"
