"""One pure test per row of docs/mapping.md: recorded object dicts in, ObjectView out.

The dicts carry the exact strings the Trainer, JobSet, Job controller, kubelet and Kueue
write (dispatch-kubeflow/docs/research.md §3). No cluster, no client: this is the classifier alone.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from dispatch import Cause, CauseKind, Execution, Phase, Provenance
from dispatch_kubeflow import tags
from dispatch_kubeflow.classify import TABLE, Facts, classify, match, read, render_markdown
from dispatch_kubeflow.endings import LAUNCH_REASONS
from dispatch_kubeflow.evidence import Evidence, group

NAME, NS, JOB_ID = "train-abc-1", "research", "job-7"
T0, T1, T2 = "2026-05-01T10:00:00Z", "2026-05-01T10:00:05Z", "2026-05-01T10:00:09Z"


def at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def c(
    ctype: str, status: str = "True", reason: str = "", message: str = "", when: str = T0
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
    }


def trainjob(
    *conds: dict[str, Any],
    suspend: bool = False,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    deleting: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": NAME,
        "namespace": NS,
        "uid": "tj-uid",
        "creationTimestamp": T0,
        "labels": {**tags.labels(JOB_ID, 1), **(labels or {})},
        "annotations": {tags.JOB_ID: JOB_ID, tags.GATE: "open", **(annotations or {})},
    }
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "spec": {"suspend": suspend, "runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": list(conds)},
    }


def jobset(*conds: dict[str, Any], restarts: int = 0) -> dict[str, Any]:
    return {
        "kind": "JobSet",
        "metadata": {"name": NAME, "namespace": NS, "labels": tags.labels(JOB_ID, 1)},
        "spec": {},
        "status": {"restarts": restarts, "conditions": list(conds)},
    }


def job(*conds: dict[str, Any], attempt: int = 0) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {
            "name": f"{NAME}-node-0",
            "namespace": NS,
            "labels": {
                **tags.labels(JOB_ID, 1),
                tags.JOBSET_NAME: NAME,
                tags.RESTART_ATTEMPT: str(attempt),
            },
        },
        "spec": {},
        "status": {"conditions": list(conds)},
    }


def pod(
    index: int = 0,
    *,
    phase: str = "Running",
    node: str | None = "gpu-node-0",
    state: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    conds: tuple[dict[str, Any], ...] = (),
    attempt: int = 0,
    reason: str | None = None,
    deleting: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"{NAME}-node-0-{index}-x{index}",
        "namespace": NS,
        "labels": {
            **tags.labels(JOB_ID, 1),
            tags.JOBSET_NAME: NAME,
            tags.RESTART_ATTEMPT: str(attempt),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = deleting
    cs: dict[str, Any] = {"name": "node", "state": state or {"running": {"startedAt": T0}}}
    if last:
        cs["lastState"] = last
    status: dict[str, Any] = {
        "phase": phase,
        "startTime": T0,
        "conditions": list(conds),
        "containerStatuses": [cs],
    }
    if reason:
        status["reason"] = reason
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def node(name: str = "gpu-node-0", ready: str = "True") -> dict[str, Any]:
    cond = (
        c("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        if ready == "True"
        else c("Ready", ready, "NodeStatusUnknown", "Kubelet stopped posting node status.", T1)
    )
    return {"metadata": {"name": name}, "status": {"conditions": [cond]}}


def workload(*conds: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"trainjob-{NAME}-3f2a1", "labels": {tags.KUEUE_JOB_UID: "tj-uid"}},
        "spec": {"active": True},
        "status": {"conditions": list(conds)},
    }


def terminated(reason: str, code: int, when: str = T1) -> dict[str, Any]:
    return {"terminated": {"reason": reason, "exitCode": code, "finishedAt": when}}


def see(
    tj: dict[str, Any] | None = None,
    *,
    js: dict[str, Any] | None = None,
    jobs: tuple[dict[str, Any], ...] = (),
    pods: tuple[dict[str, Any], ...] = (),
    nodes: tuple[dict[str, Any], ...] = (node(),),
    wl: dict[str, Any] | None = None,
):  # type: ignore[no-untyped-def]
    ev = Evidence(
        job_id=JOB_ID,
        submission=1,
        name=NAME,
        namespace=NS,
        trainjob=tj,
        jobset=js,
        jobs=list(jobs),
        pods=list(pods),
        nodes={n["metadata"]["name"]: n for n in nodes},
        workload=wl,
    )
    return classify(ev)


FAILED_JOBS = c(
    "Failed",
    reason="FailedJobs",
    message=f"jobset failed due to one or more job failures (first failed job: {NAME}-node-0)",
    when=T2,
)


# -- endings -------------------------------------------------------------------------


def test_complete_is_ended_none() -> None:
    """S-19: the TrainJob's Complete condition ends the object with cause none."""
    view = see(
        trainjob(c("Complete", reason="AllJobsCompleted", message="jobset completed successfully"))
    )
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.NONE and view.cause.exit_code == 0
    assert view.cause.provenance is Provenance.APPLICATION
    assert view.cause.detail == "AllJobsCompleted: jobset completed successfully"
    assert view.object_id == f"{NS}/{NAME}" and view.job_id == JOB_ID and view.submission == 1


def test_trainjob_deadline_is_time_limit() -> None:
    view = see(
        trainjob(
            c("Failed", reason="DeadlineExceeded", message="TrainJob exceeded its active deadline")
        )
    )
    assert view.phase is Phase.ENDED
    assert view.cause.kind is CauseKind.TIME_LIMIT
    assert "TrainJob exceeded its active deadline" in view.cause.detail


def test_job_deadline_is_time_limit_although_trainjob_says_failed_jobs() -> None:
    """The TrainJob only says FailedJobs; the Job tells the runtime's deadline apart."""
    dead = job(
        c(
            "Failed",
            reason="DeadlineExceeded",
            message="Job was active longer than specified deadline",
            when=T1,
        )
    )
    view = see(trainjob(FAILED_JOBS), jobs=(dead,), pods=())
    assert view.cause.kind is CauseKind.TIME_LIMIT
    assert "Job was active longer than specified deadline" in view.cause.detail


def test_oom_in_current_state_is_out_of_memory() -> None:
    failed = pod(phase="Failed", state=terminated("OOMKilled", 137))
    view = see(
        trainjob(FAILED_JOBS),
        jobs=(job(c("Failed", reason="BackoffLimitExceeded")),),
        pods=(failed,),
    )
    assert view.cause.kind is CauseKind.OUT_OF_MEMORY and view.cause.exit_code == 137
    assert "OOMKilled" in view.cause.detail and view.cause.at == at(T1)


