"""THE mapping: the evidence chain of one TrainJob -> the object dispatch reports (S-19, S-4).

Pure: it reads plain object dicts as the API returns them (TrainJob, JobSet, Jobs, Pods,
Nodes, Kueue Workload) and returns an :class:`~dispatch.ObjectView`. What decides lives in
:data:`TABLE` (the object) and :data:`dispatch_kubeflow.endings.POD_TABLE` (one pod), read
top to bottom, first match wins, like ``dispatch_slurm.classify``. ``docs/mapping.md`` is
rendered from both (``python -m dispatch_kubeflow.classify``) and a test checks they agree.

Order of the rows: an object dispatch cannot read (a wrongly typed field,
:mod:`dispatch_kubeflow.shape`), then a deletion while pods still run, then the TrainJob's
terminal condition (authoritative but coarse: ``FailedJobs`` hides the cause, so the Jobs
and Pods say why; an ended object being deleted keeps its ending), then the other
deletions, then suspension (dispatch's gate, Kueue, someone else's hold), then the live
evidence (lost nodes, FailureTarget, restarts, pending reasons).

What a row says:

- ``when``: named facts (:data:`FACTS`) that must all hold;
- ``reasons``: the reason of the first fact's condition (``*`` at either end matches a
  prefix or suffix); empty means any;
- ``cause``: where the object's cause comes from (:data:`SOURCES`), and ``kind`` when the
  row, not the evidence, decides its kind;
- ``execution``: how the current restart attempt's execution reads: ``running``, ended
  with the object's ``cause``, or ended with the pods' root ``ending``.

Earlier restart attempts are executions too (S-38); their pods are gone after a JobSet
restart, so their endings are read from the annotations dispatch wrote on the TrainJob
while it could still see them (:func:`to_keep` writes them,
:func:`~dispatch_kubeflow.evidence.recorded_executions` reads them): what discovery
reports depends only on what the cluster shows (S-24, S-40), never on a process's memory.

Over 500 lines on purpose: the table, the facts and cause sources its rows name, and the
renderer of ``docs/mapping.md`` are read together; apart, a row's meaning would be in
another file than the row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from dispatch.core.cause import Cause
from dispatch.model.discovery import Execution, ObjectView
from dispatch.model.enums import CauseKind, Phase, Provenance

from dispatch_kubeflow import endings, shape, tags
from dispatch_kubeflow.endings import ending_of, node_problem, pod_cause, pod_pending_cause
from dispatch_kubeflow.evidence import (
    MAX_ATTEMPTS,
    Evidence,
    Obj,
    annotations_of,
    cond,
    labels,
    make_cause,
    mapping,
    meta,
    name_of,
    node_of,
    parse_time,
    pod_terminal,
    recorded_executions,
    restarts_of,
    said,
    small_int,
    status,
    text,
    true,
)

K = CauseKind
P, H, R, E, G = Phase.PENDING, Phase.HELD, Phase.RUNNING, Phase.ENDED, Phase.GATED

#: JobSet failure reasons the TrainJob copies; the cause is in the Jobs and Pods.
JOBSET_FAILURES = ("FailedJobs", "FailJobSetFailurePolicyAction", "ReachedMaxRestarts")


@dataclass
class Facts:
    """What one object's evidence says, each fact read once (lazily: discovery of many
    jobs reads only the facts the first matching row needs)."""

    ev: Evidence

    @cached_property
    def attempt(self) -> int | None:
        return small_int(restarts_of(self.ev.jobset))

    @cached_property
    def live(self) -> list[Obj]:
        return [p for p in self.ev.pods if not pod_terminal(p)]

    @cached_property
    def lost(self) -> Cause | None:
        for p in self.live:
            if (c := node_problem(p, self.ev.nodes)) is not None:
                return c
        for p in self.live:
            if (c := pod_cause(p)) is not None and c.kind is K.NODE_LOST:
                return c
        return None

    @cached_property
    def tj_meta(self) -> Obj:
        return meta(self.ev.trainjob)

    @cached_property
    def ending(self) -> tuple[Cause | None, tuple[Cause, ...]]:
        return ending_of(self.ev, self.attempt or 0)

    @cached_property
    def stuck(self) -> Obj | None:
        """A Job of this attempt marked FailureTarget whose Failed never comes."""
        for j in self.ev.of_attempt("jobs", self.attempt or 0):
            if (t := true(j, "FailureTarget")) is not None and not true(j, "Failed"):
                return t
        return None

    @cached_property
    def job_failed(self) -> Obj | None:
        """A Job of the current attempt whose own `Failed` condition holds."""
        for j in self.ev.of_attempt("jobs", self.attempt or 0):
            if true(j, "Failed") is not None:
                return j
        return None

    @cached_property
    def running_pod(self) -> Obj | None:
        """A pod that runs and is not being deleted."""
        for p in self.live:
            if status(p).get("phase") == "Running" and not meta(p).get("deletionTimestamp"):
                return p
        return None

    @cached_property
    def malformed(self) -> str | None:
        return self.ev.malformed()

    @cached_property
    def pending(self) -> list[Cause]:
        return [c for p in self.live if (c := pod_pending_cause(p)) is not None]

    def reason(self, fact: str) -> str:
        of = REASON_OF.get(fact)
        c = of(self) if of is not None else None
        return text(c.get("reason")) if c is not None else ""


def _failed_attempt(f: Facts) -> bool:
    current = f.ending[0]
    return current is not None and current.kind is not K.NONE


FACTS: Mapping[str, tuple[str, Callable[[Facts], bool]]] = {
    "malformed": (
        "a field the tables read has the wrong type (`shape.KINDS`) in the TrainJob, its "
        "JobSet, Jobs, Pods, Workload or its pods' Nodes, or a listed item whose owner "
        "cannot be read may be its",
        lambda f: f.malformed is not None,
    ),
    "restarts-unreadable": (
        f"the JobSet's `status.restarts` is not an integer in 0..{MAX_ATTEMPTS}",
        lambda f: f.attempt is None,
    ),
    "deleting": (
        "the TrainJob is gone or has a `deletionTimestamp`",
        lambda f: f.ev.trainjob is None or bool(f.tj_meta.get("deletionTimestamp")),
    ),
    "live-pods": ("a pod has not ended (phase not Succeeded/Failed)", lambda f: bool(f.live)),
    "stop-recorded": (
        f"the TrainJob carries the `{tags.STOP}` annotation dispatch's stop wrote",
        lambda f: bool(annotations_of(f.ev.trainjob).get(tags.STOP)),
    ),
    "complete": ("TrainJob `Complete=True`", lambda f: true(f.ev.trainjob, "Complete") is not None),
    "failed": ("TrainJob `Failed=True`", lambda f: true(f.ev.trainjob, "Failed") is not None),
    "job-failed": (
        "a Job of the current attempt has `Failed=True`",
        lambda f: f.job_failed is not None,
    ),
    "pod-runs": (
        "a pod is `Running` and not being deleted",
        lambda f: f.running_pod is not None,
    ),
    "pods-say-why": (
        "the current attempt's Jobs or Pods show a failure (`endings.ending_of`)",
        _failed_attempt,
    ),
    "suspended": (
        "TrainJob `spec.suspend=true`",
        lambda f: (
            mapping(f.ev.trainjob.get("spec") if f.ev.trainjob else None).get("suspend") is True
        ),
    ),
    "gate-closed": (
        f"annotation `{tags.GATE}=closed` (dispatch's gate, S-37)",
        lambda f: annotations_of(f.ev.trainjob).get(tags.GATE) == "closed",
    ),
    "evicted": ("the Kueue Workload has `Evicted=True`", lambda f: _evicted(f) is not None),
    "kueue-preempted": (
        "the Kueue Workload has `Preempted=True` (its reason: why the preemptor could take it)",
        lambda f: true(f.ev.workload, "Preempted") is not None,
    ),
    "requeued": (
        "the Kueue Workload has `Requeued=True` (queued again after an eviction, a backoff, "
        "a reactivation or a restarted queue)",
        lambda f: true(f.ev.workload, "Requeued") is not None,
    ),
    "workload": ("a Kueue Workload belongs to it", lambda f: f.ev.workload is not None),
    "quota-refused": (
        "the Workload has `QuotaReserved=False`",
        lambda f: (
            (c := cond(f.ev.workload, "QuotaReserved")) is not None and c.get("status") == "False"
        ),
    ),
    "queue-label": (
        f"the TrainJob has the label `{tags.KUEUE_QUEUE}` (Kueue has not made a Workload yet)",
        lambda f: bool(labels(f.ev.trainjob).get(tags.KUEUE_QUEUE)),
    ),
    "node-lost": (
        "a live pod's Node has `Ready`≠`True`, or a live pod is being deleted for node loss",
        lambda f: f.lost is not None,
    ),
    "failure-target-stuck": (
        "a Job of the current attempt has `FailureTarget=True` without `Failed`",
        lambda f: f.stuck is not None,
    ),
    "no-ending": (
        "no pod or Job of the current attempt shows an ending",
        lambda f: f.ending[0] is None,
    ),
    "restarting": (
        "the JobSet has `RestartingJobSet=True`, or a Job of the attempt `Failed=True`",
        lambda f: (
            true(f.ev.jobset, "RestartingJobSet") is not None
            or any(true(j, "Failed") for j in f.ev.of_attempt("jobs", f.attempt or 0))
        ),
    ),
    "cannot-start": (
        "a pod's container waits with a reason in `endings.LAUNCH_REASONS`",
        lambda f: any(c.kind is K.LAUNCH_FAILED for c in f.pending),
    ),
    "unschedulable": ("a pod has `PodScheduled=False/Unschedulable`", lambda f: bool(f.pending)),
    "pods-running": (
        "a live pod is `Running`",
        lambda f: any(status(p).get("phase") == "Running" for p in f.live),
    ),
}


def _evicted(f: Facts) -> Obj | None:
    return true(f.ev.workload, "Evicted")


REASON_OF: Mapping[str, Callable[[Facts], Obj | None]] = {
    "failed": lambda f: true(f.ev.trainjob, "Failed"),
    "evicted": _evicted,
    "kueue-preempted": lambda f: true(f.ev.workload, "Preempted"),
    "requeued": lambda f: true(f.ev.workload, "Requeued"),
    "quota-refused": lambda f: cond(f.ev.workload, "QuotaReserved"),
}


def _deleted(f: Facts) -> Cause:
    when = f.tj_meta.get("deletionTimestamp")
    return make_cause(
        K.UNKNOWN,
        f"TrainJob {f.ev.namespace}/{f.ev.name} was deleted"
        + (f" at {when}" if when else "")
        + " without a stop recorded by dispatch",
        when,
    )


def _stop(f: Facts) -> Cause:
    """The stop dispatch recorded on the object before deleting it: the object was
    cancelled by an actor (dispatch, on behalf of whoever asked), whatever the reason the
    stop gave (a cancel, the node-loss fence, a duplicate); the reason stays in ``detail``."""
    raw = annotations_of(f.ev.trainjob).get(tags.STOP)
    when = f.tj_meta.get("deletionTimestamp")
    try:
        stop = Cause.model_validate(json.loads(text(raw)))
    except (ValueError, TypeError, RecursionError):
        return make_cause(K.UNKNOWN, f"unreadable {tags.STOP} annotation: {shape.raw(raw)}", when)
    detail = f"stopped by dispatch ({stop.kind.value})" + (
        f": {stop.detail}" if stop.detail else ""
    )
    return Cause(
        kind=K.CANCELLED,
        provenance=Provenance.ACTOR,
        actor=stop.actor or "dispatch",
        detail=detail,
        at=parse_time(when) or stop.at,
    )


def _words(c: Obj | None, prefix: str) -> Cause | None:
    """A condition's own words behind what it is on; the row gives the kind."""
    if c is None:
        return None
    return make_cause(K.UNKNOWN, f"{prefix}{said(c)}", c.get("lastTransitionTime"))


