"""THE mapping table, row by row, on what a real Slurm 22.05 printed (S-2, S-3, S-4);
the later releases' answers are in test_slurm_versions.

The answers come from ``data/captures/summary-settled.tsv`` (copied from the shared
captures: one line per provoked scenario with squeue, scontrol and sacct columns), seen
the way the adapter sees them: ``squeue`` (state and reason from squeue, exit code and
restarts as slurmctld holds them), ``sacct`` (settled row, Reason dropped as stale) and
``history`` (the earlier incarnation in ``sacct -D``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from dispatch import CauseKind, Phase, Provenance
from dispatch_slurm.classify import TABLE, Answer, classify, render_markdown
from dispatch_slurm.parse import parse_exit_pair
from dispatch_slurm.version import DEFAULT

DATA = Path(__file__).parent / "data"
DOCS = Path(__file__).parents[1] / "docs" / "mapping.md"

with (DATA / "captures" / "summary-settled.tsv").open() as handle:
    ROWS = {r["scenario"]: r for r in csv.DictReader(handle, delimiter="\t")}

SQ = "squeue %T|%r"
SC = "scontrol JobState|Reason|ExitCode|Restarts"
SA = "sacct -X State|Reason|ExitCode|DerivedExitCode"
SA_SETTLED = "sacct -X SETTLED (re-queried at end) State|Reason|ExitCode|DerivedExitCode"
HIST = "sacct -X -D history"


def squeue_view(scenario: str, gated: bool = False) -> Answer:
    row = ROWS[scenario]
    state, reason = row[SQ].split("|", 1)
    _, _, exit_code, restarts = row[SC].split("|")
    derived = row[SA_SETTLED].split("|")[3]
    return Answer(
        source="squeue",
        state=state,
        reason=reason,
        exit=parse_exit_pair(exit_code),
        derived=parse_exit_pair(derived),
        restarts=int(restarts),
        gated=gated,
    )


def sacct_view(scenario: str, column: str = SA_SETTLED) -> Answer:
    state, _stale_reason, exit_code, derived = ROWS[scenario][column].split("|")
    by = int(state.split(" by ")[1]) if " by " in state else None
    return Answer(
        source="sacct",
        state=state.split(" by ")[0],
        exit=parse_exit_pair(exit_code),
        derived=parse_exit_pair(derived),
        cancelled_by=by,
        raw_state=state,
    )


def timeline_view(name: str, line: int, job: str) -> Answer:
    """One job's ``id|partition|STATE|Reason`` from a sampled timeline (squeue every 0.5 s)."""
    text = (DATA / "captures" / name).read_text().splitlines()[line]
    entry = next(e for e in text.split()[2:] if e.startswith(f"{job}|"))
    _, _, state, reason = entry.split("|")
    return Answer(source="squeue", state=state, reason=reason)


def history_view(scenario: str) -> Answer:
    return Answer(source="sacct", state=ROWS[scenario][HIST].split(">")[0])


E, P, H, R, G = Phase.ENDED, Phase.PENDING, Phase.HELD, Phase.RUNNING, Phase.GATED
K = CauseKind
APP, SCH, ACT = Provenance.APPLICATION, Provenance.SCHEDULER, Provenance.ACTOR