def test_oom_in_last_state_under_on_failure_is_out_of_memory() -> None:
    """JobSet defaults pods to OnFailure: the OOM is in lastState, state is CrashLoopBackOff."""
    crashing = pod(
        phase="Running",
        state={"waiting": {"reason": "CrashLoopBackOff"}},
        last=terminated("OOMKilled", 137),
    )
    view = see(
        trainjob(FAILED_JOBS),
        jobs=(job(c("Failed", reason="BackoffLimitExceeded")),),
        pods=(crashing,),
    )
    assert view.cause.kind is CauseKind.OUT_OF_MEMORY
    assert "lastState.terminated reason=OOMKilled" in view.cause.detail


def test_exit_code_is_non_zero_exit_from_the_application() -> None:
    failed = pod(phase="Failed", state=terminated("Error", 3))
    view = see(trainjob(FAILED_JOBS), pods=(failed,))
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT
    assert view.cause.exit_code == 3 and view.cause.provenance is Provenance.APPLICATION


@pytest.mark.parametrize("reason", ["PreemptionByScheduler", "EvictionByEvictionAPI"])
def test_disruption_target_preemption_outranks_its_exit_code(reason: str) -> None:
    taken = pod(
        phase="Failed",
        state=terminated("Error", 143),
        conds=(
            c(
                "DisruptionTarget",
                reason=reason,
                message="preempting to accommodate a higher priority pod",
            ),
        ),
    )
    view = see(trainjob(FAILED_JOBS), pods=(taken,))
    assert view.cause.kind is CauseKind.PREEMPTED
    assert reason in view.cause.detail and view.cause.exit_code is None


@pytest.mark.parametrize(
    ("ctype", "reason", "kind"),
    [
        ("TerminationTarget", "WorkloadEvictedDueToPreempted", CauseKind.PREEMPTED),
        ("DisruptionTarget", "WorkloadEvictedDueToPreempted", CauseKind.PREEMPTED),
        ("TerminationTarget", "WorkloadEvictedDueToNodeFailures", CauseKind.NODE_LOST),
    ],
)
def test_kueue_eviction_marked_on_the_pod(ctype: str, reason: str, kind: CauseKind) -> None:
    """Kueue marks an evicted workload's pods (TerminationTarget, DisruptionTarget before)."""
    taken = pod(
        phase="Failed",
        state=terminated("Error", 137),
        conds=(
            c(ctype, reason=reason, message="Preempted to accommodate a higher priority Workload"),
        ),
    )
    view = see(trainjob(FAILED_JOBS), pods=(taken,))
    assert view.cause.kind is kind and reason in view.cause.detail


def test_kueue_eviction_for_node_failures_is_pending_node_lost() -> None:
    wl = workload(
        c(
            "Evicted",
            reason="NodeFailures",
            message="Workload was evicted as there was no replacement",
        )
    )
    view = see(trainjob(suspend=True, labels={tags.KUEUE_QUEUE: "team-a"}), wl=wl)
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.NODE_LOST


@pytest.mark.parametrize(
    ("status_reason", "kind"),
    [("Evicted", CauseKind.PREEMPTED), ("Terminated", CauseKind.NODE_LOST)],
)
def test_kubelet_termination_is_pressure_eviction_or_node_shutdown(
    status_reason: str, kind: CauseKind
) -> None:
    taken = pod(
        phase="Failed",
        reason=status_reason,
        state=terminated("Error", 137),
        conds=(
            c(
                "DisruptionTarget",
                reason="TerminationByKubelet",
                message="The node was low on resource: memory.",
            ),
        ),
    )
    assert see(trainjob(FAILED_JOBS), pods=(taken,)).cause.kind is kind


def test_unmapped_disruption_reason_is_unknown_verbatim() -> None:
    """S-4: a DisruptionTarget reason nobody mapped is unknown, never stretched."""
    taken = pod(
        phase="Failed",
        state=terminated("Error", 143),
        conds=(
            c(
                "DisruptionTarget",
                reason="DeletionBySomethingNew",
                message="a new controller did it",
            ),
        ),
    )
    view = see(trainjob(FAILED_JOBS), pods=(taken,))
    assert view.cause.kind is CauseKind.UNKNOWN
    assert "DeletionBySomethingNew: a new controller did it" in view.cause.detail


def test_pod_failure_policy_exit_message_without_pods_is_non_zero_exit() -> None:
    msg = (
        f"Container node for pod {NS}/{NAME}-node-0-0-abcde failed with exit code 3 "
        "matching FailJob rule at index 0"
    )
    view = see(
        trainjob(FAILED_JOBS), jobs=(job(c("Failed", reason="PodFailurePolicy", message=msg)),)
    )
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT and view.cause.exit_code == 3
    assert msg in view.cause.detail


def test_pod_failure_policy_disruption_message_without_pods_is_preempted() -> None:
    msg = (
        f"Pod {NS}/{NAME}-node-0-0-abcde has condition DisruptionTarget "
        "matching FailJob rule at index 0"
    )
    view = see(
        trainjob(FAILED_JOBS), jobs=(job(c("Failed", reason="PodFailurePolicy", message=msg)),)
    )
    assert view.cause.kind is CauseKind.PREEMPTED


def test_failed_jobs_with_no_evidence_left_is_unknown_not_guessed() -> None:
    """S-4: BackoffLimitExceeded with the pods gone says nothing about why: unknown."""
    view = see(
        trainjob(FAILED_JOBS),
        jobs=(
            job(
                c(
                    "Failed",
                    reason="BackoffLimitExceeded",
                    message="Job has reached the specified backoff limit",
                )
            ),
        ),
    )
    assert view.cause.kind is CauseKind.UNKNOWN
    assert FAILED_JOBS["message"] in view.cause.detail


# -- conditions that contradict the pods (each a row: unknown or alive, never a guess) --

COMPLETE = c("Complete", reason="AllJobsCompleted", message="jobset completed successfully")


def test_complete_and_failed_at_once_is_unknown_with_both_words_S4() -> None:
    view = see(trainjob(COMPLETE, FAILED_JOBS), js=jobset(), jobs=(job(),))
    assert TABLE[match(_facts(trainjob(COMPLETE, FAILED_JOBS)))].state == "Contradictory"
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.UNKNOWN
    assert "AllJobsCompleted" in view.cause.detail and "FailedJobs" in view.cause.detail


def test_complete_while_a_job_failed_is_unknown_not_success_S4() -> None:
    failed = job(c("Failed", reason="BackoffLimitExceeded", message="Job has reached the limit"))
    view = see(
        trainjob(COMPLETE),
        js=jobset(),
        jobs=(failed,),
        pods=(pod(0, phase="Failed", state=terminated("Error", 1)),),
    )
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.UNKNOWN, view.cause
    assert view.cause.detail == (
        "TrainJob Complete: AllJobsCompleted: jobset completed successfully; but Job "
        f"{NAME}-node-0 Failed: BackoffLimitExceeded: Job has reached the limit"
    )