def _trainjob_failed(f: Facts) -> Cause | None:
    return _words(true(f.ev.trainjob, "Failed"), "TrainJob: ")


def _workload_evicted(f: Facts) -> Cause | None:
    return _words(_evicted(f), f"Kueue workload {name_of(f.ev.workload)}: Evicted ")


def _kueue_preempted(f: Facts) -> Cause | None:
    """Kueue's preemption: the Evicted condition's message (it names the preemptor's
    Workload and job uids and the queues' paths) with the Preempted condition's reason."""
    evicted, preempted = _evicted(f), true(f.ev.workload, "Preempted")
    if evicted is None:
        return None
    why = text((preempted or {}).get("reason"))
    words = f"Kueue workload {name_of(f.ev.workload)}: Evicted {text(evicted.get('reason'))}"
    words += f" ({why})" if why else ""
    message = text(evicted.get("message"))
    return make_cause(
        K.PREEMPTED, f"{words}: {message}" if message else words, evicted.get("lastTransitionTime")
    )


def _requeued(f: Facts) -> Cause | None:
    return _words(
        true(f.ev.workload, "Requeued"), f"Kueue workload {name_of(f.ev.workload)}: Requeued "
    )


def kueue_pending_reason(f: Facts) -> str | None:
    """Kueue's words for why a suspended, not admitted TrainJob waits (``watch`` shows
    them): its Workload's eviction, else its `QuotaReserved=False` condition, else its
    `Requeued` condition; or that no Workload exists yet for the queue it was sent to."""
    tj = f.ev.trainjob
    if tj is None or mapping(tj.get("spec")).get("suspend") is not True:
        return None
    wl = f.ev.workload
    if wl is None:
        queue = text(labels(tj).get(tags.KUEUE_QUEUE))
        return f"queued to Kueue LocalQueue {queue}, no Workload yet" if queue else None
    for ctype, state in (("Evicted", "True"), ("QuotaReserved", "False"), ("Requeued", "True")):
        c = cond(wl, ctype)
        if c is not None and c.get("status") == state and said(c):
            return f"Kueue {ctype}={state} {said(c)}"
    return None


