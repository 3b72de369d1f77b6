"""The emulator's promises, written once and run against the emulator here and against
the real control plane in ``test_kubeflow_live_promises.py`` (marked live):
where the two disagree the emulator is wrong (the divergences are listed in
dispatch-kubeflow-testing/README.md).

Every promise creates its TrainJob (and, where it needs one, a TrainingRuntime) through
the official client over HTTP, provokes the ending through the tier's driver (the
emulator's, or the live driver that only does what happens to a real cluster) and reads
what the controllers made of it. ``tier.until`` waits: on the real cluster by polling,
on the emulator by letting its controllers take steps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from dispatch_kubeflow_testing.emulator import Emulator
from kubernetes import client, config

G, V = "trainer.kubeflow.org", "v1alpha1"
NS = "default"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
MANAGED = {"dispatch.dev/managed": "true"}
T = TypeVar("T")
Obj = dict[str, Any]


class Tier(Protocol):
    """What a promise needs of a cluster: its official client, reads, and the driver's
    provocations (the emulator's and the live driver's share these names)."""

    api: client.ApiClient

    def trainjob(self, name: str) -> Obj: ...
    def jobset(self, name: str) -> Obj: ...
    def jobs(self, name: str) -> list[Obj]: ...
    def pods(self, name: str) -> list[Obj]: ...
    def events(self, name: str) -> list[Obj]: ...
    def exit(self, name: str, code: int, *, pod: int = 0) -> None: ...
    def preempt(self, name: str, *, pod: int = 0) -> None: ...
    def lose_node(self, name: str, *, pod: int = 0) -> str: ...
    def recover_node(self, node: str) -> None: ...
    def suspend_behind_back(self, name: str) -> None: ...
    def remakes_while_deleting(self) -> None: ...
    def oom(self, name: str, *, pod: int = 0) -> None: ...
    def cannot_pull(self, name: str) -> None: ...
    def expire_deadline(self, name: str) -> None: ...
    def until(self, what: str, check: Callable[[], T | None], timeout: float = 120) -> T: ...
    def a_while(self) -> None: ...


class EmulatorTier:
    """The emulator: waiting is letting its controllers take steps."""

    #: steps ``until`` lets pass before it gives up; ``a_while`` lets this many pass
    STEPS, WHILE = 60, 10

    def __init__(self, emulator: Emulator, api: client.ApiClient) -> None:
        self.emulator, self.api = emulator, api

    def trainjob(self, name: str) -> Obj:
        return self.emulator.trainjob(name)

    def jobset(self, name: str) -> Obj:
        return self.emulator.jobset(name)

    def jobs(self, name: str) -> list[Obj]:
        from dispatch_kubeflow_testing.emulator.store import JOB

        listing = self.emulator.store.listing(JOB, NS, f"jobset.sigs.k8s.io/jobset-name={name}")
        items: list[Obj] = listing["items"]
        return items

    def pods(self, name: str) -> list[Obj]:
        return self.emulator.pods(name)

    def events(self, name: str) -> list[Obj]:
        from dispatch_kubeflow_testing.emulator.store import EVENT

        items: list[Obj] = self.emulator.store.listing(EVENT, NS, None)["items"]
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]

    def exit(self, name: str, code: int, *, pod: int = 0) -> None:
        self.until(f"pod {pod} of {name} running", lambda: running(self.pods(name), pod))
        self.emulator.exit(name, code, pod=pod)

    def preempt(self, name: str, *, pod: int = 0) -> None:
        self.emulator.preempt(name, pod=pod)

    def lose_node(self, name: str, *, pod: int = 0) -> str:
        return self.emulator.lose_node(name, pod=pod)

    def recover_node(self, node: str) -> None:
        self.emulator.recover_node(node)

    def suspend_behind_back(self, name: str) -> None:
        self.emulator.suspend_behind_back(name)

    def remakes_while_deleting(self) -> None:
        self.emulator.remake_while_deleting()

    def oom(self, name: str, *, pod: int = 0) -> None:
        self.until(f"pod {pod} of {name} running", lambda: running(self.pods(name), pod))
        self.emulator.oom(name, pod=pod)

    def cannot_pull(self, name: str) -> None:
        """The registry has no such image (the emulator is told; it pulls nothing)."""
        self.emulator.launch_error(name, "ErrImagePull")

    def expire_deadline(self, name: str) -> None:
        """The TrainJob's activeDeadlineSeconds passes (the emulator's clock is steps)."""
        self.emulator.expire_deadline(name)

    def until(self, what: str, check: Callable[[], T | None], timeout: float = 120) -> T:
        for _ in range(self.STEPS):
            result = check()
            if result:
                return result
            self.emulator.advance()
        raise AssertionError(f"{what}: not after {self.STEPS} emulator steps")

    def a_while(self) -> None:
        self.emulator.advance(self.WHILE)


@pytest.fixture
def api_of() -> Iterator[Callable[[Path], client.ApiClient]]:
    clients: list[client.ApiClient] = []

    def make(kubeconfig: Path) -> client.ApiClient:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        clients.append(client.ApiClient(configuration))
        return clients[-1]

    yield make
    for api in clients:
        api.close()


@pytest.fixture
def tier(emulator: Emulator, kubeconfig: Path, api_of: Callable[[Path], client.ApiClient]) -> Tier:
    return EmulatorTier(emulator, api_of(kubeconfig))


# -- what the promises create ---------------------------------------------------------


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def trainjob_body(
    name: str,
    *,
    nodes: int = 2,
    image: str = "registry.example/acme/train:1.4",
    runtime: str | None = None,
    command: tuple[str, ...] = ("torchrun", "train.py"),
    deadline: int | None = None,
) -> Obj:
    """A TrainJob whose program runs until the driver ends it, one node's GPUs per pod
    (so a higher-priority pod can only be placed by preempting it)."""
    gpus = {"nvidia.com/gpu": "8"}
    ref: Obj = {"name": "torch-distributed"}
    if runtime is not None:
        ref = {"name": runtime, "kind": "TrainingRuntime", "apiGroup": G}
    body: Obj = {
        "apiVersion": f"{G}/{V}",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": dict(MANAGED)},
        "spec": {
            "runtimeRef": ref,
            "trainer": {
                "numNodes": nodes,
                "image": image,
                "command": list(command),
                "resourcesPerNode": {"limits": gpus, "requests": gpus},
            },
        },
    }
    if deadline is not None:
        body["spec"]["activeDeadlineSeconds"] = deadline
    return body


def strict_runtime_body(name: str, *, max_restarts: int | None = None) -> Obj:
    """A TrainingRuntime shaped like the shipped torch one, but whose Jobs neither retry
    nor restart (what dispatch wants: ``restartPolicy: Never``, ``backoffLimit: 0``) and
    fail on a disruption or a non-zero exit (``podFailurePolicy`` FailJob rules)."""
    job_spec = {
        "backoffLimit": 0,
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
                {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
            ]
        },
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "node",
                        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                        "command": ["torchrun", "train.py"],
                    }
                ],
            },
        },
    }
    jobset_spec: Obj = {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {
                        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                    },
                    "spec": job_spec,
                },
            }
        ]
    }
    if max_restarts is not None:
        jobset_spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "labels": {"trainer.kubeflow.org/framework": "torch", **MANAGED},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": jobset_spec},
        },
    }


def create(tier: Tier, body: Obj) -> Obj:
    plural = {"TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes"}[body["kind"]]
    created: Obj = client.CustomObjectsApi(tier.api).create_namespaced_custom_object(
        G, V, NS, plural, body
    )
    return created


def start(
    tier: Tier, *, nodes: int = 2, strict: bool = False, max_restarts: int | None = None
) -> str:
    """A TrainJob with every node running; ``strict`` puts it on its own strict runtime
    (whose JobSet restarts up to ``max_restarts`` times, if given)."""
    name = fresh("promise")
    runtime = None
    if strict:
        runtime = name
        create(tier, strict_runtime_body(runtime, max_restarts=max_restarts))
    create(tier, trainjob_body(name, nodes=nodes, runtime=runtime))
    tier.until(f"{nodes} running pods of {name}", lambda: len(live_pods(tier, name)) == nodes)
    return name


# -- reading --------------------------------------------------------------------------


def condition(obj: Obj, kind: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def index_of(pod: Obj) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, -1))


def container(pod: Obj) -> Obj:
    return dict(((pod.get("status") or {}).get("containerStatuses") or [{}])[0])


def running(pods: list[Obj], index: int) -> Obj | None:
    for pod in pods:
        if (
            index_of(pod) == index
            and "deletionTimestamp" not in pod["metadata"]
            and pod["status"].get("phase") == "Running"
            and "running" in (container(pod).get("state") or {})
        ):
            return pod
    return None


def live_pods(tier: Tier, name: str) -> list[Obj]:
    return [p for p in tier.pods(name) if running([p], index_of(p))]


def evict(tier: Tier, name: str, index: int) -> Obj:
    """``kubectl drain``'s call, the same request on both tiers: the Eviction API."""
    pod = running(tier.pods(name), index)
    assert pod is not None, f"no running pod {index} of {name} to evict"
    pod_name = pod["metadata"]["name"]
    client.CoreV1Api(tier.api).create_namespaced_pod_eviction(
        pod_name, NS, client.V1Eviction(metadata=client.V1ObjectMeta(name=pod_name, namespace=NS))
    )
    return pod


