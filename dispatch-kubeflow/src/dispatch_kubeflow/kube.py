"""The one place that talks to the Kubernetes API, with the official ``kubernetes`` client.

Imported only when the backend is used (``import kubernetes`` costs ~0.2 s and pulls in
urllib3, aiohttp and pydantic; ``dispatch --help`` must not pay it).

Every call carries an explicit ``(connect, read)`` timeout tuple (kubernetes 35 ignores
a scalar) and the client retries only what is safe: connection attempts (nothing was
sent) and nothing else, so a POST is never sent twice. An API server that cannot answer
is not asked again sooner than it said (``Retry-After`` on a 429 or 5xx, honoured up to
``MAX_RETRY_AFTER``): the calls in between fail at once as ``Unreachable`` with its last
words and since when. After a call timed out, the next ones are probes: sent, but with a
read timeout of at most ``PROBE_TIMEOUT``, until one is answered; so a hung API server
costs one full timeout and then short ones, and one that is back is used at once (a
window of refusals would keep saying "unreachable" for up to the read timeout after it
answered again). Connection refusals and errors without ``Retry-After`` cost nothing to
ask again and are asked again at once. Answers are read as raw JSON
(``_preload_content=False``) so the classifier sees the same dicts for every kind and
keeps fields newer than the client's models.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import urllib3
from dispatch.model.errors import BadInput, Unreachable
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from dispatch_kubeflow import shape
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.errors import ApiRefused

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
KUEUE = ("kueue.x-k8s.io", "v1beta1")
#: the trainer container's name in every Trainer runtime (``constants.Node``)
CONTAINER = "node"
LOG_CHUNK = 64 * 1024
#: the longest ``Retry-After`` honoured: a server asking for more is asked again then
MAX_RETRY_AFTER = 60.0
#: the read timeout of a call made while the last one timed out (a probe)
PROBE_TIMEOUT = 3.0


def retry_after(exc: ApiException) -> float | None:
    """The seconds a 429 or 5xx answer's ``Retry-After`` asks for, bounded by
    ``MAX_RETRY_AFTER``; None when it has none (or an HTTP date, or nonsense)."""
    headers = exc.headers or {}
    raw = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    try:
        seconds = float(str(raw).strip())
    except (TypeError, ValueError):
        return None
    if seconds != seconds or seconds < 0:  # NaN, negative
        return None
    return min(seconds, MAX_RETRY_AFTER)


def transport_words(exc: BaseException) -> str:
    """urllib3's own words for what went wrong, without its retry wrapper and URL."""
    reason = getattr(exc, "reason", None)
    return str(reason if isinstance(reason, BaseException) else exc)


@dataclass
class Outage:
    """The API server could not answer: since when, its last words, and until when
    (monotonic) it is not asked again."""

    since: datetime
    words: str
    until: float = 0.0
    #: the last call timed out: the next ones are probes (a short read timeout)
    timed_out: bool = False