def _quota(f: Facts) -> Cause | None:
    words = f"Kueue workload {name_of(f.ev.workload)}: QuotaReserved=False "
    return _words(cond(f.ev.workload, "QuotaReserved"), words)


def _complete(f: Facts) -> Cause | None:
    done = true(f.ev.trainjob, "Complete")
    if done is None:
        return None
    return make_cause(
        K.NONE,
        said(done),
        done.get("lastTransitionTime"),
        exit_code=0,
        provenance=Provenance.APPLICATION,
    )


def _suspended(f: Facts) -> Cause:
    c = cond(f.ev.trainjob, "Suspended")
    words = f"TrainJob: {said(c)}" if c else "TrainJob: spec.suspend=true"
    return make_cause(K.HELD, words, (c or {}).get("lastTransitionTime"))


def _stuck(f: Facts) -> Cause | None:
    if f.stuck is None:
        return None
    return make_cause(
        K.UNKNOWN,
        f"job: FailureTarget without Failed: {said(f.stuck)}",
        f.stuck.get("lastTransitionTime"),
    )


def _restarts_unreadable(f: Facts) -> Cause:
    return make_cause(
        K.UNKNOWN,
        f"JobSet {f.ev.name}: status.restarts={shape.raw(restarts_of(f.ev.jobset))} is not a "
        f"restart count dispatch can read (0..{MAX_ATTEMPTS})",
        None,
    )