def the_job(tier: Tier, name: str) -> Obj:
    (job,) = tier.jobs(name)
    return job


def not_found(exc: Exception) -> bool:
    """The emulator's ApiError or the live client's, either saying 404."""
    return "404" in str(exc) or "not found" in str(exc).lower()


def gone(read: Callable[[], object]) -> bool:
    try:
        read()
    except Exception as exc:
        return not_found(exc)
    return False


def unless_gone(read: Callable[[], T]) -> T | None:
    """What ``read`` returns, or None if it answers 404."""
    try:
        return read()
    except Exception as exc:
        if not_found(exc):
            return None
        raise


# -- the promises ---------------------------------------------------------------------


def test_promise_jobset_webhook_and_job_defaults(tier: Tier) -> None:
    """JobSet's webhook makes the shipped runtime's pods ``restartPolicy: OnFailure``
    and its Jobs Indexed; the API server gives a Job ``backoffLimit: 6`` and replaces
    terminating pods, or only failed ones once a podFailurePolicy is set."""
    shipped, strict = start(tier), start(tier, strict=True)
    for name, restart, backoff, replace in (
        (shipped, "OnFailure", 6, "TerminatingOrFailed"),
        (strict, "Never", 0, "Failed"),
    ):
        job = the_job(tier, name)
        assert job["spec"]["template"]["spec"]["restartPolicy"] == restart
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["backoffLimit"] == backoff
        assert job["spec"]["podReplacementPolicy"] == replace
        assert {p["spec"]["restartPolicy"] for p in tier.pods(name)} == {restart}


