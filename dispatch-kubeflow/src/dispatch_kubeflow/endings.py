"""How one pod, one Job and one restart attempt ended: THE pod table, as data.

A pod tells its ending through readings, in this order: its disruption conditions (who is
taking it away), then each container's ``state`` and ``lastState.terminated`` (how the
process ended), then its phase. Each reading goes through :data:`POD_TABLE`, first match
wins; a reading no row matches says nothing and the next one is read. So a disruption
outranks the exit code it caused (a preempted pod exits 143: it was preempted, it did not
fail). Every cause names the pod's node and its node rank (S-42).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dispatch.core.cause import Cause, root_cause
from dispatch.model.enums import CauseKind, Provenance

from dispatch_kubeflow.evidence import (
    Evidence,
    Obj,
    cond,
    container_statuses,
    make_cause,
    mapping,
    name_of,
    node_of,
    recorded_executions,
    said,
    status,
    task_rank,
    text,
    true,
)

K = CauseKind
SCH, APP = Provenance.SCHEDULER, Provenance.APPLICATION

#: Pod condition types that say who is taking the pod away.
DISRUPTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")
#: Container waiting reasons that mean the kubelet cannot start it (a Pending pod never
#: fails its Job, so these are reported pending; the core's launch window ends the wait).
LAUNCH_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "ImageInspectError",
        "RegistryUnavailable",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreStartHookError",
    }
)
_POLICY_EXIT = re.compile(r"failed with exit code (\d{1,9}) matching FailJob rule")
_POLICY_DISRUPTION = re.compile(r"has condition DisruptionTarget matching FailJob rule")
#: the pod a podFailurePolicy message names (``Pod NS/NAME has condition ...``,
#: ``Container C for pod NS/NAME failed with exit code ...``)
_POLICY_POD = re.compile(r"[Pp]od [^/\s]+/(\S+) (?:has condition|failed with exit code)")


@dataclass(frozen=True)
class Reading:
    """One thing a pod says about its ending."""

    source: str  # "disruption", "terminated" or "phase"
    reason: str
    words: str
    at: object
    exit_code: int | None = None
    current: bool = True  # terminated in ``state`` (not ``lastState``)
    pod_reason: str = ""


POD_CONDITIONS: Mapping[str, tuple[str, Callable[[Reading], bool]]] = {
    "any": ("always", lambda r: True),
    "node-shutdown": (
        "the pod's status.reason is `Terminated` (graceful node shutdown)",
        lambda r: r.pod_reason == "Terminated",
    ),
    "exit-0-now": (
        "exit code 0 in the container's current state",
        lambda r: r.exit_code == 0 and r.current,
    ),
    "exit-non-zero": ("a non-zero exit code", lambda r: bool(r.exit_code)),
    "phase-failed": ("the pod's phase is `Failed`", lambda r: r.reason == "Failed"),
}


@dataclass(frozen=True)
class PodRow:
    source: str
    reasons: tuple[str, ...]  # empty: any reason
    when: str
    kind: CauseKind
    provenance: Provenance
    why: str
    tests: tuple[str, ...] = ()

    def matches(self, r: Reading) -> bool:
        if r.source != self.source or (self.reasons and r.reason not in self.reasons):
            return False
        return POD_CONDITIONS[self.when][1](r)


#: THE pod table. Read top to bottom for each reading; the first row that matches decides.
POD_TABLE: tuple[PodRow, ...] = (
    PodRow("disruption", ("PreemptionByScheduler", "PreemptionByKubeScheduler",
                          "EvictionByEvictionAPI"), "any", K.PREEMPTED, SCH,
           "preempted or evicted; outranks the 143 it causes",
           ("test_disruption_target_preemption_outranks_its_exit_code",)),
    PodRow("disruption", ("DeletionByTaintManager", "DeletionByPodGC"), "any", K.NODE_LOST, SCH,
           "deleted because its node is gone (taint manager, pod GC)",
           ("test_failure_target_with_pod_stuck_terminating_on_lost_node_is_node_lost",)),
    PodRow("disruption", ("WorkloadEvictedDueToPreempted",), "any", K.PREEMPTED, SCH,
           "Kueue evicted its workload for preemption (TerminationTarget, or DisruptionTarget "
           "in older Kueue)", ("test_kueue_eviction_marked_on_the_pod",)),
    PodRow("disruption", ("WorkloadEvictedDueToNodeFailures",), "any", K.NODE_LOST, SCH,
           "Kueue evicted its workload for node failures",
           ("test_kueue_eviction_marked_on_the_pod",)),
    PodRow("disruption", ("TerminationByKubelet",), "node-shutdown", K.NODE_LOST, SCH,
           "the kubelet ended it for a graceful node shutdown",
           ("test_kubelet_termination_is_pressure_eviction_or_node_shutdown",)),
    PodRow("disruption", ("TerminationByKubelet",), "any", K.PREEMPTED, SCH,
           "the kubelet evicted it under node pressure (status.reason Evicted)",
           ("test_kubelet_termination_is_pressure_eviction_or_node_shutdown",)),
    PodRow("disruption", (), "any", K.UNKNOWN, SCH, "a disruption reason this table does not know",
           ("test_unmapped_disruption_reason_is_unknown_verbatim",)),
    PodRow("terminated", ("OOMKilled",), "any", K.OUT_OF_MEMORY, SCH,
           "the container was OOM-killed (in state, or lastState under OnFailure)",
           ("test_oom_in_current_state_is_out_of_memory",
            "test_oom_in_last_state_under_on_failure_is_out_of_memory")),
    PodRow("terminated", (), "exit-0-now", K.NONE, APP, "the container exited 0",
           ("test_complete_is_ended_none",)),
    PodRow("terminated", (), "exit-non-zero", K.NON_ZERO_EXIT, APP,
           "the container exited non-zero (exit code kept)",
           ("test_exit_code_is_non_zero_exit_from_the_application",)),
    PodRow("phase", (), "phase-failed", K.UNKNOWN, SCH,
           "phase Failed with no container ending: its reason and message verbatim",
           ("test_pods_left_by_a_vanished_trainjob_are_an_object_until_they_end",)),
)  # fmt: skip


def readings(pod: Obj) -> list[Reading]:
    st = status(pod)
    name = name_of(pod)
    found: list[Reading] = []
    for ctype in DISRUPTION_CONDITIONS:
        c = true(pod, ctype)
        if c is not None:
            found.append(
                Reading(
                    "disruption",
                    text(c.get("reason")),
                    f"pod {name}: {ctype} {said(c)}",
                    c.get("lastTransitionTime"),
                    pod_reason=text(st.get("reason")),
                )
            )
    for cs in container_statuses(pod):
        for where in ("state", "lastState"):
            term = mapping(mapping(cs.get(where)).get("terminated"))
            if not term:
                continue
            code = term.get("exitCode")
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            reason = text(term.get("reason"))
            words = (
                f"pod {name} container {text(cs.get('name'))}: "
                f"{where}.terminated reason={reason} exitCode={term.get('exitCode')}"
            )
            if term.get("message"):
                words += f" message={term.get('message')}"
            found.append(
                Reading("terminated", reason, words, term.get("finishedAt"), code, where == "state")
            )
    if st.get("phase") == "Failed":
        found.append(
            Reading(
                "phase",
                "Failed",
                f"pod {name}: phase Failed reason={text(st.get('reason'))} "
                f"message={text(st.get('message'))}",
                None,
            )
        )
    return found


def pod_cause(pod: Obj) -> Cause | None:
    """How one pod ended, or None while it has not; attributed to its node and rank."""
    node = node_of(pod)
    for r in readings(pod):
        row = next((row for row in POD_TABLE if row.matches(r)), None)
        if row is None:
            continue
        exit_code = r.exit_code if row.source == "terminated" else None
        return make_cause(
            row.kind,
            r.words,
            r.at,
            exit_code=exit_code,
            provenance=row.provenance,
            nodes=(node,) if node else (),
            rank=task_rank(pod),
        )
    return None


def node_problem(pod: Obj, nodes: Mapping[str, Obj]) -> Cause | None:
    """The pod's node is not Ready (Unknown/False): the node is lost under it."""
    name = node_of(pod)
    node = nodes.get(name) if name else None
    if node is None:
        return None
    ready = cond(node, "Ready")
    if ready is None or ready.get("status") == "True":
        return None
    return make_cause(
        K.NODE_LOST,
        f"node {name}: Ready={text(ready.get('status'))} {said(ready)}",
        ready.get("lastTransitionTime"),
        nodes=(name,),
        rank=task_rank(pod),
    )