def test_complete_while_a_pod_still_runs_waits_alive_S4() -> None:
    view = see(trainjob(COMPLETE), js=jobset(), jobs=(job(),), pods=(pod(0),))
    assert view.phase is Phase.RUNNING and view.alive
    assert view.cause is not None and view.cause.kind is CauseKind.UNKNOWN
    assert f"pod {NAME}-node-0-0-x0 is still Running" in view.cause.detail
    # the same pod being deleted is the end of a completed job, not a contradiction
    gone = see(trainjob(COMPLETE), js=jobset(), jobs=(job(),), pods=(pod(0, deleting=T2),))
    assert gone.phase is Phase.ENDED and gone.cause is not None
    assert gone.cause.kind is CauseKind.NONE


def test_failed_while_every_pod_succeeded_is_unknown_not_guessed_S4() -> None:
    done = terminated("Completed", 0)
    view = see(
        trainjob(FAILED_JOBS),
        js=jobset(),
        jobs=(job(c("Complete", reason="CompletionsReached")),),
        pods=(pod(0, phase="Succeeded", state=done), pod(1, phase="Succeeded", state=done)),
    )
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.UNKNOWN
    assert view.cause.detail == f"TrainJob: {FAILED_JOBS['reason']}: {FAILED_JOBS['message']}"


def _facts(tj: dict[str, Any]) -> Facts:
    return Facts(
        Evidence(job_id=JOB_ID, submission=1, name=NAME, namespace=NS, trainjob=tj, jobset=None,
                 jobs=[], pods=[], nodes={}, workload=None)
    )  # fmt: skip


def test_runtime_not_supported_is_launch_failed() -> None:
    view = see(
        trainjob(
            c(
                "Failed",
                reason="TrainingRuntimeNotSupported",
                message="unsupported runtime: ClusterTrainingRuntime.trainer.kubeflow.org",
            )
        )
    )
    assert view.phase is Phase.ENDED and view.cause.kind is CauseKind.LAUNCH_FAILED


def test_unmapped_trainjob_failure_reason_is_unknown_verbatim() -> None:
    """S-4."""
    view = see(trainjob(c("Failed", reason="QuotaWizardRejected", message="rejected at 03:14")))
    assert view.cause.kind is CauseKind.UNKNOWN
    assert view.cause.detail == "TrainJob: QuotaWizardRejected: rejected at 03:14"


def test_root_cause_is_the_earliest_failing_pod_not_those_killed_after_it() -> None:
    """The OOM on node 1 came first; the SIGTERMs (143) on nodes 0 and 2 followed it."""
    pods = (
        pod(0, phase="Failed", state=terminated("Error", 143, T2)),
        pod(1, phase="Failed", state=terminated("OOMKilled", 137, T1), node="gpu-node-1"),
        pod(2, phase="Failed", state=terminated("Error", 143, T2), node="gpu-node-2"),
    )
    view = see(
        trainjob(FAILED_JOBS), pods=pods, nodes=(node(), node("gpu-node-1"), node("gpu-node-2"))
    )
    assert view.cause.kind is CauseKind.OUT_OF_MEMORY
    execution = view.executions[-1]
    assert execution.cause == view.cause
    assert sorted(k.kind.value for k in execution.node_causes) == [
        "non-zero-exit",
        "non-zero-exit",
        "out-of-memory",
    ]
    assert execution.nodes == ("gpu-node-0", "gpu-node-1", "gpu-node-2")


# -- pending, gated, held ------------------------------------------------------------


@pytest.mark.parametrize("reason", sorted(LAUNCH_REASONS))
def test_container_that_cannot_start_is_pending_launch_failed(reason: str) -> None:
    """S-39: a pending pod never fails its Job; reported pending with the launch cause."""
    waiting = pod(
        phase="Pending", state={"waiting": {"reason": reason, "message": "the kubelet said so"}}
    )
    view = see(trainjob(), js=jobset(), jobs=(job(),), pods=(waiting,))
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.LAUNCH_FAILED
    assert f"{reason}: the kubelet said so" in view.cause.detail


def test_unschedulable_pod_is_pending_no_capacity() -> None:
    """S-39."""
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    waiting = pod(
        phase="Pending",
        node=None,
        state={"waiting": {"reason": "ContainerCreating"}},
        conds=(c("PodScheduled", "False", "Unschedulable", msg),),
    )
    view = see(trainjob(), js=jobset(), jobs=(job(),), pods=(waiting,))
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.NO_CAPACITY
    assert msg in view.cause.detail


def test_suspended_by_dispatch_gate_is_gated_not_held() -> None:
    """S-37: dispatch's own gate is Phase.GATED."""
    view = see(
        trainjob(
            c("Suspended", reason="Suspended", message="TrainJob is suspended"),
            suspend=True,
            annotations={tags.GATE: "closed"},
        )
    )
    assert view.phase is Phase.GATED and view.cause is None


def test_suspended_by_someone_else_is_held_with_their_words() -> None:
    """S-37: a hold dispatch did not place is held, cause held, scheduler's words."""
    view = see(
        trainjob(c("Suspended", reason="Suspended", message="TrainJob is suspended"), suspend=True)
    )
    assert view.phase is Phase.HELD and view.cause.kind is CauseKind.HELD
    assert view.cause.detail == "TrainJob: Suspended: TrainJob is suspended"


def test_kueue_waiting_for_quota_is_pending_no_capacity() -> None:
    wl = workload(
        c(
            "QuotaReserved",
            "False",
            "Pending",
            "couldn't assign flavors to pod set node: insufficient unused quota",
        )
    )
    view = see(trainjob(suspend=True, labels={tags.KUEUE_QUEUE: "team-a"}), wl=wl)
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.NO_CAPACITY
    assert "insufficient unused quota" in view.cause.detail


def test_kueue_eviction_by_preemption_is_pending_preempted() -> None:
    wl = workload(
        c("Evicted", reason="Preempted", message="Preempted to accommodate a workload"),
        c("QuotaReserved", "False", "Pending", "Preempted"),
    )
    view = see(trainjob(suspend=True, labels={tags.KUEUE_QUEUE: "team-a"}), wl=wl)
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.PREEMPTED
    assert "Preempted to accommodate a workload" in view.cause.detail


def test_kueue_maximum_execution_time_is_time_limit() -> None:
    wl = workload(
        c("Evicted", reason="DeactivatedDueToMaximumExecutionTimeExceeded", message="exceeded")
    )
    view = see(trainjob(suspend=True, labels={tags.KUEUE_QUEUE: "team-a"}), wl=wl)
    assert view.phase is Phase.ENDED and view.cause.kind is CauseKind.TIME_LIMIT