def _contradiction(f: Facts) -> Cause | None:
    """The TrainJob's `Complete` condition beside what says otherwise, both verbatim: the
    Failed condition, a failed Job of the attempt, or a pod that still runs."""
    done = true(f.ev.trainjob, "Complete")
    if done is None:
        return None
    failed = true(f.ev.trainjob, "Failed")
    if failed is not None:
        other = f"TrainJob Failed: {said(failed)}"
    elif f.job_failed is not None:
        failed = true(f.job_failed, "Failed") or {}
        other = f"Job {name_of(f.job_failed)} Failed: {said(failed)}"
    elif f.running_pod is not None:
        other = f"pod {name_of(f.running_pod)} is still Running"
    else:
        return None
    return make_cause(
        K.UNKNOWN,
        f"TrainJob Complete: {said(done)}; but {other}",
        done.get("lastTransitionTime"),
    )


def _malformed(f: Facts) -> Cause:
    return make_cause(K.UNKNOWN, f"cannot read {f.malformed}", None)


SOURCES: Mapping[str, tuple[str, Callable[[Facts], Cause | None]]] = {
    "malformed": (
        f"the wrongly typed field, its path and its raw value (cut to {shape.MAX_RAW} characters)",
        _malformed,
    ),
    "restarts": ("the JobSet's restart count, verbatim", _restarts_unreadable),
    "lost": (
        "the lost node's `Ready` condition (or the pod's disruption), node named",
        lambda f: f.lost,
    ),
    "stop": (f"the `{tags.STOP}` annotation: cancelled, by its actor", _stop),
    "deleted": ('"TrainJob … was deleted without a stop recorded by dispatch"', _deleted),
    "complete": ("the `Complete` condition's words, exit 0", _complete),
    "contradiction": (
        "`TrainJob Complete: …; but …`: the `Complete` condition's words and what "
        "contradicts it (the `Failed` condition's, the Job's, or the running pod's name)",
        _contradiction,
    ),
    "trainjob-failed": (
        "`TrainJob: Reason: message` of its `Failed` condition",
        _trainjob_failed,
    ),
    "ending": ("the root cause of the current attempt's pods and Jobs", lambda f: f.ending[0]),
    "evicted": (
        "`Kueue workload W: Evicted Reason: message`",
        _workload_evicted,
    ),
    "quota": (
        "`Kueue workload W: QuotaReserved=False Reason: message`",
        _quota,
    ),
    "kueue-preempted": (
        "`Kueue workload W: Evicted Preempted (<Preempted reason>): message`, the message "
        "verbatim (it names the preemptor's Workload and job uids)",
        _kueue_preempted,
    ),
    "requeued": ("`Kueue workload W: Requeued Reason: message`", _requeued),
    "suspended": ("the TrainJob's `Suspended` condition (or `spec.suspend=true`)", _suspended),
    "failure-target": ("the Job's `FailureTarget` words", _stuck),
    "cannot-start": (
        "the waiting container's reason",
        lambda f: next((c for c in f.pending if c.kind is K.LAUNCH_FAILED), None),
    ),
    "unschedulable": (
        "the pod's `PodScheduled` words",
        lambda f: f.pending[0] if f.pending else None,
    ),
}


@dataclass(frozen=True)
class Row:
    when: tuple[str, ...]
    phase: Phase
    state: str
    cause: str | None
    kind: CauseKind | None
    execution: str  # "running", "cause" or "ending"
    why: str
    reasons: tuple[str, ...] = ()
    tests: tuple[str, ...] = field(default=())
    #: the Trainer versions whose objects can reach this row (all that dispatch sends to,
    #: unless the row reads a field only later versions have)
    trainer: str = "2.0, 2.1, 2.2"

    def matches(self, f: Facts) -> bool:
        if not all(FACTS[name][1](f) for name in self.when):
            return False
        if not self.reasons:
            return True
        reason = f.reason(self.when[0])
        return any(_reason_matches(p, reason) for p in self.reasons)