def test_promise_a_failing_container_under_onfailure_crash_loops_in_place(tier: Tier) -> None:
    """Divergence 1: exit 1 under OnFailure restarts the container in the same pod
    (restartCount, lastState.terminated, the pod still Running), it does not end it."""
    name = start(tier)
    tier.exit(name, 1, pod=1)
    before = {p["metadata"]["uid"] for p in tier.pods(name) if index_of(p) == 1}

    def restarted() -> Obj | None:
        for pod in tier.pods(name):
            last = (container(pod).get("lastState") or {}).get("terminated") or {}
            if index_of(pod) == 1 and container(pod).get("restartCount", 0) >= 1 and last:
                return pod
        return None

    pod = tier.until("rank 1 restarted in place", restarted)
    assert pod["metadata"]["uid"] in before
    assert pod["status"]["phase"] == "Running"
    last = container(pod)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (1, "Error")


def test_promise_backoff_exceeded_is_failure_target_then_failed_and_the_pods_deleted(
    tier: Tier,
) -> None:
    """Divergence 2: once the restarts reach backoffLimit 6 the Job sets FailureTarget
    (BackoffLimitExceeded), deletes its pods (Running or restarting), and sets Failed
    with the same reason; the JobSet and the TrainJob fail (FailedJobs)."""
    name = start(tier)
    tier.exit(name, 1, pod=1)
    tier.until("the TrainJob failed", lambda: condition(tier.trainjob(name), "Failed"), timeout=180)
    job = the_job(tier, name)
    target, failed = condition(job, "FailureTarget"), condition(job, "Failed")
    assert target is not None and failed is not None
    assert target["reason"] == failed["reason"] == "BackoffLimitExceeded"
    assert target["lastTransitionTime"] <= failed["lastTransitionTime"]
    assert tier.until("the Job's pods deleted", lambda: tier.pods(name) == [] or None) is True
    assert (condition(tier.jobset(name), "Failed") or {}).get("reason") == "FailedJobs"
    assert (condition(tier.trainjob(name), "Failed") or {}).get("reason") == "FailedJobs"