def server_message(exc: ApiException) -> str:
    """The API server's own words from a Status body, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except (TypeError, ValueError):
        pass
    return f"{exc.status} {exc.reason}".strip()


class Kube:
    """Typed, bounded calls; ``Unreachable`` for transport trouble, ``ApiRefused`` for answers."""

    def __init__(
        self, config: KubeflowConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.clock = clock
        self.outage: Outage | None = None
        self._outage_lock = threading.Lock()
        configuration = client.Configuration()
        namespace = config.namespace
        try:
            if config.in_cluster:
                kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                if namespace is None:
                    try:
                        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as fh:
                            namespace = fh.read().strip()
                    except OSError:
                        namespace = None
            else:
                kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=config.kubeconfig,
                    context=config.context,
                    client_configuration=configuration,
                )
                if namespace is None:
                    contexts, active = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                        config_file=config.kubeconfig
                    )
                    if config.context:
                        active = next((c for c in contexts if c["name"] == config.context), active)
                    namespace = (active or {}).get("context", {}).get("namespace")
        except (ConfigException, OSError, TypeError) as exc:
            where = (
                "in-cluster service account"
                if config.in_cluster
                else (config.kubeconfig or "~/.kube/config")
            )
            advice = (
                ""
                if config.in_cluster
                else " (point KUBECONFIG or DISPATCH_KUBEFLOW_KUBECONFIG at a kubeconfig file, "
                "or set DISPATCH_KUBEFLOW_IN_CLUSTER=1 inside a pod)"
            )
            raise BadInput(
                f"cannot load the Kubernetes configuration from {where}: {exc}{advice}"
            ) from exc
        self.namespace = namespace or "default"
        configuration.retries = urllib3.Retry(
            total=config.retries,
            connect=config.retries,
            read=0,
            redirect=0,
            status=0,
            other=0,
            backoff_factor=0.2,
            raise_on_status=False,
        )
        self.host = configuration.host
        self.api = client.ApiClient(configuration)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    # -- plumbing --------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        data = self._response(what, fn, *args, **kwargs).data
        if not data:
            return {}
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            # a proxy's error page, a cut answer: the API server was not really asked
            raise Unreachable(
                f"the Kubernetes API at {self.host} answered {what} with what is not JSON: "
                f"{shape.raw(data)}"
            ) from exc

    def _response(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The raw urllib3 response (unread), or ``Unreachable``/``ApiRefused``."""
        probing = self._not_now(what)
        connect, read = self.config.timeout
        kwargs["_request_timeout"] = (connect, min(read, PROBE_TIMEOUT) if probing else read)
        kwargs["_preload_content"] = False
        try:
            response = fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status in (0, None, 429) or (exc.status or 0) >= 500:
                words = f"Kubernetes API at {self.host} could not answer {what}: "
                raise self._down(words + server_message(exc), retry_after(exc)) from exc
            self._answered()
            raise ApiRefused(exc.status, exc.reason or "", server_message(exc), what) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            # urllib3's NewConnectionError (refused) is a ConnectTimeoutError by descent
            timed_out = isinstance(
                reason, (urllib3.exceptions.TimeoutError, TimeoutError)
            ) and not isinstance(reason, urllib3.exceptions.NewConnectionError)
            if timed_out:
                words = (
                    f"the Kubernetes API at {self.host} did not answer {what} within "
                    f"{kwargs['_request_timeout'][1]:g} s (an API server stopped, frozen or "
                    f"overloaded; DISPATCH_KUBEFLOW_READ_TIMEOUT sets the wait)"
                )
            else:
                words = (
                    f"cannot reach the Kubernetes API at {self.host} ({what}): "
                    f"{transport_words(exc)}"
                )
            raise self._down(words, None, timed_out=timed_out) from exc
        self._answered()
        return response

    def _not_now(self, what: str) -> bool:
        """``Unreachable`` at once while the API server is not to be asked (it said when
        to ask again); True when the call is a probe (the last one timed out)."""
        with self._outage_lock:
            outage = self.outage
            left = 0.0 if outage is None else outage.until - self.clock()
            if outage is None or left <= 0:
                return outage is not None and outage.timed_out
        raise Unreachable(
            f"{outage.words} (unreachable since {outage.since.isoformat(timespec='seconds')}; "
            f"not asked to {what} for another {math.ceil(left)} s)"
        )

    def _down(self, words: str, wait: float | None, *, timed_out: bool = False) -> Unreachable:
        """Note the outage (``wait``: seconds not to ask again; ``timed_out``: the next
        calls are probes) and the error to raise."""
        with self._outage_lock:
            since = self.outage.since if self.outage is not None else datetime.now(UTC)
            until = self.clock() + wait if wait else 0.0
            self.outage = Outage(since=since, words=words, until=until, timed_out=timed_out)
        if wait:
            words += f" (not asked again for {math.ceil(wait)} s)"
        elif timed_out:
            limit = min(self.config.read_timeout, PROBE_TIMEOUT)
            words += f" (the next calls wait {limit:g} s for an answer until one comes)"
        return Unreachable(words)

    def _answered(self) -> None:
        with self._outage_lock:
            self.outage = None

    def _items(
        self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """A listing's items as served; an answer that is not a list of items is about no
        object in particular, so it is no answer (never a partial one)."""
        answer = self._call(what, fn, *args, **kwargs)
        items = answer.get("items") if isinstance(answer, dict) else answer
        if isinstance(answer, dict) and items is None:
            return []  # an empty listing ("items": null, as Go marshals an empty slice)
        if not isinstance(answer, dict) or not isinstance(items, list):
            raise Unreachable(
                f"the Kubernetes API at {self.host} answered {what} without a list of items: "
                f"{shape.raw(answer)}"
            )
        return items

    # -- TrainJobs -------------------------------------------------------------------

    def create_trainjob(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self._call(
            "create TrainJob",
            self.custom.create_namespaced_custom_object,
            *TRAINER,
            self.namespace,
            "trainjobs",
            body,
            field_validation="Strict",
        )
        return created

    def get_trainjob(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self._call(
            f"get TrainJob {namespace}/{name}",
            self.custom.get_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainjobs",
            name,
        )
        return found

    def patch_trainjob(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call(
            f"patch TrainJob {namespace}/{name}",
            self.custom.patch_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainjobs",
            name,
            patch,
        )

    def delete_trainjob(self, namespace: str, name: str, propagation: str) -> None:
        self._call(
            f"delete TrainJob {namespace}/{name}",
            self.custom.delete_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainjobs",
            name,
            body=client.V1DeleteOptions(propagation_policy=propagation),
        )

    def get_runtime(self, kind: str, name: str) -> dict[str, Any]:
        if kind == "TrainingRuntime":
            found: dict[str, Any] = self._call(
                f"get TrainingRuntime {name}",
                self.custom.get_namespaced_custom_object,
                *TRAINER,
                self.namespace,
                "trainingruntimes",
                name,
            )
        else:
            found = self._call(
                f"get ClusterTrainingRuntime {name}",
                self.custom.get_cluster_custom_object,
                *TRAINER,
                "clustertrainingruntimes",
                name,
            )
        return found

    def create_runtime_copy(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self._call(
            f"create TrainingRuntime {body['metadata']['name']}",
            self.custom.create_namespaced_custom_object,
            *TRAINER,
            self.namespace,
            "trainingruntimes",
            body,
            field_validation="Strict",
        )
        return created

    def patch_runtime_copy(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call(
            f"patch TrainingRuntime {namespace}/{name}",
            self.custom.patch_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainingruntimes",
            name,
            patch,
        )

    def delete_runtime_copy(self, namespace: str, name: str) -> None:
        self._call(
            f"delete TrainingRuntime {namespace}/{name}",
            self.custom.delete_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainingruntimes",
            name,
        )

    # -- listings (one call each, whatever the number of jobs) -------------------------

    def list_trainjobs(self, selector: str) -> list[dict[str, Any]]:
        return self._items(
            "list TrainJobs",
            self.custom.list_namespaced_custom_object,
            *TRAINER,
            self.namespace,
            "trainjobs",
            label_selector=selector,
        )

    def list_jobsets(self, selector: str) -> list[dict[str, Any]]:
        return self._items(
            "list JobSets",
            self.custom.list_namespaced_custom_object,
            *JOBSET,
            self.namespace,
            "jobsets",
            label_selector=selector,
        )

    def list_jobs(self, selector: str) -> list[dict[str, Any]]:
        return self._items(
            "list Jobs", self.batch.list_namespaced_job, self.namespace, label_selector=selector
        )

    def list_pods(self, selector: str) -> list[dict[str, Any]]:
        return self._items(
            "list Pods", self.core.list_namespaced_pod, self.namespace, label_selector=selector
        )

    def list_nodes(self) -> list[dict[str, Any]]:
        return self._items("list Nodes", self.core.list_node)

    def list_workloads(self, selector: str) -> list[dict[str, Any]]:
        return self._items(
            "list Kueue Workloads",
            self.custom.list_namespaced_custom_object,
            *KUEUE,
            self.namespace,
            "workloads",
            label_selector=selector,
        )

    def list_local_queues(self) -> list[dict[str, Any]]:
        """The namespace's Kueue LocalQueues (404: Kueue's API is not served)."""
        return self._items(
            "list Kueue LocalQueues",
            self.custom.list_namespaced_custom_object,
            *KUEUE,
            self.namespace,
            "localqueues",
        )

    def list_priority_classes(self) -> list[dict[str, Any]]:
        """Kueue's WorkloadPriorityClasses (cluster-scoped; 404: Kueue is not installed)."""
        return self._items(
            "list Kueue WorkloadPriorityClasses",
            self.custom.list_cluster_custom_object,
            *KUEUE,
            "workloadpriorityclasses",
        )

    def list_limit_ranges(self) -> list[dict[str, Any]]:
        return self._items(
            "list LimitRanges", self.core.list_namespaced_limit_range, self.namespace
        )

    def force_delete_pod(self, namespace: str, name: str) -> None:
        self._call(
            f"force-delete Pod {namespace}/{name}",
            self.core.delete_namespaced_pod,
            name,
            namespace,
            grace_period_seconds=0,
            body=client.V1DeleteOptions(grace_period_seconds=0),
        )

    def pod_log(self, namespace: str, name: str, *, previous: bool) -> Iterator[bytes]:
        """The trainer container's log (stdout and stderr together, as the kubelet keeps
        it), streamed in chunks so a large log never sits in memory. ``previous``: the run
        before the container's last restart."""
        what = f"read the log of Pod {namespace}/{name}" + (" (previous)" if previous else "")
        response = self._response(
            what,
            self.core.read_namespaced_pod_log,
            name,
            namespace,
            container=CONTAINER,
            previous=previous,
        )
        try:
            yield from response.stream(LOG_CHUNK, decode_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(f"Kubernetes API at {self.host}: {what} broke off: {exc}") from exc
        finally:
            response.release_conn()