def _reason_matches(pattern: str, reason: str) -> bool:
    if pattern.endswith("*"):
        return reason.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return reason.endswith(pattern[1:])
    return reason == pattern


#: THE object table. Read top to bottom; the first row that matches decides.
TABLE: tuple[Row, ...] = (
    # -- unreadable ---------------------------------------------------------------------
    Row(("malformed",), R, "Unreadable", "malformed", None, "running",
        "a malformed object: what it means is lost, whatever else it shows, so it is "
        "unknown with the field's raw value, kept alive so no second execution starts "
        "beside it (S-4, S-36)",
        tests=("test_malformed_object_is_unknown_with_the_raw_value_and_alive_S4",
               "test_wrongly_typed_answers_give_unknown_never_an_exception_S4")),
    # -- deletion -----------------------------------------------------------------------
    Row(("deleting", "live-pods"), R, "Terminating", "lost", None, "cause",
        "deleting (or gone) while a pod still runs: alive, so the gate's fence waits (S-28); "
        "node-lost if on a lost node",
        tests=("test_deleting_object_with_live_pods_stays_alive",
               "test_pods_left_by_a_vanished_trainjob_are_an_object_until_they_end")),
    # -- terminal conditions ------------------------------------------------------------
    Row(("failed",), E, "Failed", "trainjob-failed", K.TIME_LIMIT, "cause",
        "the TrainJob's activeDeadlineSeconds (Trainer ≥ 2.2), whatever the pods' exit codes: "
        "a program that caught the warning and exited 0 still ended on the time limit (S-45)",
        reasons=("DeadlineExceeded",),
        tests=("test_trainjob_deadline_is_time_limit",
               "test_deadline_after_the_warning_is_time_limit_although_the_pods_exited_0"),
        trainer="2.2"),
    # the TrainJob's conditions against its own Jobs and Pods: when they disagree, the
    # object is unknown with both sides' words (or, while a pod runs, alive), never the
    # ending one side claims; `Failed` DeadlineExceeded beside `Complete` is no
    # contradiction: the row above (a program that exited 0 ran out of time, S-45)
    Row(("complete", "failed"), E, "Contradictory", "contradiction", K.UNKNOWN, "cause",
        "`Complete` and `Failed` (for another reason than the deadline above) at once: "
        "unknown with both conditions' words, never one of them picked (S-4)",
        tests=("test_complete_and_failed_at_once_is_unknown_with_both_words_S4",)),
    Row(("complete", "job-failed"), E, "Contradictory", "contradiction", K.UNKNOWN, "cause",
        "`Complete` while a Job of the current attempt says `Failed`: unknown with both "
        "words, neither a success nor the Job's failure (S-4)",
        tests=("test_complete_while_a_job_failed_is_unknown_not_success_S4",)),
    Row(("complete", "pod-runs"), R, "Contradictory", "contradiction", K.UNKNOWN, "running",
        "`Complete` while one of its pods still runs (not being deleted): alive, unknown with "
        "both words; it ends as `Complete` says once no pod runs (S-4)",
        tests=("test_complete_while_a_pod_still_runs_waits_alive_S4",)),
    Row(("complete",), E, "Complete", "complete", None, "cause", "every Job completed",
        tests=("test_complete_is_ended_none",)),
    Row(("failed",), E, "Failed", "trainjob-failed", K.LAUNCH_FAILED, "cause",
        "the runtime cannot run it", reasons=("TrainingRuntimeNotSupported",),
        tests=("test_runtime_not_supported_is_launch_failed",)),
    Row(("failed", "pods-say-why"), E, "Failed", "ending", None, "ending",
        "the JobSet failed; its Jobs and Pods say why (root cause: the earliest failing "
        "pod, not those killed in its wake). Trainer 2.0, 2.1 and 2.2 alike: before 2.2 "
        "the Jobs (and on 2.0 the Pods) carry no dispatch label and are listed by "
        "`jobset.sigs.k8s.io/jobset-name`", reasons=JOBSET_FAILURES,
        tests=("test_root_cause_is_the_earliest_failing_pod_not_those_killed_after_it",
               "test_job_deadline_is_time_limit_although_trainjob_says_failed_jobs",
               "test_pod_failure_policy_exit_message_without_pods_is_non_zero_exit",
               "test_pod_failure_policy_disruption_message_without_pods_is_preempted",
               "test_every_trainer_version_reads_the_same_ending")),
    Row(("failed",), E, "Failed", "trainjob-failed", K.UNKNOWN, "cause",
        "failed and nothing left says why, or a reason this table does not know: the "
        "TrainJob's words, never a guessed kind (S-4)",
        tests=("test_failed_jobs_with_no_evidence_left_is_unknown_not_guessed",
               "test_unmapped_trainjob_failure_reason_is_unknown_verbatim",
               "test_failed_while_every_pod_succeeded_is_unknown_not_guessed_S4")),
    # -- deleted while not ended (an ended one keeps its ending above: a stop of an
    # -- object that had completed or failed never rewrites why it ended) ---------------
    Row(("deleting", "stop-recorded"), E, "Deleted", "stop", None, "cause",
        "deleted after dispatch's stop: cancelled (the stop's reason in detail)",
        tests=("test_deleted_after_a_recorded_stop_carries_the_stop_cause",
               "test_stop_of_an_ended_trainjob_keeps_its_ending_while_it_is_deleted")),
    Row(("deleting",), E, "Deleted", "deleted", None, "cause",
        "deleted by someone else (kubectl delete): Kubernetes records no cancel",
        tests=("test_deleted_without_a_recorded_stop_is_unknown",)),
    Row(("restarts-unreadable",), R, "Unreadable", "restarts", None, "running",
        "evidence dispatch cannot read: unknown, kept alive so no second execution starts "
        "beside it (S-4)", tests=("test_restart_count_out_of_range_is_unknown_and_alive",)),
    # -- suspension ---------------------------------------------------------------------
    Row(("suspended", "gate-closed"), G, "Suspended", None, None, "running",
        "dispatch's own gate, not yet opened",
        tests=("test_suspended_by_dispatch_gate_is_gated_not_held",)),
    # Kueue (v0.17.0 `apis/kueue/v1beta2/workload_types.go`): an evicted Workload keeps
    # `Evicted=True` until quota is reserved again (`pkg/workload` `SetQuotaReservation`)
    *(
        Row(("kueue-preempted", "evicted", "suspended"), P, "Suspended", "kueue-preempted",
            K.PREEMPTED, "running", f"Kueue preempted it ({why}) and requeued it: Kueue will "
            "admit it again, so it is pending, not an ending to resubmit over",
            reasons=(reason,),
            tests=("test_kueue_preemption_reasons_are_pending_preempted_with_kueue_words",))
        for reason, why in (
            ("InClusterQueue", "prioritization in the ClusterQueue"),
            ("InCohortReclamation", "reclamation within the cohort"),
            ("InCohortFairSharing", "Fair Sharing within the cohort"),
            ("InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing"),
        )
    ),
    Row(("evicted", "suspended"), P, "Suspended", "kueue-preempted", K.PREEMPTED, "running",
        "Kueue preempted it for a reason newer than this table (its `Preempted` condition "
        "missing or unknown): still a preemption, Kueue's words kept", reasons=("Preempted",),
        tests=("test_kueue_eviction_by_preemption_is_pending_preempted",)),
    Row(("evicted", "suspended"), P, "Suspended", "evicted", K.NODE_LOST, "running",
        "Kueue evicted it for node failures and requeued it", reasons=("NodeFailures",),
        tests=("test_kueue_eviction_for_node_failures_is_pending_node_lost",)),
    Row(("evicted", "suspended"), P, "Suspended", "evicted", K.NO_CAPACITY, "running",
        "its pods were not all ready within waitForPodsReady's timeout (pods the cluster "
        "could not place or start although the quota was granted): no capacity, and Kueue "
        "requeues it with a backoff", reasons=("PodsReadyTimeout",),
        tests=("test_kueue_evictions_map_to_their_rows",)),
    Row(("evicted", "suspended"), P, "Suspended", "evicted", K.NO_CAPACITY, "running",
        "an admission check (a ProvisioningRequest for capacity, typically) turned "
        "Retry: the capacity it asked for is not there; Kueue requeues it",
        reasons=("AdmissionCheck",), tests=("test_kueue_evictions_map_to_their_rows",)),
    Row(("evicted", "suspended"), H, "Suspended", "evicted", K.HELD, "running",
        "an administrator stopped its ClusterQueue or LocalQueue (`stopPolicy`): held until "
        "the queue is restarted, which requeues it",
        reasons=("ClusterQueueStopped", "LocalQueueStopped"),
        tests=("test_kueue_evictions_map_to_their_rows",)),
    Row(("evicted", "suspended"), E, "Suspended", "evicted", K.TIME_LIMIT, "cause",
        "Kueue's maximum execution time", reasons=("*MaximumExecutionTimeExceeded",),
        tests=("test_kueue_maximum_execution_time_is_time_limit",)),
    Row(("evicted", "suspended"), H, "Suspended", "evicted", K.HELD, "running",
        "Kueue gave up requeuing it (waitForPodsReady's `backoffLimitCount`) and set "
        "`spec.active=false`: it stays suspended until a person reactivates it, so held, "
        "never resubmitted over (a new submission would meet the same timeout)",
        reasons=("DeactivatedDueToRequeuingLimitExceeded",),
        tests=("test_kueue_evictions_map_to_their_rows",)),
    Row(("evicted", "suspended"), H, "Suspended", "evicted", K.HELD, "running",
        "its Workload was deactivated (`spec.active=false`, by a person or another cause)",
        reasons=("Deactivated*",),
        tests=("test_kueue_deactivated_workload_is_held",
               "test_kueue_evictions_map_to_their_rows")),
    Row(("evicted", "suspended"), P, "Suspended", "evicted", K.UNKNOWN, "running",
        "an eviction reason this table does not know: Kueue's words, never a guess",
        tests=("test_kueue_evictions_map_to_their_rows",)),
    Row(("quota-refused", "suspended", "workload"), P, "Queued", "quota", K.LAUNCH_FAILED,
        "running", "Kueue cannot admit it where it was sent: its LocalQueue or ClusterQueue "
        "does not exist, is inactive or stopped (`Inadmissible`, "
        "`pkg/controller/core/workload_controller.go`); launch-failed, so the launch window "
        "bounds a wait that quota alone would never end", reasons=("Inadmissible",),
        tests=("test_kueue_inadmissible_is_pending_launch_failed_with_kueue_words",)),
    Row(("suspended", "workload", "quota-refused"), P, "Queued", "quota", K.NO_CAPACITY,
        "running", "waiting for Kueue quota",
        tests=("test_kueue_waiting_for_quota_is_pending_no_capacity",)),
    Row(("suspended", "workload", "requeued"), P, "Queued", None, None, "running",
        "queued again (`Requeued=True`: after a preemption, a backoff, a reactivation, a "
        "restarted queue) and not yet refused quota: pending, Kueue's words as the pending "
        "reason", tests=("test_kueue_requeued_workload_is_pending_with_kueue_words",)),
    Row(("suspended", "workload"), P, "Queued", None, None, "running", "admitted by Kueue soon"),
    Row(("suspended", "queue-label"), P, "Queued", None, None, "running",
        "queued to Kueue, no Workload yet"),
    Row(("suspended",), H, "Suspended", "suspended", None, "running",
        "suspended by someone else: held with their words",
        tests=("test_suspended_by_someone_else_is_held_with_their_words",)),
    # -- alive --------------------------------------------------------------------------
    Row(("node-lost",), R, "Running", "lost", None, "running",
        "running on a lost node (the node-loss window counts from here, S-26)",
        tests=("test_pod_on_not_ready_node_is_running_node_lost",)),
    Row(("failure-target-stuck", "no-ending"), R, "Running", "failure-target", K.NODE_LOST,
        "running", "the 'FailureTarget forever' of a pod on a lost node whose pod is not seen",
        tests=("test_failure_target_without_failed_and_no_pod_evidence_is_node_lost",)),
    Row(("pods-say-why", "restarting"), P, "Restarting", None, None, "ending",
        "the attempt failed and the JobSet restarts it: pending again; the execution ended "
        "with its root cause (S-38)",
        tests=("test_failed_attempt_awaiting_restart_is_pending_with_ended_execution",)),
    Row(("pods-say-why",), R, "Running", None, None, "running",
        "a pod failed (or is being taken away) and its Job has not acted yet: running, no "
        "cause (only node-lost rides on a running object, S-26); the ending is kept on the "
        "TrainJob for when the Job has deleted the pod",
        tests=("test_pod_being_preempted_is_running_and_its_ending_kept",)),
    Row(("cannot-start",), P, "Pending", "cannot-start", None, "running",
        "a container cannot start; a pending pod never fails its Job, so the launch window "
        "bounds the wait (S-39)",
        tests=("test_container_that_cannot_start_is_pending_launch_failed",)),
    Row(("unschedulable",), P, "Pending", "unschedulable", None, "running",
        "no node fits (no window: it waits)",
        tests=("test_unschedulable_pod_is_pending_no_capacity",)),
    Row(("pods-running",), R, "Running", None, None, "running", "running",
        tests=("test_running_pods_are_running_without_cause",)),
    Row((), P, "Created", None, None, "running", "created, no pod running yet",
        tests=("test_created_without_pods_is_pending_without_cause",)),
)  # fmt: skip