def pod_pending_cause(pod: Obj) -> Cause | None:
    """Why a pod that has not started waits: launch failure, or no capacity."""
    name = name_of(pod)
    for cs in container_statuses(pod):
        waiting = mapping(mapping(cs.get("state")).get("waiting"))
        if text(waiting.get("reason")) in LAUNCH_REASONS:
            return make_cause(
                K.LAUNCH_FAILED,
                f"pod {name} container {text(cs.get('name'))}: {said(waiting)}",
                None,
                nodes=(node_of(pod),) if node_of(pod) else (),
                rank=task_rank(pod),
            )
    scheduled = cond(pod, "PodScheduled")
    if (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    ):
        return make_cause(
            K.NO_CAPACITY,
            f"pod {name}: PodScheduled=False {said(scheduled)}",
            scheduled.get("lastTransitionTime"),
        )
    return None


def job_cause(job: Obj) -> Cause | None:
    """What a failed Job says when its pods cannot: its deadline (it deleted the pods), or
    the podFailurePolicy message naming the exit code or the disruption."""
    failed = true(job, "Failed") or true(job, "FailureTarget")
    if failed is None:
        return None
    words = f"job {name_of(job)}: {said(failed)}"
    # when the Job failed: FailureTarget (Failed follows once the pods it stopped are gone)
    at = (true(job, "FailureTarget") or failed).get("lastTransitionTime")
    message = text(failed.get("message"))
    if failed.get("reason") == "DeadlineExceeded":
        return make_cause(K.TIME_LIMIT, words, at)
    if failed.get("reason") == "PodFailurePolicy":
        if m := _POLICY_EXIT.search(message):
            return make_cause(K.NON_ZERO_EXIT, words, at, exit_code=int(m.group(1)), provenance=APP)
        if _POLICY_DISRUPTION.search(message):
            return make_cause(K.PREEMPTED, words, at)
    return None


