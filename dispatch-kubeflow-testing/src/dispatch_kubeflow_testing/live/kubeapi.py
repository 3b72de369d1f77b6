"""A small HTTPS client for the Kubernetes API, stdlib only, read from a kubeconfig with
client certificates (what ``start-kube.sh`` writes).

It exists so the installer runs from the start script with nothing but PyYAML, and so the
live driver's own calls stay apart from the adapter's ``kubernetes`` client under test.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import yaml  # type: ignore[import-untyped]

Obj = dict[str, Any]


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        self.status = status
        try:
            self.reason = str(json.loads(body).get("reason", ""))
            message = str(json.loads(body).get("message", body))
        except ValueError:
            self.reason, message = "", body
        super().__init__(f"{method} {path}: {status} {message}")


#: kind -> (API path prefix, plural, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "CustomResourceDefinition": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        False,
    ),
    "ClusterTrainingRuntime": (
        "/apis/trainer.kubeflow.org/v1alpha1",
        "clustertrainingruntimes",
        False,
    ),
    "TrainingRuntime": ("/apis/trainer.kubeflow.org/v1alpha1", "trainingruntimes", True),
    "TrainJob": ("/apis/trainer.kubeflow.org/v1alpha1", "trainjobs", True),
    "JobSet": ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Pod": ("/api/v1", "pods", True),
    "Node": ("/api/v1", "nodes", False),
    "Event": ("/api/v1", "events", True),
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "WorkloadPriorityClass": ("/apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", False),
    "Workload": ("/apis/kueue.x-k8s.io/v1beta2", "workloads", True),
}


@dataclass
class KubeApi:
    host: str
    port: int
    context: ssl.SSLContext
    timeout: float = 10.0

    @classmethod
    def from_kubeconfig(cls, path: str | Path, timeout: float = 10.0) -> KubeApi:
        config = yaml.safe_load(Path(path).read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        url = urlsplit(cluster["server"])
        context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        context.load_cert_chain(user["client-certificate"], user["client-key"])
        return cls(url.hostname or "127.0.0.1", url.port or 443, context, timeout)

    def path(self, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        prefix, plural, namespaced = RESOURCES[kind]
        out = prefix
        if namespaced:
            out += f"/namespaces/{namespace or 'default'}"
        out += f"/{plural}"
        if name:
            out += f"/{name}"
        return out

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> Obj:
        if query:
            path = f"{path}?{urlencode(query)}"
        conn = http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=self.timeout
        )
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if response.status >= 400:
            raise ApiError(response.status, method, path, text)
        return json.loads(text) if text else {}

    # -- conveniences ---------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.request("GET", self.path(kind, namespace, name))

    def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[Obj]:
        query = {"labelSelector": selector} if selector else None
        items: list[Obj] = (
            self.request("GET", self.path(kind, namespace), query=query).get("items") or []
        )
        return items

    def create(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        return self.request("POST", self.path(obj["kind"], meta.get("namespace")), obj)

    def merge_patch(
        self, kind: str, name: str, patch: Obj, namespace: str | None = None, subresource: str = ""
    ) -> Obj:
        path = self.path(kind, namespace, name) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(
        self, kind: str, name: str, namespace: str | None = None, *, propagation: str | None = None
    ) -> Obj:
        body = {"propagationPolicy": propagation} if propagation else None
        return self.request("DELETE", self.path(kind, namespace, name), body)

    def apply(self, obj: Obj) -> Obj:
        """Create, or replace what is there (keeping its resourceVersion)."""
        try:
            return self.create(obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
        meta = obj["metadata"]
        current = self.get(obj["kind"], meta["name"], meta.get("namespace"))
        obj = {
            **obj,
            "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        return self.request("PUT", self.path(obj["kind"], meta.get("namespace"), meta["name"]), obj)

    def wait(self, what: str, check: Any, timeout: float = 60.0, interval: float = 0.3) -> Any:
        """Poll ``check()`` until it returns something truthy; say what did not happen."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                result = check()
                if result:
                    return result
            except (ApiError, OSError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{what}: not after {timeout:.0f} s"
                    + (f" (last error: {last})" if last else "")
                )
            time.sleep(interval)