# (case id, answer, phase, kind, provenance, exit code)
CASES = [
    ("success", squeue_view("success"), E, K.NONE, APP, None),
    ("exit1", squeue_view("exit1"), E, K.NON_ZERO_EXIT, APP, 1),
    ("exit137 squeue keeps 137", squeue_view("exit137"), E, K.NON_ZERO_EXIT, APP, 137),
    ("exit137 sacct says 9", sacct_view("exit137"), E, K.NON_ZERO_EXIT, APP, 9),
    ("script SIGKILLed", squeue_view("batch-killed-by-SIGKILL"), E, K.NON_ZERO_EXIT, APP, 137),
    ("script SIGTERMed", squeue_view("batch-killed-by-SIGTERM"), E, K.NON_ZERO_EXIT, APP, 143),
    ("script SIGKILLed sacct", sacct_view("batch-killed-by-SIGKILL"), E, K.NON_ZERO_EXIT, APP, 137),
    (
        "srun step SIGKILL rc",
        squeue_view("srun-step-SIGKILL-rc-propagated"),
        E,
        K.NON_ZERO_EXIT,
        APP,
        137,
    ),
    ("srun step SIGKILL exit0", squeue_view("srun-step-SIGKILL-batch-exit0"), E, K.NONE, APP, None),
    ("command not found", squeue_view("command-not-found-127"), E, K.NON_ZERO_EXIT, APP, 127),
    ("scancel running", squeue_view("scancel-running"), E, K.CANCELLED, ACT, None),
    ("scancel pending", squeue_view("scancel-pending"), E, K.CANCELLED, ACT, None),
    ("CANCELLED by 0", sacct_view("scancel-running", SA), E, K.CANCELLED, ACT, None),
    ("srun --immediate", squeue_view("srun-immediate-failed"), E, K.CANCELLED, ACT, None),
    ("gate", squeue_view("held-user", gated=True), G, None, None, None),
    ("user hold not ours", squeue_view("held-user"), H, K.HELD, SCH, None),
    ("admin hold", squeue_view("held-admin"), H, K.HELD, SCH, None),
    ("admin hold on our gate", squeue_view("held-admin", gated=True), H, K.HELD, SCH, None),
    ("released then done", squeue_view("held-then-released"), E, K.NONE, APP, None),
    ("requeued pending", squeue_view("scontrol-requeue-pending"), P, K.REQUEUED, SCH, None),
    ("requeuehold", squeue_view("scontrol-requeuehold"), H, K.HELD, SCH, None),
    ("prolog failure held", squeue_view("prolog-failure"), H, K.HELD, SCH, None),
    ("oom batch", squeue_view("oom-batch-step"), E, K.OUT_OF_MEMORY, SCH, None),
    ("oom batch sacct", sacct_view("oom-batch-step"), E, K.OUT_OF_MEMORY, SCH, None),
    ("oom in srun step", squeue_view("oom-in-srun-step"), E, K.OUT_OF_MEMORY, SCH, None),
    ("oom in srun step sacct", sacct_view("oom-in-srun-step"), E, K.OUT_OF_MEMORY, SCH, None),
    ("bad stdout path", squeue_view("launch-fail-bad-stdout-path"), E, K.LAUNCH_FAILED, SCH, None),
    ("bad stdout path sacct", sacct_view("launch-fail-bad-stdout-path"), E, K.UNKNOWN, SCH, None),
    ("too many cpus", squeue_view("pending-too-many-cpus"), P, K.NO_CAPACITY, SCH, None),
    ("too many nodes", squeue_view("pending-too-many-nodes"), P, K.NO_CAPACITY, SCH, None),
    ("drained node", squeue_view("drain-pending-job"), P, K.NO_CAPACITY, SCH, None),
    ("dependency never", squeue_view("dependency-never-satisfied"), P, K.UNKNOWN, SCH, None),
    ("timeout", squeue_view("timeout"), E, K.TIME_LIMIT, SCH, None),
    ("timeout sacct", sacct_view("timeout"), E, K.TIME_LIMIT, SCH, None),
    ("deadline", squeue_view("deadline"), E, K.TIME_LIMIT, SCH, None),
    (
        "preempted requeue pending",
        squeue_view("preempt-requeue-victim-pending"),
        P,
        K.REQUEUED,
        SCH,
        None,
    ),
    (
        "preempted requeue history",
        history_view("preempt-requeue-victim-final"),
        E,
        K.PREEMPTED,
        SCH,
        None,
    ),
    ("preempted cancel", squeue_view("preempt-cancel"), E, K.PREEMPTED, SCH, None),
    ("preempted cancel sacct", sacct_view("preempt-cancel"), E, K.PREEMPTED, SCH, None),
    ("node down requeued", squeue_view("node-down-requeue-job"), P, K.REQUEUED, SCH, None),
    ("node down history", history_view("node-down-requeue-job"), E, K.NODE_LOST, SCH, None),
    ("node down no requeue", squeue_view("node-down-norequeue-job"), E, K.NODE_LOST, SCH, None),
    ("slurmd killed", squeue_view("slurmd-killed-node-not-responding"), E, K.NODE_LOST, SCH, None),
    ("scontrol requeue history", history_view("scontrol-requeue-final"), P, K.REQUEUED, SCH, None),
    (
        "running while draining",
        squeue_view("drain-running-job-while-draining"),
        R,
        None,
        None,
        None,
    ),
    (
        "running after ctld restart",
        squeue_view("ctld-down-job-still-running-after-restart"),
        R,
        None,
        None,
        None,
    ),
    ("boot fail", squeue_view("boot-fail"), E, K.LAUNCH_FAILED, SCH, None),
    ("boot fail sacct", sacct_view("boot-fail"), E, K.LAUNCH_FAILED, SCH, None),
    (
        "preemptor waits for resources",
        timeline_view("preempt-requeue.timeline", 1, "34"),
        P,
        None,
        None,
        None,
    ),
    # slurmd-killed.timeline: "RUNNING|None node=mixed*" (sinfo's * = not responding)
    (
        "running on a not-responding node",
        Answer(
            source="squeue",
            state="RUNNING",
            reason="None",
            lost_nodes="sinfo: Node=vm State=mixed* Reason=none",
        ),
        R,
        K.NODE_LOST,
        SCH,
        None,
    ),
    # the sources contradict each other (a scheduler that lies; test_slurm_lies.py)
    (
        "job id reused by another job",
        Answer(source="sacct", state="COMPLETED", reused_by="sacct: JobID=123 JobName=dsp.y"),
        E,
        K.UNKNOWN,
        SCH,
        None,
    ),
    (
        "squeue waiting, sacct ended",
        Answer(source="squeue", state="PENDING", reason="Priority", sacct_ended="sacct: COMPLETED"),
        P,
        K.UNKNOWN,
        SCH,
        None,
    ),
    (
        "squeue running, sacct ended",
        Answer(source="squeue", state="RUNNING", reason="None", sacct_ended="sacct: FAILED"),
        R,
        K.UNKNOWN,
        SCH,
        None,
    ),
    (
        "sacct running, squeue does not list it",
        Answer(source="sacct", state="RUNNING", unlisted=True),
        R,
        K.UNKNOWN,
        SCH,
        None,
    ),
    # not seen on this cluster: answers a later Slurm or another site could give
    (
        "unknown pending reason",
        Answer(source="squeue", state="PENDING", reason="SomeNewReason"),
        P,
        K.UNKNOWN,
        SCH,
        None,
    ),
    (
        "requeue hold state",
        Answer(source="squeue", state="REQUEUE_HOLD", reason="None"),
        H,
        K.HELD,
        SCH,
        None,
    ),
    ("revoked", Answer(source="squeue", state="REVOKED", reason="None"), E, K.UNKNOWN, SCH, None),
    (
        "unknown state word",
        Answer(source="squeue", state="NEW_STATE", reason="None"),
        R,
        K.UNKNOWN,
        SCH,
        None,
    ),
]