def failing_pod(job: Obj) -> str:
    """The pod whose failure matched the Job's podFailurePolicy FailJob rule, as the
    Job's condition names it; empty when it names none."""
    failed = true(job, "Failed") or true(job, "FailureTarget")
    if failed is None or failed.get("reason") != "PodFailurePolicy":
        return ""
    m = _POLICY_POD.search(text(failed.get("message")))
    return m.group(1) if m else ""


def ending_of(ev: Evidence, attempt: int) -> tuple[Cause | None, tuple[Cause, ...]]:
    """The cause that ended one restart attempt: a Job's deadline first (it deleted the
    pods), then the root cause across the pods (the earliest failure, not the pods killed
    in its wake: ``dispatch.root_cause``), then the ending dispatch kept on the TrainJob
    while the pods showed it (the Job controller deletes the pods it replaces or stops:
    a preempted pod, a crash-looping one once its backoff runs out), then what a Job's
    condition says (its podFailurePolicy message names the exit code or a disruption, not
    the disruption's reason). None when nothing ended. The second value is every pod's
    own ending.

    When the pod a podFailurePolicy names is gone, the pods that show a failure may be
    the ones the Job stopped in its wake (143, no disruption of their own: S-42): the
    gone pod's ending (kept, else the Job's words, timed at its FailureTarget) is then
    weighed with theirs by the root-cause rule, so a preemption reads the same whichever
    moment dispatch looks at."""
    jobs = ev.of_attempt("jobs", attempt)
    job_causes = [c for c in (job_cause(j) for j in jobs) if c is not None]
    for c in job_causes:
        if c.kind is K.TIME_LIMIT:
            return c, ()
    pods = ev.of_attempt("pods", attempt)
    causes = tuple(c for c in (pod_cause(p) for p in pods) if c)
    failures = tuple(c for c in causes if c.kind is not K.NONE)
    kept = recorded_executions(ev.trainjob).get(attempt)
    shown = {name_of(p) for p in pods}
    gone = [why for j in jobs if (n := failing_pod(j)) and n not in shown and (why := job_cause(j))]
    if failures and gone:
        first = kept.cause if kept is not None and kept.cause is not None else gone[0]
        return root_cause((first, *failures)), causes
    if failures:
        return root_cause(failures), causes
    if kept is not None and kept.cause is not None:
        return kept.cause, kept.node_causes
    if job_causes:
        return job_causes[0], causes
    return None, causes


def render_markdown() -> str:
    """The pod table as Markdown, for docs/mapping.md."""
    lines = [
        "| # | reading | reasons | when | cause kind | provenance | why | test |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(POD_TABLE):
        reasons = ", ".join(f"`{r}`" for r in row.reasons) or "any"
        tests = ", ".join(f"`{t}`" for t in row.tests)
        lines.append(
            f"| P{i} | {row.source} | {reasons} | {POD_CONDITIONS[row.when][0]} | "
            f"`{row.kind.value}` | {row.provenance.value} | {row.why} | {tests} |"
        )
    return "\n".join(lines) + "\n"