def _execution(
    index: int, ev: Evidence, cause: Cause | None, node_causes: tuple[Cause, ...]
) -> Execution:
    pods = ev.of_attempt("pods", index)
    starts = [t for p in pods if (t := parse_time(status(p).get("startTime")))]
    return Execution(
        index=index,
        started_at=min(starts) if starts else None,
        ended_at=cause.at if cause is not None else None,
        nodes=tuple(sorted({n for p in pods if (n := node_of(p))})),
        cause=cause,
        node_causes=node_causes if len(node_causes) > 1 else (),
    )


def _past(ev: Evidence, attempt: int) -> list[Execution]:
    """One execution per earlier restart attempt: the one recorded on the TrainJob, else
    ``unknown`` with the JobSet's own words."""
    recorded = recorded_executions(ev.trainjob)
    past = []
    for index in range(attempt):
        if index in recorded:
            past.append(recorded[index])
            continue
        restart = cond(ev.jobset, "RestartingJobSet")
        words = said(restart) if restart and index == attempt - 1 else ""
        cause = make_cause(
            K.UNKNOWN,
            f"JobSet {ev.name} restart attempt {index} ended before dispatch saw why"
            + (f"; JobSet says {words}" if words else ""),
            None,
        )
        past.append(_execution(index, ev, cause, ()))
    return past


