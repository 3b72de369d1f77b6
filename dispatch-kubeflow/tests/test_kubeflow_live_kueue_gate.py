"""Live tier: S-28 against the real Kueue v0.17.0 in a namespace that has a LocalQueue
named ``default`` (the control plane of ``start-kube.sh`` with Trainer v2.2). Each test
makes a namespace of its own with that LocalQueue (pointing at install.py's ClusterQueue
``team-a``) and deletes it after, so no other test on the plane meets the queue.

Kueue's TrainJob webhook (LocalQueueDefaulting) gives a TrainJob created without a
queue label that queue, and Kueue admits and resumes it: the first test shows it does,
to a TrainJob gated the way dispatch used to gate (suspended, no queue label). A gated
TrainJob names a prebuilt Workload nobody creates, so Kueue makes no Workload for it;
the second test shows a replacement gated while the first submission runs never runs
beside it, and runs once the gate opens. The emulator states the same offline
(test_kubeflow_kueue_gate.py)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import JOBSET_NAME, LiveDriver, is_true
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.kubeapi import ApiError
from dispatch_kubeflow_testing.live.observe import submit, until

pytestmark = pytest.mark.live(server="kubeflow")

#: no GPUs: the quota never keeps the second submission out, only the gate can
SPEC = JobSpec(
    name="gate",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=2),
    options={"image": "registry.example/acme/train:1.4"},
)
CANCEL = Cause(
    kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="ana", detail="replaced"
)


@contextmanager
def own_namespace(plane: ControlPlane, *, default_queue: bool) -> Iterator[LiveDriver]:
    """A namespace of the test's own, with a Kueue LocalQueue ``default`` that Kueue
    knows (``Active``) when ``default_queue``; its TrainJobs, pods and Workloads gone and
    it deleted after."""
    assert "kueue" in plane.versions, (
        f"this control plane runs no Kueue ({plane.versions}); start-kube.sh runs "
        "Kueue with DISPATCH_KUBE_TRAINER=v2.2.0"
    )
    namespace = f"dispatch-gate-{uuid.uuid4().hex[:6]}"
    driver = LiveDriver(plane, namespace=namespace)
    driver.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        if default_queue:
            driver.api.create(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "default", "namespace": namespace},
                    "spec": {"clusterQueue": "team-a"},
                }
            )
            driver.wait(
                f"LocalQueue {namespace}/default active",
                lambda: is_true(driver.api.get("LocalQueue", "default", namespace), "Active"),
            )
        yield driver
    finally:
        driver.cleanup()
        driver.api.delete("Namespace", namespace)

        def gone() -> bool:
            try:
                driver.api.get("Namespace", namespace)
            except ApiError as exc:
                return exc.status == 404
            return False

        driver.wait(f"namespace {namespace} deleted", gone, timeout=300)


@pytest.fixture
def queued_namespace(live_plane: ControlPlane) -> Iterator[LiveDriver]:
    with own_namespace(live_plane, default_queue=True) as driver:
        yield driver


@pytest.fixture
def backend(
    make_live_backend: Callable[..., KubeflowBackend], queued_namespace: LiveDriver
) -> KubeflowBackend:
    return make_live_backend(namespace=queued_namespace.namespace)


def running_pods(live: LiveDriver, name: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in live.pods(name)
        if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
    ]


def test_live_kueue_gives_a_trainjob_without_a_queue_label_the_default_queue(
    backend: KubeflowBackend, queued_namespace: LiveDriver, job_id: str
) -> None:
    """The hazard on the real Kueue: a TrainJob gated by ``suspend`` alone, without the
    queue label, gets the LocalQueue ``default`` from Kueue's webhook, and Kueue admits
    and resumes it although dispatch's gate is closed: its pods run."""
    live = queued_namespace
    prepared = backend.dispatch_prepare(job_id, 1, SPEC, True)
    labels = prepared.mapping("TrainJob")["metadata"]["labels"]
    labels.pop(tags.KUEUE_QUEUE)
    labels.pop(tags.KUEUE_PREBUILT)
    name = tags.split_object_id(backend.dispatch_send(prepared))[1]
    tj = live.trainjob(name)
    assert tj["metadata"]["labels"][tags.KUEUE_QUEUE] == "default"
    assert tj["metadata"]["annotations"][tags.GATE] == "closed"
    live.running(name, 2)
    assert live.trainjob(name)["spec"]["suspend"] is False
    assert is_true(live.workload(name), "Admitted")


class Overlap:
    """Lists the namespace's pods in a loop until stopped: when a pod of ``second``
    was first seen, and every listing where pods of both TrainJobs ran at once."""

    def __init__(self, live: LiveDriver, first: str, second: str) -> None:
        self.live, self.first, self.second = live, first, second
        self.both: list[dict[str, list[str]]] = []
        self.second_seen: float | None = None
        self.listings = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Overlap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.live.api.list("Pod", self.live.namespace)
            except (ApiError, OSError):
                continue
            self.listings += 1
            running: dict[str, list[str]] = {self.first: [], self.second: []}
            for p in pods:
                owner = (p["metadata"].get("labels") or {}).get(JOBSET_NAME)
                if owner == self.second and self.second_seen is None:
                    self.second_seen = time.monotonic()
                if owner in running and p["status"].get("phase") == "Running":
                    running[owner].append(p["metadata"]["name"])
            if running[self.first] and running[self.second]:
                self.both.append(running)
            self._stop.wait(0.2)