def test_kueue_deactivated_workload_is_held() -> None:
    wl = workload(c("Evicted", reason="Deactivated", message="The workload is deactivated"))
    view = see(trainjob(suspend=True, labels={tags.KUEUE_QUEUE: "team-a"}), wl=wl)
    assert view.phase is Phase.HELD and view.cause.kind is CauseKind.HELD


# -- alive ---------------------------------------------------------------------------


def test_running_pods_are_running_without_cause() -> None:
    view = see(
        trainjob(),
        js=jobset(),
        jobs=(job(),),
        pods=(pod(0), pod(1, node="gpu-node-1")),
        nodes=(node(), node("gpu-node-1")),
    )
    assert view.phase is Phase.RUNNING and view.cause is None
    assert view.executions[0].started_at == at(T0) and view.executions[0].cause is None


def test_created_without_pods_is_pending_without_cause() -> None:
    view = see(trainjob())
    assert view.phase is Phase.PENDING and view.cause is None and view.scheduler_state == "Created"


def test_pod_on_not_ready_node_is_running_node_lost() -> None:
    """S-26: inside the node-loss window the object runs with cause node-lost."""
    view = see(
        trainjob(), js=jobset(), jobs=(job(),), pods=(pod(),), nodes=(node(ready="Unknown"),)
    )
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.NODE_LOST
    assert "Kubelet stopped posting node status." in view.cause.detail and view.cause.at == at(T1)


def test_failure_target_with_pod_stuck_terminating_on_lost_node_is_node_lost() -> None:
    """The 'FailureTarget forever' case: the Job never gets Failed, the TrainJob looks running."""
    stuck = pod(
        conds=(
            c(
                "DisruptionTarget",
                reason="DeletionByTaintManager",
                message="Taint manager: deleting due to NoExecute taint",
            ),
        ),
        deleting=T1,
    )
    target = job(
        c(
            "FailureTarget",
            reason="BackoffLimitExceeded",
            message="Job has reached the specified backoff limit",
        )
    )
    view = see(
        trainjob(), js=jobset(), jobs=(target,), pods=(stuck,), nodes=(node(ready="Unknown"),)
    )
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.NODE_LOST


def test_failure_target_without_failed_and_no_pod_evidence_is_node_lost() -> None:
    """Without node access (RBAC) the FailureTarget alone still tells."""
    target = job(
        c(
            "FailureTarget",
            reason="BackoffLimitExceeded",
            message="Job has reached the specified backoff limit",
        )
    )
    stuck = pod(deleting=T1)
    view = see(trainjob(), js=jobset(), jobs=(target,), pods=(stuck,), nodes=())
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.NODE_LOST
    assert "FailureTarget without Failed" in view.cause.detail


# -- deletion ------------------------------------------------------------------------


def test_deleted_after_a_recorded_stop_carries_the_stop_cause() -> None:
    stop = Cause(
        kind=CauseKind.NODE_LOST, provenance=Provenance.ACTOR, actor="supervisor", detail="fence"
    )
    view = see(trainjob(deleting=T1, annotations={tags.STOP: stop.model_dump_json()}))
    assert view.phase is Phase.ENDED
    assert view.cause == Cause(
        kind=CauseKind.CANCELLED,
        provenance=Provenance.ACTOR,
        actor="supervisor",
        detail="stopped by dispatch (node-lost): fence",
        at=at(T1),
    )


def test_deleted_without_a_recorded_stop_is_unknown() -> None:
    view = see(trainjob(deleting=T1))
    assert view.phase is Phase.ENDED and view.cause.kind is CauseKind.UNKNOWN
    assert "without a stop recorded by dispatch" in view.cause.detail


def test_deleting_object_with_live_pods_stays_alive() -> None:
    """S-28: the fence counts an object ended only once its pods are gone."""
    view = see(trainjob(deleting=T1), pods=(pod(deleting=T1),))
    assert view.phase is Phase.RUNNING


def test_pods_left_by_a_vanished_trainjob_are_an_object_until_they_end() -> None:
    alive = see(None, pods=(pod(),))
    assert alive.phase is Phase.RUNNING
    gone = see(None, pods=(pod(phase="Failed", state=terminated("Error", 143)),))
    assert gone.phase is Phase.ENDED and gone.cause.kind is CauseKind.UNKNOWN


# -- native restart ------------------------------------------------------------------


def test_jobset_restart_reports_one_execution_per_attempt() -> None:
    """S-38, S-40: executions come from the JobSet's restarts; an earlier attempt's ending
    is read from the annotation dispatch wrote on the TrainJob, not from memory."""
    preempted = Cause(
        kind=CauseKind.PREEMPTED,
        provenance=Provenance.SCHEDULER,
        detail="PreemptionByScheduler",
        nodes=("gpu-node-3",),
    )
    kept = Execution(index=0, nodes=("gpu-node-3",), cause=preempted)
    view = see(
        trainjob(annotations={f"{tags.ATTEMPT_PREFIX}0": kept.model_dump_json()}),
        js=jobset(restarts=1),
        jobs=(job(attempt=1),),
        pods=(pod(attempt=1),),
    )
    assert view.phase is Phase.RUNNING
    assert [e.index for e in view.executions] == [0, 1]
    assert view.executions[0] == kept and view.executions[1].cause is None


def test_restart_whose_evidence_was_never_seen_is_unknown_with_jobset_words() -> None:
    js = jobset(
        c("RestartingJobSet", reason="DefaultFailurePolicy", message="restarting jobset"),
        restarts=1,
    )
    view = see(trainjob(), js=js, jobs=(job(attempt=1),), pods=(pod(attempt=1),))
    assert view.executions[0].cause.kind is CauseKind.UNKNOWN
    assert "DefaultFailurePolicy: restarting jobset" in view.executions[0].cause.detail


def test_failed_attempt_awaiting_restart_is_pending_with_ended_execution() -> None:
    """S-38: while waiting to run again the object is pending; the execution ended."""
    js = jobset(c("RestartingJobSet", reason="FailurePolicy_retry", message="restarting"))
    failed = pod(
        phase="Failed",
        state=terminated("Error", 143),
        conds=(c("DisruptionTarget", reason="PreemptionByScheduler", message="preempted"),),
    )
    ev_jobs = (job(c("Failed", reason="BackoffLimitExceeded")),)
    view = see(trainjob(), js=js, jobs=ev_jobs, pods=(failed,))
    assert view.phase is Phase.PENDING and view.scheduler_state == "Restarting"
    assert view.executions[-1].cause.kind is CauseKind.PREEMPTED
    ev = Evidence(
        job_id=JOB_ID,
        submission=1,
        name=NAME,
        namespace=NS,
        trainjob=trainjob(),
        jobset=js,
        jobs=list(ev_jobs),
        pods=[failed],
    )
    keep = read(ev)[1]
    assert list(keep) == [f"{tags.ATTEMPT_PREFIX}0"]
    assert Execution.model_validate_json(keep[f"{tags.ATTEMPT_PREFIX}0"]) == view.executions[-1]
    tj = trainjob(annotations=keep)
    assert read(Evidence(JOB_ID, 1, NAME, NS, tj, js, list(ev_jobs), [failed]))[1] == {}, (
        "written once"
    )