def test_promise_exit_under_a_strict_runtime_is_the_pod_failure_policy(tier: Tier) -> None:
    """With restartPolicy Never, backoffLimit 0 and a FailJob rule on exit codes, rank
    1's exit 1 ends its pod Failed (it stays, exit code 1, no restart) and the Job fails
    at once with reason PodFailurePolicy naming that pod and code; the other pod is
    deleted."""
    name = start(tier, strict=True)
    tier.exit(name, 1, pod=1)
    job = tier.until("the Job failed", lambda: condition(the_job(tier, name), "Failed"))
    assert job["reason"] == "PodFailurePolicy"
    (failed,) = tier.until(
        "only the failed pod left", lambda: tier.pods(name) if len(tier.pods(name)) == 1 else None
    )
    assert index_of(failed) == 1 and failed["status"]["phase"] == "Failed"
    ended = container(failed)["state"]["terminated"]
    assert ended["exitCode"] == 1 and container(failed).get("restartCount", 0) == 0
    assert f"pod {NS}/{failed['metadata']['name']} failed with exit code 1" in job["message"]
    assert (condition(tier.trainjob(name), "Failed") or {}).get("reason") == "FailedJobs"


@pytest.mark.parametrize("disruption", ["preempt", "evict"])
def test_promise_a_preempted_or_evicted_pod_is_replaced_and_the_trainjob_runs_on(
    tier: Tier, disruption: str
) -> None:
    """Divergence 3: the scheduler's preemption (a higher-priority pod, through the
    driver) or the Eviction API (the same request on both tiers) marks the pod
    DisruptionTarget and deletes it; the Job (backoffLimit 6) counts one failure and
    makes a new pod for that index; nothing fails."""
    name = start(tier)
    (victim,) = [p for p in tier.pods(name) if index_of(p) == 0]
    if disruption == "preempt":
        tier.preempt(name, pod=0)
    else:
        evict(tier, name, 0)

    def replaced() -> Obj | None:
        pod = running(tier.pods(name), 0)
        return (
            pod if pod is not None and pod["metadata"]["uid"] != victim["metadata"]["uid"] else None
        )

    def counted() -> Obj | None:
        job = the_job(tier, name)
        return job if job["status"].get("failed") == 1 else None

    tier.until("a new running pod for index 0", replaced)
    job = tier.until("the failure counted", counted)
    assert condition(job, "FailureTarget") is None and condition(job, "Failed") is None
    assert condition(tier.trainjob(name), "Failed") is None
    assert len(live_pods(tier, name)) == 2


def test_promise_a_disruption_under_a_strict_runtime_fails_the_job_by_its_policy(
    tier: Tier,
) -> None:
    """An evicted pod's kubelet stops it (Failed, the DisruptionTarget kept), so the
    FailJob rule on DisruptionTarget fails the Job: PodFailurePolicy, naming the pod."""
    name = start(tier, strict=True)
    victim = evict(tier, name, 0)
    job = tier.until("the Job failed", lambda: condition(the_job(tier, name), "Failed"))
    assert job["reason"] == "PodFailurePolicy"
    assert f"Pod {NS}/{victim['metadata']['name']} has condition DisruptionTarget" in job["message"]


def test_promise_lost_node_and_a_failing_rank_hold_the_job_at_failure_target(
    tier: Tier,
) -> None:
    """Divergence 4: the pod on a lost node is Terminating for good (its index gets a
    new pod); when rank 1 then crash-loops past backoffLimit the Job reaches
    FailureTarget but not Failed while that pod is Terminating; the TrainJob runs on
    until the node comes back."""
    name = start(tier)
    node = tier.lose_node(name, pod=0)

    def stuck() -> Obj | None:
        for pod in tier.pods(name):
            if pod["spec"].get("nodeName") == node and "deletionTimestamp" in pod["metadata"]:
                return pod
        return None

    held = tier.until("the pod on the lost node Terminating", stuck)
    assert condition(held, "DisruptionTarget") is not None
    tier.until("a new pod for index 0", lambda: running(tier.pods(name), 0))
    tier.exit(name, 1, pod=1)
    tier.until(
        "the Job at FailureTarget",
        lambda: condition(the_job(tier, name), "FailureTarget"),
        timeout=180,
    )
    tier.a_while()
    job = the_job(tier, name)
    assert condition(job, "Failed") is None and job["status"].get("terminating") == 1
    assert condition(tier.trainjob(name), "Failed") is None
    assert stuck() is not None
    tier.recover_node(node)
    failed = tier.until("the Job failed", lambda: condition(the_job(tier, name), "Failed"))
    assert failed["reason"] == "BackoffLimitExceeded"