def match(f: Facts) -> int:
    return next(i for i, row in enumerate(TABLE) if row.matches(f))


def classify(ev: Evidence) -> ObjectView:
    """The object as dispatch reports it, through :data:`TABLE`."""
    return read(ev)[0]


def read(ev: Evidence) -> tuple[ObjectView, dict[str, str]]:
    """The object as dispatch reports it, and the annotations to write on its TrainJob
    so the current restart attempt's ending outlives its pods (:func:`to_keep`)."""
    f = Facts(ev)
    row = TABLE[match(f)]
    cause = SOURCES[row.cause][1](f) if row.cause else None
    if cause is not None and row.kind is not None:
        cause = cause.model_copy(update={"kind": row.kind})
    attempt = f.attempt or 0
    kept = recorded_executions(ev.trainjob).get(attempt)
    if row.execution == "ending" and kept is not None and f.ending[0] == kept.cause:
        current = kept  # the pods that showed it are gone: the execution as it was kept
    elif row.execution == "ending":
        current = _execution(attempt, ev, *f.ending)
    else:
        current = _execution(attempt, ev, cause if row.execution == "cause" else None, ())
    view = ObjectView(
        object_id=tags.object_id(ev.namespace, ev.name),
        job_id=ev.job_id,
        submission=ev.submission,
        phase=row.phase,
        scheduler_state=row.state,
        cause=cause,
        executions=(*_past(ev, attempt), current),
        created_at=parse_time(f.tj_meta.get("creationTimestamp")),
        pending_reason=kueue_pending_reason(f) if row.phase is P else None,
    )
    return view, to_keep(f, view)