# -- grouping ------------------------------------------------------------------------


def test_group_matches_children_and_ignores_other_jobs() -> None:
    other = trainjob()
    other["metadata"].update(
        name="other", labels=tags.labels("job-8", 1), annotations={tags.JOB_ID: "job-8"}
    )
    found = group([trainjob(), other], [jobset()], [job()], [pod()], [node()], [], {JOB_ID})
    assert len(found) == 1
    ev = found[0]
    assert (ev.job_id, ev.submission, ev.name) == (JOB_ID, 1, NAME)
    assert ev.jobset is not None and len(ev.jobs) == 1 and len(ev.pods) == 1


def test_long_job_id_is_found_through_its_digest_label() -> None:
    long_id = "a/very long job id with spaces " * 4
    assert tags.job_label(long_id).startswith("h-")
    tj = trainjob()
    tj["metadata"].update(labels=tags.labels(long_id, 2), annotations={tags.JOB_ID: long_id})
    found = group([tj], [], [], [], [], [], {long_id})
    assert [(e.job_id, e.submission) for e in found] == [(long_id, 2)]


def test_stop_annotation_round_trips_through_json() -> None:
    stop = Cause(
        kind=CauseKind.NODE_LOST, provenance=Provenance.ACTOR, actor="supervisor", detail="fence"
    )
    assert Cause.model_validate(json.loads(stop.model_dump_json())) == stop


def test_every_row_of_the_mapping_doc_names_a_test_that_exists() -> None:
    """The table in docs/mapping.md and the tests cannot drift apart."""
    here = Path(__file__).parent
    named = re.findall(
        r"`(?:[\w.]+::)?(test_\w+)`", (here.parent / "docs" / "mapping.md").read_text()
    )
    defined = {
        name
        for path in here.glob("test_kubeflow_*.py")
        for name in re.findall(r"^def (test_\w+)", path.read_text(), re.MULTILINE)
    }
    assert len(named) >= 37
    assert sorted(set(named) - defined) == []


def test_docs_mapping_tables_are_the_tables_in_the_code() -> None:
    """The rendered tables in docs/mapping.md are the tables the classifier reads."""
    text = (Path(__file__).parents[1] / "docs" / "mapping.md").read_text()
    assert render_markdown() in text, (
        "docs/mapping.md is stale: python -m dispatch_kubeflow.classify"
    )


@pytest.mark.parametrize("restarts", [-1, 2**31 - 1, "2", 1.5, 0, "x"])
def test_restart_count_out_of_range_is_unknown_and_alive(restarts: object) -> None:
    """S-4: a restart count dispatch cannot believe is unknown with the count verbatim,
    and alive (never a second execution beside it); a plain count is read."""
    view = see(trainjob(), js=jobset(restarts=restarts), pods=(pod(),))  # type: ignore[arg-type]
    if restarts in (0, "2"):
        assert view.phase is Phase.RUNNING and view.cause is None
        assert len(view.executions) == int(restarts) + 1  # type: ignore[arg-type]
        return
    assert view.phase is Phase.RUNNING and view.scheduler_state == "Unreadable"
    assert view.cause.kind is CauseKind.UNKNOWN and repr(restarts) in view.cause.detail
    assert len(view.executions) == 1


# -- what the real controllers do (the live tier, docs/controllers.md) -------------------


def test_deadline_after_the_warning_is_time_limit_although_the_pods_exited_0() -> None:
    """S-45: the Trainer fails the TrainJob (DeadlineExceeded) at limit - warning and
    deletes its pods; a program that caught the warning, checkpointed and exited 0 still
    ended on the time limit, never succeeded."""
    done = pod(phase="Succeeded", state=terminated("Completed", 0))
    view = see(
        trainjob(
            c("Failed", reason="DeadlineExceeded", message="TrainJob exceeded its active deadline"),
            c("Complete", reason="AllJobsCompleted", message="jobset completed successfully"),
        ),
        pods=(done,),
    )
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.TIME_LIMIT
    assert view.executions[-1].cause is not None
    assert view.executions[-1].cause.kind is CauseKind.TIME_LIMIT


def test_pod_being_preempted_is_running_and_its_ending_kept() -> None:
    """The scheduler marks the victim DisruptionTarget and deletes it; while it terminates
    (its grace period: the warning) the TrainJob still runs, without a cause (only
    node-lost may ride on a running object, S-26), and the preemption is kept on the
    TrainJob for when the Job has deleted the pod (S-40)."""
    victim = pod(
        1,
        deleting=T1,
        conds=(
            c(
                "DisruptionTarget",
                reason="PreemptionByScheduler",
                message="default/urgent: preempting to accommodate a higher priority pod",
            ),
        ),
    )
    view, keep = read(
        Evidence(JOB_ID, 1, NAME, NS, trainjob=trainjob(), pods=[pod(0), victim], nodes={})
    )
    assert view.phase is Phase.RUNNING and view.cause is None
    kept = Execution.model_validate(json.loads(keep[f"{tags.ATTEMPT_PREFIX}0"]))
    assert kept.cause is not None and kept.cause.kind is CauseKind.PREEMPTED
    assert "PreemptionByScheduler" in kept.cause.detail and kept.cause.nodes == ("gpu-node-0",)


def _preemption_of_two_nodes() -> list[tuple[dict[str, Any], dict[str, Any], list[Any]]]:
    """What a 2-node TrainJob shows, look after look, while the scheduler preempts node 1:
    its pod is marked and deleted, ends (143), the Job's podFailurePolicy fails the Job and
    stops node 0 (143, no disruption of its own), the pods go, the TrainJob fails."""
    disruption = c(
        "DisruptionTarget",
        reason="PreemptionByScheduler",
        message="default-scheduler: preempting to accommodate a higher priority pod",
        when=T1,
    )
    words = f"Pod {NS}/{NAME}-node-0-1-x1 has condition DisruptionTarget matching FailJob rule"
    target = c("FailureTarget", reason="PodFailurePolicy", message=f"{words} at index 0", when=T1)
    failed = c("Failed", reason="PodFailurePolicy", message=f"{words} at index 0", when=T2)
    victim = pod(1, deleting=T1, conds=(disruption,))
    victim_ended = pod(
        1, phase="Failed", deleting=T1, state=terminated("Error", 143, T1), conds=(disruption,)
    )
    stopping = pod(0, deleting=T1)
    stopped = pod(0, phase="Failed", deleting=T1, state=terminated("Error", 143, T2))
    running, ended = trainjob(), trainjob(FAILED_JOBS)
    return [
        (running, job(), [pod(0), victim]),
        (running, job(), [pod(0), victim_ended]),
        (running, job(target), [stopping, victim_ended]),
        (running, job(target), [stopping]),
        (running, job(target), [stopped]),
        (running, job(target, failed), [stopped]),
        (ended, job(target, failed), [stopped]),
        (ended, job(target, failed), []),
    ]