def test_promise_a_foreground_delete_lingers_until_the_collector_is_done(tier: Tier) -> None:
    """Divergence 5: a Foreground delete answers with the TrainJob still there
    (deletionTimestamp, the foregroundDeletion finalizer); the garbage collector then
    removes it and its JobSet, Jobs and pods, over a while."""
    name = start(tier)
    answer = client.CustomObjectsApi(tier.api).delete_namespaced_custom_object(
        G, V, NS, "trainjobs", name, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    assert "deletionTimestamp" in answer["metadata"], answer["metadata"]
    assert "foregroundDeletion" in answer["metadata"].get("finalizers", []), answer["metadata"]
    tier.until("the TrainJob gone", lambda: gone(lambda: tier.trainjob(name)))
    # not "the TrainJob last": the real Trainer reconciles a TrainJob being deleted and
    # may create its JobSet again after the collector removed it (seen: JobSet, Job and
    # pods re-created, then collected as orphans after the TrainJob went; README #7)
    tier.until(
        "its JobSet, Jobs and pods gone",
        lambda: gone(lambda: tier.jobset(name)) and tier.jobs(name) == [] == tier.pods(name),
    )


def test_promise_a_trainjob_suspended_while_it_is_deleted_starts_no_pod(tier: Tier) -> None:
    """What dispatch's stop relies on (S-28): after a Foreground delete the TrainJob can
    still be patched ``suspend: true``, and the Trainer then suspends its JobSet, and any
    JobSet it makes again while the TrainJob is being deleted (README #7), so no new pod
    starts; a Background delete then lets everything go."""
    tier.remakes_while_deleting()
    name = start(tier)
    before = {p["metadata"]["uid"] for p in tier.pods(name)}
    api = client.CustomObjectsApi(tier.api)
    api.delete_namespaced_custom_object(
        G, V, NS, "trainjobs", name, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    patched = api.patch_namespaced_custom_object(
        G, V, NS, "trainjobs", name, {"spec": {"suspend": True}}
    )
    assert isinstance(patched, dict), patched
    assert patched["spec"]["suspend"] is True, patched["spec"]
    assert "deletionTimestamp" in patched["metadata"], patched["metadata"]
    new: set[str] = set()

    def quiet() -> bool:
        pods = tier.pods(name)
        new.update(p["metadata"]["name"] for p in pods if p["metadata"]["uid"] not in before)
        jobset = unless_gone(lambda: tier.jobset(name))
        suspended = jobset is None or jobset["spec"].get("suspend") is True
        alive = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")]
        return suspended and not alive

    tier.until("no pod of it left running, its JobSet suspended or gone", quiet, timeout=180)
    try:
        api.delete_namespaced_custom_object(
            G,
            V,
            NS,
            "trainjobs",
            name,
            body=client.V1DeleteOptions(propagation_policy="Background"),
        )
    except client.ApiException as exc:
        assert exc.status == 404, exc

    def all_gone() -> bool:
        quiet()
        return (
            gone(lambda: tier.trainjob(name))
            and gone(lambda: tier.jobset(name))
            and tier.jobs(name) == [] == tier.pods(name)
        )

    tier.until("the TrainJob, its JobSet, Jobs and pods gone", all_gone, timeout=180)
    assert new == set(), f"pods started after the suspend: {sorted(new)}"


def test_promise_a_lost_node_under_a_strict_runtime_holds_the_job_without_a_condition(
    tier: Tier,
) -> None:
    """With a podFailurePolicy only Failed pods count and only they are replaced: the
    pod Terminating on a lost node is neither, so the Job shows no condition, no failure
    and no new pod for that index; once the node is back its kubelet stops the pod
    (Failed, DisruptionTarget kept) and the DisruptionTarget rule fails the Job."""
    name = start(tier, strict=True)
    node = tier.lose_node(name, pod=0)

    def stuck() -> Obj | None:
        for pod in tier.pods(name):
            if pod["spec"].get("nodeName") == node and "deletionTimestamp" in pod["metadata"]:
                return pod
        return None

    held = tier.until("the pod on the lost node Terminating", stuck)
    tier.a_while()
    job = the_job(tier, name)
    assert condition(job, "FailureTarget") is None and condition(job, "Failed") is None
    assert not job["status"].get("failed")
    assert [p["metadata"]["uid"] for p in tier.pods(name) if index_of(p) == 0] == [
        held["metadata"]["uid"]
    ]
    tier.recover_node(node)
    failed = tier.until("the Job failed", lambda: condition(the_job(tier, name), "Failed"))
    assert failed["reason"] == "PodFailurePolicy"
    assert (
        f"Pod {NS}/{held['metadata']['name']} has condition DisruptionTarget" in failed["message"]
    )


def test_promise_a_jobset_failure_policy_restarts_then_fails_at_max_restarts(tier: Tier) -> None:
    """Divergence 8: JobSet's failurePolicy (maxRestarts 1): a failed Job makes the
    JobSet start again: ``status.restarts`` 1 and an Event, no condition; Jobs and pods
    of restart-attempt 1, the old ones gone; the TrainJob runs on. The next failure
    fails it ReachedMaxRestarts, copied by the Trainer onto the TrainJob."""
    name = start(tier, strict=True, max_restarts=1)
    tier.exit(name, 1, pod=1)

    def restarted() -> list[Obj] | None:
        if (tier.jobset(name).get("status") or {}).get("restarts") != 1:
            return None
        pods = tier.pods(name)
        attempts = {p["metadata"]["labels"].get(RESTART_ATTEMPT) for p in pods}
        return pods if attempts == {"1"} and len(live_pods(tier, name)) == 2 else None

    tier.until("the JobSet restarted once, two pods of attempt 1 running", restarted)
    assert [j["metadata"]["labels"][RESTART_ATTEMPT] for j in tier.jobs(name)] == ["1"]
    jobset = tier.jobset(name)
    assert [c for c in jobset["status"].get("conditions") or [] if c["status"] == "True"] == []
    assert jobset["status"]["restartsCountTowardsMax"] == 1
    said = [
        (e["type"], e["reason"], e["message"])
        for e in tier.events(name)
        if e["involvedObject"]["kind"] == "JobSet"
    ]
    assert (
        "Warning",
        "RestartJobSetFailurePolicyAction",
        f"applying RestartJobSet failure policy action (first failed job: {name}-node-0)",
    ) in said
    assert condition(tier.trainjob(name), "Failed") is None
    tier.exit(name, 2, pod=0)
    failed = tier.until("the JobSet failed", lambda: condition(tier.jobset(name), "Failed"))
    assert (failed["reason"], failed["message"]) == (
        "ReachedMaxRestarts",
        f"jobset failed due to reaching max number of restarts (first failed job: {name}-node-0)",
    )
    ended = tier.until("the TrainJob failed", lambda: condition(tier.trainjob(name), "Failed"))
    assert (ended["reason"], ended["message"]) == (failed["reason"], failed["message"])


def test_promise_success_completes_the_job_the_jobset_and_the_trainjob(tier: Tier) -> None:
    """Every node's program exits 0: pods Succeeded, the Job Complete (CompletionsReached),
    the JobSet Completed (AllJobsCompleted), the TrainJob Complete with the JobSet's words."""
    name = fresh("promise")
    create(tier, trainjob_body(name, command=("true",)))
    done = tier.until("the TrainJob complete", lambda: condition(tier.trainjob(name), "Complete"))
    job = the_job(tier, name)
    assert (condition(job, "Complete") or {}).get("reason") == "CompletionsReached"
    completed = condition(tier.jobset(name), "Completed") or {}
    assert completed.get("reason") == "AllJobsCompleted"
    assert (done["reason"], done["message"]) == (completed["reason"], completed["message"])
    assert {p["status"]["phase"] for p in tier.pods(name)} == {"Succeeded"}


def test_promise_suspend_and_resume(tier: Tier) -> None:
    """``spec.suspend`` on a running TrainJob suspends the JobSet and the Job (their pods
    deleted); clearing it starts new pods. Conditions in the controllers' words."""
    name = start(tier)
    before = {p["metadata"]["uid"] for p in tier.pods(name)}
    tier.suspend_behind_back(name)
    tier.until("no pods left", lambda: tier.pods(name) == [] or None)
    suspended = tier.until(
        "the TrainJob suspended", lambda: condition(tier.trainjob(name), "Suspended")
    )
    assert (suspended["reason"], suspended["message"]) == ("Suspended", "TrainJob is suspended")
    assert (condition(tier.jobset(name), "Suspended") or {}).get("reason") == "SuspendedJobs"
    assert (condition(the_job(tier, name), "Suspended") or {}).get("reason") == "JobSuspended"
    client.CustomObjectsApi(tier.api).patch_namespaced_custom_object(
        G, V, NS, "trainjobs", name, {"spec": {"suspend": False}}
    )
    tier.until("two new pods running", lambda: len(live_pods(tier, name)) == 2)
    assert before.isdisjoint(p["metadata"]["uid"] for p in tier.pods(name))
    resumed = [c for c in tier.trainjob(name)["status"]["conditions"] if c["type"] == "Suspended"]
    assert [(c["status"], c["reason"]) for c in resumed] == [("False", "Resumed")]
    assert condition(the_job(tier, name), "Failed") is None


def test_promise_trainjob_deadline_fails_it_then_removes_the_jobset(tier: Tier) -> None:
    """Trainer 2.2's activeDeadlineSeconds: the TrainJob fails DeadlineExceeded ("TrainJob
    exceeded its active deadline") first, then its JobSet is deleted and the pods go."""
    name = fresh("promise")
    create(tier, trainjob_body(name, deadline=8))
    tier.until("2 running pods", lambda: len(live_pods(tier, name)) == 2)
    tier.expire_deadline(name)
    failed = tier.until(
        "the TrainJob failed", lambda: condition(tier.trainjob(name), "Failed"), timeout=60
    )
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    tier.until(
        "the JobSet and the pods gone",
        lambda: gone(lambda: tier.jobset(name)) and tier.pods(name) == [],
    )


def test_promise_an_oom_kill_under_a_strict_runtime_is_the_pod_failure_policy(
    tier: Tier,
) -> None:
    """The kernel OOM-kills rank 1: its container ends OOMKilled 137, the pod Failed, and
    the exit-code rule fails the Job (PodFailurePolicy, naming the code)."""
    name = start(tier, strict=True)
    tier.oom(name, pod=1)
    job = tier.until("the Job failed", lambda: condition(the_job(tier, name), "Failed"))
    assert job["reason"] == "PodFailurePolicy" and "failed with exit code 137" in job["message"]
    (pod,) = tier.until(
        "only the killed pod left", lambda: tier.pods(name) if len(tier.pods(name)) == 1 else None
    )
    ended = container(pod)["state"]["terminated"]
    assert (ended["exitCode"], ended["reason"]) == (137, "OOMKilled") and index_of(pod) == 1


def test_promise_an_image_that_cannot_be_pulled_leaves_pods_pending_and_the_job_alone(
    tier: Tier,
) -> None:
    """ErrImagePull / ImagePullBackOff: the pods stay Pending with the kubelet's reason,
    the Job neither fails nor counts a failure, the TrainJob waits."""
    name = fresh("promise")
    create(tier, trainjob_body(name, image="dispatch.invalid/acme/nope:0"))
    tier.until("2 pods bound", lambda: len(tier.pods(name)) == 2 or None)
    tier.cannot_pull(name)

    def pulling() -> list[Obj] | None:
        pods = tier.pods(name)
        reasons = {
            ((container(p).get("state") or {}).get("waiting") or {}).get("reason") for p in pods
        }
        return pods if reasons <= {"ErrImagePull", "ImagePullBackOff"} and len(pods) == 2 else None

    tier.until("both pods failing to pull", pulling)
    tier.a_while()
    assert {p["status"]["phase"] for p in pulling() or []} == {"Pending"}
    job = the_job(tier, name)
    assert condition(job, "FailureTarget") is None and not job["status"].get("failed")
    assert condition(tier.trainjob(name), "Failed") is None