def test_live_gated_replacement_never_runs_beside_the_first_under_a_default_queue_S28(
    backend: KubeflowBackend, queued_namespace: LiveDriver, job_id: str
) -> None:
    """S-28: submission 1 runs in the LocalQueue ``default`` (no queue chosen); the
    replacement, submission 2, is created gated while it runs. Kueue reconciles it
    (its ``Stopped`` event: "missing workload") and makes no Workload: it stays
    suspended, with no pod, gated. Submission 1 is stopped; once discovery shows it
    ended and its objects are gone the gate opens, and only then do submission 2's pods
    appear; they run. No listing of the namespace's pods ever shows both submissions
    running."""
    live = queued_namespace
    first = submit(backend, job_id, SPEC)
    live.running(first, 2)
    with Overlap(live, first, tags.object_name(job_id, 2, SPEC.name)) as overlap:
        second = submit(backend, job_id, SPEC, gated=True, submission=2)
        labels = live.trainjob(second)["metadata"]["labels"]
        assert labels[tags.KUEUE_QUEUE] == "default"
        assert labels[tags.KUEUE_PREBUILT] == f"{second}-gated"
        held = live.wait(
            "Kueue's Stopped event on the gated TrainJob (no prebuilt Workload)",
            lambda: [e for e in live.events(second) if e.get("reason") == "Stopped"],
        )
        assert "missing workload" in held[0]["message"], held
        assert live.trainjob(second)["spec"]["suspend"] is True
        uid = live.trainjob(second)["metadata"]["uid"]
        assert live.api.list("Workload", live.namespace, f"kueue.x-k8s.io/job-uid={uid}") == []
        assert live.pods(second) == []
        views = {o.submission: o.phase for o in backend.dispatch_discover([job_id]).objects}
        assert views == {1: Phase.RUNNING, 2: Phase.GATED}, views
        assert len(running_pods(live, first)) == 2
        backend.dispatch_stop(object_id=tags.object_id(live.namespace, first), cause=CANCEL)

        def first_ended() -> bool:
            objects = backend.dispatch_discover([job_id]).objects
            return all(o.phase is Phase.ENDED for o in objects if o.submission == 1)

        # what the core waits for before it opens the gate; then everything of submission
        # 1 gone from the API server, because the real Trainer may re-create the JobSet of
        # a TrainJob under Foreground deletion, whose pods then run again (seen here once
        # after discovery had shown it ended): this test proves the gate, not the stop
        live.wait("discovery showing submission 1 ended", first_ended, timeout=180)

        def first_gone() -> bool:
            try:
                live.trainjob(first)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            else:
                return False
            jobsets = {j["metadata"]["name"] for j in live.api.list("JobSet", live.namespace)}
            return first not in jobsets and not live.jobs(first) and not live.pods(first)

        live.wait("submission 1's TrainJob, JobSet, Jobs and pods gone", first_gone, timeout=180)
        assert overlap.second_seen is None
        opened = time.monotonic()
        backend.dispatch_open_gate(object_id=tags.object_id(live.namespace, second))
        live.running(second, 2, timeout=120)
        until(backend, job_id, "running", lambda o: o.phase is Phase.RUNNING, live=live)
    assert overlap.both == [], overlap.both
    assert overlap.second_seen is not None and overlap.second_seen > opened
    assert overlap.listings > 10
    assert is_true(live.workload(second), "Admitted")
    assert live.workload(second)["spec"]["queueName"] == "default"


def test_live_gated_without_a_queue_is_suspend_and_opening_keeps_the_kueue_label(
    live_plane: ControlPlane, make_live_backend: Callable[..., KubeflowBackend], job_id: str
) -> None:
    """S-37: in a namespace without a LocalQueue ``default`` and no queue chosen, the
    gated TrainJob has no queue label, so Kueue leaves it alone and ``suspend`` is the
    gate; its prebuilt-workload label means nothing there. Opening the gate resumes it
    and keeps the label (Kueue's webhook refuses to change it on a TrainJob that is not
    suspended, even one it does not manage); it runs, and Kueue made no Workload for it."""
    with own_namespace(live_plane, default_queue=False) as live:
        backend = make_live_backend(namespace=live.namespace)
        object_id = backend.dispatch_submit(job_id=job_id, submission=1, spec=SPEC, gated=True)
        name = tags.split_object_id(object_id)[1]
        labels = live.trainjob(name)["metadata"]["labels"]
        assert tags.KUEUE_QUEUE not in labels and tags.KUEUE_PREBUILT in labels
        live.wait("the JobSet suspended", lambda: live.jobset(name)["spec"].get("suspend"))
        assert live.pods(name) == []
        views = [o.phase for o in backend.dispatch_discover([job_id]).objects]
        assert views == [Phase.GATED], views
        backend.dispatch_open_gate(object_id)
        live.running(name, 2)
        tj = live.trainjob(name)
        assert tj["spec"]["suspend"] is False
        assert tj["metadata"]["labels"][tags.KUEUE_PREBUILT] == f"{name}-gated"
        assert live.api.list("Workload", live.namespace) == []