@pytest.mark.parametrize("looks", range(1 << 6))
@pytest.mark.parametrize("last", [6, 7])
def test_preemption_reads_preempted_whichever_moments_are_seen_S42(looks: int, last: int) -> None:
    """S-42, S-40: a reader that saw any of the moments of a preemption (each kept
    ending written back on the TrainJob, as discovery does) reads the ended TrainJob as
    preempted: never the 143 of the node the Job stopped in its wake, whether the
    preempted pod, the stopped one, both or neither are still listed; with the scheduler's
    reason whenever the preempted pod was seen."""
    moments = _preemption_of_two_nodes()
    seen = [i for i in range(6) if looks >> i & 1] + [last]
    kept: dict[str, str] = {}
    view = None
    for i in seen:
        tj, j, pods = moments[i]
        tj = {**tj, "metadata": {**tj["metadata"]}}
        tj["metadata"]["annotations"] = {**tj["metadata"]["annotations"], **kept}
        view, keep = read(
            Evidence(JOB_ID, 1, NAME, NS, trainjob=tj, jobset=jobset(), jobs=[j], pods=pods)
        )
        kept.update(keep)
    assert view is not None and view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.PREEMPTED, view.cause.detail
    if looks & 0b11:
        assert "PreemptionByScheduler" in view.cause.detail


def test_ending_kept_on_the_trainjob_outlives_the_deleted_pods() -> None:
    """S-40: the Job controller deletes the pods it stops (a preempted pod, a crash-looping
    one once its backoff runs out); the ending dispatch kept on the TrainJob while they
    showed it outranks the Job's coarse words once they are gone."""
    victim = pod(
        deleting=T1,
        conds=(c("DisruptionTarget", reason="EvictionByEvictionAPI", message="Eviction API"),),
    )
    alive, keep = read(
        Evidence(JOB_ID, 1, NAME, NS, trainjob=trainjob(), pods=[pod(1), victim], nodes={})
    )
    assert alive.phase is Phase.RUNNING
    assert list(keep) == [f"{tags.ATTEMPT_PREFIX}0"]
    msg = f"Pod {NS}/{NAME}-node-0-0-x0 has condition DisruptionTarget matching FailJob rule"
    view = see(
        trainjob(FAILED_JOBS, annotations=keep),
        jobs=(job(c("Failed", reason="PodFailurePolicy", message=msg)),),
    )
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.PREEMPTED
    assert "EvictionByEvictionAPI" in view.cause.detail
    # the execution is the one kept (its nodes and start), not rebuilt from no pods (S-40)
    kept = Execution.model_validate(json.loads(keep[f"{tags.ATTEMPT_PREFIX}0"]))
    assert view.executions[-1] == kept and kept.nodes == ("gpu-node-0",)


def test_backoff_limit_exceeded_after_a_kept_crash_loop_is_its_exit_code() -> None:
    """Without dispatch's runtime copy (OnFailure, backoffLimit 6) the exit code is only
    in lastState while the container crash-loops; the Job then says BackoffLimitExceeded
    and deletes the pods. The kept ending keeps the exit code."""
    crashing = pod(state={"waiting": {"reason": "CrashLoopBackOff"}}, last=terminated("Error", 3))
    _, keep = read(Evidence(JOB_ID, 1, NAME, NS, trainjob=trainjob(), pods=[crashing], nodes={}))
    view = see(
        trainjob(FAILED_JOBS, annotations=keep),
        jobs=(
            job(
                c("FailureTarget", reason="BackoffLimitExceeded"),
                c("Failed", reason="BackoffLimitExceeded"),
            ),
        ),
    )
    assert view.cause is not None and view.cause.kind is CauseKind.NON_ZERO_EXIT
    assert view.cause.exit_code == 3


def test_stop_of_an_ended_trainjob_keeps_its_ending_while_it_is_deleted() -> None:
    """S-30: dispatch's stop of a TrainJob that had completed: the Foreground deletion keeps
    it listed (deletionTimestamp, the stop annotation) while the garbage collector removes
    its dependents; it ended succeeded, and the stop does not rewrite that as cancelled."""
    stop = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="kit", detail="x")
    done = trainjob(
        c("Complete", reason="AllJobsCompleted", message="jobset completed successfully"),
        annotations={tags.STOP: stop.model_dump_json()},
        deleting=T2,
    )
    view = see(done)
    assert view.phase is Phase.ENDED and view.cause is not None
    assert view.cause.kind is CauseKind.NONE and view.cause.exit_code == 0


# -- malformed objects ---------------------------------------------------------------


def _waiting(reason: object) -> dict[str, Any]:
    return {"waiting": {"reason": reason, "message": "Back-off pulling image"}}