def to_keep(f: Facts, view: ObjectView) -> dict[str, str]:
    """The annotation that keeps the current restart attempt's execution once it failed
    while the object lives on (a JobSet restart may come and delete its pods). Discovery
    writes it on the TrainJob, once, so a fresh process reads the same executions as a
    long-lived one (S-24, S-40): what is reported depends only on what the cluster shows.
    Nothing is kept of a malformed object: an ending read around a field dispatch cannot
    read would outlive the field."""
    ev = f.ev
    if ev.trainjob is None or f.tj_meta.get("deletionTimestamp") or not view.alive:
        return {}
    if f.malformed is not None:
        return {}
    if f.attempt is None or not _failed_attempt(f):
        return {}
    key = f"{tags.ATTEMPT_PREFIX}{f.attempt}"
    if key in annotations_of(ev.trainjob):
        return {}
    return {key: _execution(f.attempt, ev, *f.ending).model_dump_json()}


def render_markdown() -> str:
    """Both tables and the facts they read, as Markdown, for docs/mapping.md."""
    lines = [
        "### The object table (`classify.TABLE`)",
        "",
        "| # | when (all hold) | reason | phase | shown | cause from | kind | execution "
        "| Trainer | why | test |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(TABLE):
        when = " + ".join(f"{n}" for n in row.when) or "otherwise"
        reasons = ", ".join(f"`{r}`" for r in row.reasons) or "any"
        source = row.cause or "—"
        kind = f"`{row.kind.value}`" if row.kind else ("from the evidence" if row.cause else "—")
        tests = ", ".join(f"`{t}`" for t in row.tests)
        lines.append(
            f"| {i} | {when} | {reasons} | {row.phase.value} | {row.state} | {source} | "
            f"{kind} | {row.execution} | {row.trainer} | {row.why} | {tests} |"
        )
    lines += ["", "Facts:", ""]
    lines += [f"- `{name}`: {desc}" for name, (desc, _) in FACTS.items()]
    lines += ["", "Cause sources:", ""]
    lines += [f"- `{name}`: {desc}" for name, (desc, _) in SOURCES.items()]
    lines += ["", "### The pod table (`endings.POD_TABLE`)", "", endings.render_markdown().rstrip()]
    lines += ["", "Launch reasons: " + ", ".join(f"`{r}`" for r in sorted(endings.LAUNCH_REASONS))]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