@pytest.mark.parametrize(
    ("answer", "phase", "kind", "provenance", "exit_code"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_each_captured_answer_maps_to_its_row_S2_S3(
    answer, phase, kind, provenance, exit_code
) -> None:
    verdict = classify(answer)
    assert verdict.phase is phase
    if kind is None:
        assert verdict.cause is None
        return
    assert verdict.cause is not None
    assert (verdict.cause.kind, verdict.cause.provenance, verdict.cause.exit_code) == (
        kind,
        provenance,
        exit_code,
    )
    assert answer.state in verdict.cause.detail  # Slurm's words, verbatim (S-2)


def test_every_row_of_the_table_is_proven_by_a_case() -> None:
    """The cases are 22.05's answers; a row that holds only for releases after 22.05 is
    proven on those releases' recorded answers (test_slurm_versions)."""
    hit = {classify(case[1]).row for case in CASES}
    missing = [i for i in range(len(TABLE)) if i not in hit and TABLE[i].versions.holds(DEFAULT)]
    assert missing == [], f"rows with no case: {missing}"
    assert None in hit  # the fallback for an answer no row matches (S-4)


def test_cancelled_by_uid_names_that_uid_s_user_as_actor_S2() -> None:
    cause = classify(sacct_view("scancel-running", SA)).cause
    assert cause is not None and cause.actor == "root"
    assert "CANCELLED by 0" in cause.detail


def test_an_unknown_answer_is_never_stretched_to_another_kind_S4() -> None:
    answer = Answer(source="squeue", state="FAILED", reason="SomethingNew")
    cause = classify(answer).cause
    assert cause is not None and cause.kind is K.UNKNOWN
    assert "Reason=SomethingNew" in cause.detail


def test_docs_mapping_table_is_the_table_in_the_code() -> None:
    text = DOCS.read_text()
    assert render_markdown() in text, "docs/mapping.md is stale: python -m dispatch_slurm.classify"