@pytest.mark.parametrize(
    ("seen", "field", "raw"),
    [
        (  # a waiting reason that is a list (it raised TypeError once)
            lambda: see(trainjob(), pods=(pod(phase="Pending", state=_waiting(["ErrImagePull"])),)),
            "Pod train-abc-1-node-0-0-x0: status.containerStatuses[0].state.waiting.reason",
            "['ErrImagePull'], not text",
        ),
        (  # an exit code as text: read around, the root cause could be another pod's
            lambda: see(
                trainjob(FAILED_JOBS),
                pods=(pod(phase="Failed", state=terminated("Error", "1")),),  # type: ignore[arg-type]
            ),
            "status.containerStatuses[0].state.terminated.exitCode",
            "'1', not integer",
        ),
        (  # a condition status that is not text: whatever it says is not read as True
            lambda: see(trainjob(c("Complete", True))),  # type: ignore[arg-type]
            "TrainJob train-abc-1: status.conditions[0].status",
            "True, not text",
        ),
        (  # the TrainJob's status itself
            lambda: see({**trainjob(), "status": "Complete"}),
            "TrainJob train-abc-1: status",
            "'Complete', not an object",
        ),
        (  # malformed wins over what else the object shows: a Complete TrainJob
            lambda: see(trainjob(c("Complete")), pods=({**pod(), "spec": ["gpu-node-0"]},)),
            "Pod train-abc-1-node-0-0-x0: spec",
            "['gpu-node-0'], not an object",
        ),
        (  # a label that is not text (here the restart attempt a pod belongs to)
            lambda: see(
                trainjob(),
                pods=(pod(),),
                js={**jobset(), "metadata": {"name": NAME, "labels": {tags.JOB: 7}}},
            ),
            "JobSet train-abc-1: metadata.labels",
            "{'dispatch.dev/job': 7}, not text values",
        ),
        (  # the Node a pod runs on
            lambda: see(trainjob(), pods=(pod(),), nodes=({**node(), "status": 3},)),
            "Node gpu-node-0: status",
            "3, not an object",
        ),
        (  # the Kueue Workload
            lambda: see(
                trainjob(suspend=True), wl={**workload(), "status": {"conditions": [None]}}
            ),
            "Workload trainjob-train-abc-1-3f2a1: status.conditions[0]",
            "None, not an object",
        ),
    ],
)
def test_malformed_object_is_unknown_with_the_raw_value_and_alive_S4(
    seen: Any, field: str, raw: str
) -> None:
    """S-4, S-36: a field the tables read with the wrong type is unknown with the field and
    its raw value, never an exception and never a kind read around it; alive, so no second
    execution starts beside it."""
    view = seen()
    assert view.phase is Phase.RUNNING and view.scheduler_state == "Unreadable"
    assert view.cause.kind is CauseKind.UNKNOWN
    assert field in view.cause.detail and raw in view.cause.detail


def test_a_listed_item_that_is_not_an_object_makes_every_object_unknown_S4() -> None:
    """A pod list item that is a string (it raised AttributeError once) may be any wanted
    job's pod, the one that showed why it failed: no object is read around it."""
    failed = pod(phase="Failed", state=terminated("Error", 1))
    (clean,) = [
        classify(ev) for ev in group([trainjob(FAILED_JOBS)], [], [], [failed], [], [], {JOB_ID})
    ]
    assert clean.cause.kind is CauseKind.NON_ZERO_EXIT
    evs = group([trainjob(FAILED_JOBS)], [], [], [failed, "garbage"], [], [], {JOB_ID})
    (view,) = [classify(ev) for ev in evs]
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.UNKNOWN
    assert "a Pod listed cannot be told apart: Pod: the item is 'garbage'" in view.cause.detail


def test_an_unreadable_node_is_kept_on_the_objects_whose_node_is_not_listed_S4() -> None:
    """A Node that cannot be read may be the lost node under a live pod; it says nothing
    about an object whose pods' nodes are all listed."""
    evs = group([trainjob()], [], [], [pod()], [node("gpu-node-1"), 42], [], {JOB_ID})
    (view,) = [classify(ev) for ev in evs]
    assert view.cause.kind is CauseKind.UNKNOWN and "Node: the item is 42" in view.cause.detail
    evs = group([trainjob()], [], [], [pod()], [node("gpu-node-0"), 42], [], {JOB_ID})
    (view,) = [classify(ev) for ev in evs]
    assert view.phase is Phase.RUNNING and view.cause is None


def test_nothing_is_kept_of_a_malformed_object_S40() -> None:
    """An ending read around a wrongly typed field would outlive it on the TrainJob."""
    victim = pod(1, conds=(c("DisruptionTarget", reason="PreemptionByScheduler"),))
    other = pod(0, state={"terminated": {"reason": "Error", "exitCode": "1"}})
    view, keep = read(
        Evidence(JOB_ID, 1, NAME, NS, trainjob=trainjob(), pods=[other, victim], nodes={})
    )
    assert view.cause.kind is CauseKind.UNKNOWN and keep == {}
    _, keep = read(Evidence(JOB_ID, 1, NAME, NS, trainjob=trainjob(), pods=[victim], nodes={}))
    assert f"{tags.ATTEMPT_PREFIX}0" in keep


def test_a_raw_value_in_detail_is_cut_short_S4() -> None:
    view = see(trainjob(), pods=(pod(phase="Pending", state=_waiting(["x" * 100_000])),))
    assert view.cause.kind is CauseKind.UNKNOWN and len(view.cause.detail) < 400


# -- Kueue's Workload reasons (v0.17.0: apis/kueue/v1beta2/workload_types.go,
# -- pkg/scheduler/preemption/preemption.go preemptionMessage,
# -- pkg/controller/core/workload_controller.go, pkg/workload Evict/ReasonWithCause) -----

WL = f"trainjob-{NAME}-3f2a1"
QUEUED = {tags.KUEUE_QUEUE: "team-a"}
PREEMPTED = (
    "Preempted to accommodate a workload (UID: 5c1d, JobUID: 77aa) due to {why}; "
    "preemptor path: /cohort-a/team-b; preemptee path: /cohort-a/team-a"
)


def _row(wl: dict[str, object]) -> int:
    tj = trainjob(suspend=True, labels=QUEUED)
    ev = Evidence(JOB_ID, 1, NAME, NS, trainjob=tj, workload=wl)
    return match(Facts(ev))


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        ("InClusterQueue", "prioritization in the ClusterQueue"),
        ("InCohortReclamation", "reclamation within the cohort"),
        ("InCohortFairSharing", "Fair Sharing within the cohort"),
        ("InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing"),
    ],
)
def test_kueue_preemption_reasons_are_pending_preempted_with_kueue_words(
    reason: str, why: str
) -> None:
    message = PREEMPTED.format(why=why)
    wl = workload(
        c("Evicted", reason="Preempted", message=message),
        c("Preempted", reason=reason, message=message),
        c("QuotaReserved", "False", "Pending", message),
        c("Requeued", reason="Preempted", message=message),
    )
    view = see(trainjob(suspend=True, labels=QUEUED), wl=wl)
    assert view.phase is Phase.PENDING and view.cause is not None
    assert view.cause.kind is CauseKind.PREEMPTED
    assert view.cause.detail == f"Kueue workload {WL}: Evicted Preempted ({reason}): {message}"
    assert view.pending_reason == f"Kueue Evicted=True Preempted: {message}"
    assert TABLE[_row(wl)].reasons == (reason,)


EVICTIONS = [
    ("PodsReadyTimeout", f"Exceeded the PodsReady timeout {NS}/{WL}", Phase.PENDING,
     CauseKind.NO_CAPACITY),
    ("AdmissionCheck", "At least one admission check is false", Phase.PENDING,
     CauseKind.NO_CAPACITY),
    ("ClusterQueueStopped", "The ClusterQueue is stopped", Phase.HELD, CauseKind.HELD),
    ("LocalQueueStopped", "The LocalQueue is stopped", Phase.HELD, CauseKind.HELD),
    ("DeactivatedDueToRequeuingLimitExceeded",
     "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
     Phase.HELD, CauseKind.HELD),
    ("Deactivated", "The workload is deactivated", Phase.HELD, CauseKind.HELD),
    ("NodeFailures", "Workload evicted due to node failures", Phase.PENDING,
     CauseKind.NODE_LOST),
    ("SomethingNewer", "a reason of a later Kueue", Phase.PENDING, CauseKind.UNKNOWN),
]  # fmt: skip


@pytest.mark.parametrize(("reason", "message", "phase", "kind"), EVICTIONS)
def test_kueue_evictions_map_to_their_rows(
    reason: str, message: str, phase: Phase, kind: CauseKind
) -> None:
    """Each `Evicted` reason its own row; one this table does not know is `unknown` with
    Kueue's words, never a guess."""
    wl = workload(
        c("Evicted", reason=reason, message=message),
        c("QuotaReserved", "False", "Pending", message),
    )
    view = see(trainjob(suspend=True, labels=QUEUED), wl=wl)
    assert view.phase is phase and view.cause is not None and view.cause.kind is kind
    assert view.cause.detail == f"Kueue workload {WL}: Evicted {reason}: {message}"
    row = TABLE[_row(wl)]
    assert (
        row.reasons == ()
        if reason == "SomethingNewer"
        else reason in row.reasons or any(reason.startswith(r.rstrip("*")) for r in row.reasons)
    )
    if phase is Phase.PENDING:
        assert view.pending_reason == f"Kueue Evicted=True {reason}: {message}"


def test_kueue_requeued_workload_is_pending_with_kueue_words() -> None:
    wl = workload(
        c("Requeued", reason="BackoffFinished", message="The workload backoff was finished")
    )
    view = see(trainjob(suspend=True, labels=QUEUED), wl=wl)
    assert view.phase is Phase.PENDING and view.cause is None
    assert (
        view.pending_reason
        == "Kueue Requeued=True BackoffFinished: The workload backoff was finished"
    )
    assert "requeued" in TABLE[_row(wl)].when


def test_kueue_waiting_for_quota_shows_kueue_words_as_the_pending_reason() -> None:
    message = (
        "couldn't assign flavors to pod set node: insufficient unused quota for "
        "nvidia.com/gpu in flavor default-flavor, 8 more needed"
    )
    wl = workload(c("QuotaReserved", "False", "Pending", message))
    view = see(trainjob(suspend=True, labels=QUEUED), wl=wl)
    assert view.cause is not None and view.cause.kind is CauseKind.NO_CAPACITY
    assert view.pending_reason == f"Kueue QuotaReserved=False Pending: {message}"


def test_queued_trainjob_without_a_workload_yet_says_so() -> None:
    view = see(trainjob(suspend=True, labels=QUEUED))
    assert view.phase is Phase.PENDING and view.cause is None
    assert view.pending_reason == "queued to Kueue LocalQueue team-a, no Workload yet"


def test_a_running_trainjob_has_no_pending_reason_from_an_old_eviction() -> None:
    """Re-admitted: `Evicted=False` ("Previously: ..."), the TrainJob no longer suspended."""
    wl = workload(
        c("Evicted", "False", "QuotaReserved", "Previously: Preempted to accommodate"),
        c("QuotaReserved", reason="QuotaReserved", message="Quota reserved in ClusterQueue a"),
        c("Admitted", reason="Admitted", message="The workload is admitted"),
    )
    view = see(trainjob(labels=QUEUED), wl=wl)
    assert view.cause is None and view.pending_reason is None


# -- Trainer 2.0 and 2.1: Jobs (and on 2.0 Pods) without dispatch labels ---------------


def _trainer_20(obj: dict[str, Any]) -> dict[str, Any]:
    """As Trainer 2.0 leaves a Job or Pod: only JobSet's own labels, no dispatch tag."""
    for key in tags.labels(JOB_ID, 1):
        obj["metadata"]["labels"].pop(key)
    return obj


@pytest.mark.parametrize(
    ("ending", "kind", "code"),
    [
        (terminated("Error", 3), CauseKind.NON_ZERO_EXIT, 3),
        (terminated("OOMKilled", 137), CauseKind.OUT_OF_MEMORY, 137),
    ],
)
def test_trainer_20_children_are_grouped_by_jobset_name_and_read_as_on_22(
    ending: dict[str, Any], kind: CauseKind, code: int
) -> None:
    """The TrainJob's FailedJobs hides the cause; the unlabelled pods found by their
    JobSet's name give the same kind and exit code as on 2.2."""
    failed = c(
        "Failed", reason="FailedJobs", message="jobset failed due to one or more job failures"
    )
    items = (
        [trainjob(failed)],
        [jobset()],
        [_trainer_20(job(c("Failed", reason="PodFailurePolicy", message="x")))],
        [_trainer_20(pod(phase="Failed", state=ending))],
    )
    (ev,) = group(*items, [node()], [], {JOB_ID})
    assert len(ev.jobs) == 1 and len(ev.pods) == 1
    view = classify(ev)
    assert view.phase is Phase.ENDED and view.cause is not None
    assert (view.cause.kind, view.cause.exit_code) == (kind, code)


def test_trainer_20_eviction_read_from_the_unlabelled_jobs_message_once_the_pod_is_gone() -> None:
    message = (
        f"Pod {NS}/{NAME}-node-0-0-x0 has condition DisruptionTarget matching FailJob rule at "
        "index 0"
    )
    failed = c(
        "Failed", reason="FailedJobs", message="jobset failed due to one or more job failures"
    )
    job_failed = c("Failed", reason="PodFailurePolicy", message=message)
    (ev,) = group(
        [trainjob(failed)], [jobset()], [_trainer_20(job(job_failed))], [], [], [], {JOB_ID}
    )
    view = classify(ev)
    assert view.cause is not None and view.cause.kind is CauseKind.PREEMPTED
    assert message in view.cause.detail


@pytest.mark.parametrize(
    "message", ["LocalQueue team-x doesn't exist", "ClusterQueue cq-a is inactive"]
)
def test_kueue_inadmissible_is_pending_launch_failed_with_kueue_words(message: str) -> None:
    wl = workload(c("QuotaReserved", "False", "Inadmissible", message))
    view = see(trainjob(suspend=True, labels=QUEUED), wl=wl)
    assert view.phase is Phase.PENDING and view.cause is not None
    assert view.cause.kind is CauseKind.LAUNCH_FAILED
    assert view.cause.detail == f"Kueue workload {WL}: QuotaReserved=False Inadmissible: {message}"
    assert view.pending_reason == f"Kueue QuotaReserved=False Inadmissible: {message}"
