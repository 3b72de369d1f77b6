"""THE mapping: Slurm state / reason / exit code -> dispatch phase, cause kind, provenance.

Everything that decides what a Slurm answer means lives in :data:`TABLE`, read top to
bottom, first match wins (the shape of h11's ``_state.py``). ``docs/mapping.md`` is
rendered from it (``python -m dispatch_slurm.classify``) and a test checks that the two
agree; another test proves each row on an answer a real Slurm 22.05 printed.

What a row matches:

- ``states``: Slurm state words (``squeue %T`` / ``sacct State`` without ``by N``); none
  means any state;
- ``reasons``: reason words; a trailing ``*`` matches a prefix; no reasons means any
  reason; the reason ``""`` is what a sacct answer carries (its Reason is stale for ended
  jobs, so it is never read);
- ``when``: one named condition on the rest of the answer (:data:`CONDITIONS`);
- ``versions``: the Slurm releases the row holds for (:class:`Versions`; default all).
  Where a release changed what an answer means, the table has one row per meaning, each
  with its releases, and the answer carries the release whose rules read it
  (:func:`dispatch_slurm.version.rules_for` of the version read once per discovery).

Sources differ, and the conditions know it: ``squeue``'s exit code is exact (137 stays
137) and its reason is current; ``sacct`` before 25.11 prints ``exit - 128`` for exits
above 128 (137 -> ``9:0``; 25.11's changelog: "Don't subtract 128 from sacct returned exit
codes for the codes above 128"), keeps a stale reason for ended jobs, and is the only one
to carry ``DerivedExitCode`` settled and ``CANCELLED by <uid>``. squeue wins whenever it
still lists the job; sacct answers for jobs slurmctld has forgotten.

Where the two contradict each other (a scheduler that lies: squeue shows alive what sacct
says ended, sacct shows alive what slurmctld no longer lists, a job id slurmctld handed
out again after its state was wiped), the answer carries what the other source said and
a row of its own decides: ``unknown`` with both sources' words, alive or waiting, never
the cause one of them claims. :data:`DISAGREEMENTS` lists every such case, including the
one that reaches no row (a job neither lists any more).

Long because it is the table: every row, the conditions rows name and the renderer of
the docs belong together, read top to bottom (as h11's ``_state.py``).
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from dispatch import Cause, CauseKind, Phase, Provenance

from dispatch_slurm.parse import ExitStatus
from dispatch_slurm.version import DEFAULT, SlurmVersion, release

NO_EXIT = ExitStatus(0, 0)
#: the signal Slurm 22.05 reports for a step the cgroup OOM killer ended (``0:125``)
OOM_SIGNAL = 125


@dataclass(frozen=True)
class Answer:
    """What Slurm said about one object now (or about one past execution of it)."""

    source: str  # "squeue" or "sacct"
    state: str
    reason: str = ""
    exit: ExitStatus = NO_EXIT
    derived: ExitStatus = NO_EXIT
    restarts: int = 0
    gated: bool = False
    cancelled_by: int | None = None
    lost_nodes: str = ""
    raw_state: str = ""
    #: sacct's words for this very execution when squeue shows it alive or waiting and
    #: sacct says it ended (see the module docstring)
    sacct_ended: str = ""
    #: the answer is sacct's alone: slurmctld (squeue) does not list the job
    unlisted: bool = False
    #: the job that holds this job id now, in sacct's or squeue's words, when it is
    #: another job (the name or the comment's tag differs)
    reused_by: str = ""
    #: the release whose rules read this answer (see the module docstring)
    version: SlurmVersion = DEFAULT

    def words(self) -> str:
        """The answer verbatim, for ``Cause.detail``: Slurm's own words, labelled."""
        parts = [f"{self.source}: State={self.raw_state or self.state}"]
        if self.reason:
            parts.append(f"Reason={self.reason}")
        parts.append(f"ExitCode={self.exit}")
        if self.derived != NO_EXIT:
            parts.append(f"DerivedExitCode={self.derived}")
        if self.restarts:
            parts.append(f"Restarts={self.restarts}")
        if self.lost_nodes:
            parts.append(self.lost_nodes)
        if self.sacct_ended:
            parts.append(f"but {self.sacct_ended}")
        if self.unlisted:
            parts.append("but squeue does not list it")
        if self.reused_by:
            parts.append(f"but its job id now belongs to another job: {self.reused_by}")
        return " ".join(parts)


def _real_signal(a: Answer) -> bool:
    return a.exit.code == 0 and 1 <= a.exit.signal <= 31


CONDITIONS: Mapping[str, tuple[str, Callable[[Answer], bool]]] = {
    "any": ("always", lambda a: True),
    "gate-held": ("dispatch's own gate still holds it (tag gate=held)", lambda a: a.gated),
    "restarted": ("Slurm requeued it at least once (Restarts > 0)", lambda a: a.restarts > 0),
    "node-not-responding": (
        "one of its nodes is NOT_RESPONDING or DOWN in sinfo",
        lambda a: bool(a.lost_nodes),
    ),
    "step-oom": (
        f"DerivedExitCode signal is {OOM_SIGNAL}: a step was OOM-killed",
        lambda a: a.derived.signal == OOM_SIGNAL,
    ),
    "exit-code": ("the exit code is non-zero", lambda a: a.exit.code != 0),
    "signal": ("exit is 0:N with N a standard signal (1-31)", _real_signal),
    "id-reused": (
        "its job id now belongs to another job (another name, or a comment whose tag "
        "differs): slurmctld handed the id out again",
        lambda a: bool(a.reused_by),
    ),
    "sacct-ended": (
        "squeue shows it, and sacct says this same execution (by restart count) ended",
        lambda a: bool(a.sacct_ended),
    ),
    "unlisted": (
        "sacct alone says so: squeue (slurmctld) does not list the job",
        lambda a: a.unlisted,
    ),
}


@dataclass(frozen=True)
class Versions:
    """The Slurm releases a row holds for: from ``since`` (included) to ``before``
    (excluded); None is open."""

    since: SlurmVersion | None = None
    before: SlurmVersion | None = None

    def holds(self, version: SlurmVersion) -> bool:
        rel = version.release
        if self.since is not None and rel < self.since:
            return False
        return self.before is None or rel < self.before

    def __str__(self) -> str:
        if self.since and self.before:
            return f"{self.since} to before {self.before}"
        if self.since:
            return f"{self.since} and later"
        if self.before:
            return f"before {self.before}"
        return "all"


ALL = Versions()


@dataclass(frozen=True)
class Row:
    states: tuple[str, ...]
    reasons: tuple[str, ...]
    when: str
    phase: Phase
    kind: CauseKind | None
    provenance: Provenance | None
    why: str
    proof: tuple[str, ...] = field(default=())
    versions: Versions = ALL

    def matches(self, a: Answer) -> bool:
        if self.states and a.state not in self.states:
            return False
        if not self.versions.holds(a.version):
            return False
        if self.reasons and not any(_reason_matches(p, a.reason) for p in self.reasons):
            return False
        return CONDITIONS[self.when][1](a)


def _reason_matches(pattern: str, reason: str) -> bool:
    norm = reason.replace("_", " ")
    pat = pattern.replace("_", " ")
    if pat.endswith("*"):
        return norm.startswith(pat[:-1])
    return norm == pat


P, H, R, E, G = Phase.PENDING, Phase.HELD, Phase.RUNNING, Phase.ENDED, Phase.GATED
K = CauseKind
SCH, APP, ACT = Provenance.SCHEDULER, Provenance.APPLICATION, Provenance.ACTOR
#: alive, and not yet finishing: what squeue may not show once sacct says it ended
STARTED = ("RUNNING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING")
ALIVE = (
    "RUNNING",
    "COMPLETING",
    "CONFIGURING",
    "SUSPENDED",
    "STOPPED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
)
#: reasons that say the request cannot run as the cluster is configured now
NEVER_FITS = (
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "PartitionDown",
    "PartitionInactive",
    "ReqNodeNotAvail*",
    "BadConstraints",
    "NodeDown",
    "Nodes required for job are DOWN*",
    "InvalidQOS",
    "InvalidAccount",
)
#: reasons of an ordinary wait in the queue: no cause, dispatch keeps waiting
ORDINARY_WAITS = (
    "None",
    "Priority",
    "Resources",
    "Dependency",
    "BeginTime",
    "JobArrayTaskLimit",
    "Licenses",
    "Reservation",
    "Prolog",
    "Cleaning",
    "Scheduling",
    "PowerUp*",
    "Nodes are being configured",
    "QOS*",
    "Assoc*",
    "MaxJobs*",
    "MaxCpu*",
    "MaxNode*",
    "MaxMem*",
    "FrontEndDown",
    "ReqNodeList*",
    "resv*",
    "Reservation*",
    "OutOfMemory",
)

#: THE table. Read top to bottom; the first row that matches decides.
TABLE: tuple[Row, ...] = (
    # -- the sources contradict each other (DISAGREEMENTS) ------------------------------
    Row(
        (),
        (),
        "id-reused",
        E,
        K.UNKNOWN,
        SCH,
        "its job id was handed out again (slurmctld's state was wiped, or it numbered from "
        "FirstJobId again): what sacct kept of this job is not believed (a runaway row "
        "stays RUNNING, sacctmgr's fix writes COMPLETED), and the other job's rows are "
        "never its executions; unknown with both jobs' words",
    ),
    Row(
        ("PENDING",),
        (),
        "sacct-ended",
        P,
        K.UNKNOWN,
        SCH,
        "squeue shows it waiting while sacct says this execution ended: unknown and "
        "waiting (the unknown pending window bounds the wait), never sacct's ending",
    ),
    Row(
        STARTED,
        (),
        "sacct-ended",
        R,
        K.UNKNOWN,
        SCH,
        "squeue shows it running while sacct says this execution ended: alive and "
        "unknown, never sacct's ending; it ends when squeue says so (COMPLETING and later "
        "are an ending on its way, not a contradiction)",
    ),
    Row(
        ("PENDING", *STARTED),
        (),
        "unlisted",
        R,
        K.UNKNOWN,
        SCH,
        "sacct says it waits or runs and slurmctld does not list it (a runaway row of a "
        "job slurmctld lost): alive and unknown, so no second execution starts beside it",
    ),
    # -- waiting ------------------------------------------------------------------------
    Row(
        ("PENDING",),
        ("JobHeldUser",),
        "gate-held",
        G,
        None,
        None,
        "dispatch's own gate (sbatch --hold), not yet opened",
        ("held-user",),
    ),
    Row(
        ("PENDING",),
        ("JobHeldUser", "JobHeldAdmin"),
        "any",
        H,
        K.HELD,
        SCH,
        "a hold dispatch did not place (scontrol hold, or a user's)",
        ("held-admin",),
    ),
    Row(
        ("PENDING",),
        ("job requeued in held state", "launch failed requeued held"),
        "any",
        H,
        K.HELD,
        SCH,
        "requeued and held by Slurm (scontrol requeuehold, a prolog failure)",
        ("scontrol-requeuehold", "prolog-failure"),
    ),
    Row(
        ("PENDING",),
        NEVER_FITS,
        "any",
        P,
        K.NO_CAPACITY,
        SCH,
        "cannot start as the cluster is configured now (too many CPUs/nodes, nodes down)",
        ("pending-too-many-cpus", "pending-too-many-nodes", "drain-pending-job"),
    ),
    Row(
        ("PENDING",),
        ("DependencyNeverSatisfied",),
        "any",
        P,
        K.UNKNOWN,
        SCH,
        "a dependency that can never be satisfied: no cause kind says so; unknown",
        ("dependency-never-satisfied",),
    ),
    Row(
        ("PENDING",),
        ORDINARY_WAITS,
        "restarted",
        P,
        K.REQUEUED,
        SCH,
        "waiting to run again after Slurm requeued it (preemption, node failure, requeue)",
        ("preempt-requeue-victim-pending", "node-down-requeue-job", "scontrol-requeue-pending"),
    ),
    Row(
        ("PENDING",),
        ORDINARY_WAITS,
        "any",
        P,
        None,
        None,
        "an ordinary wait in the queue",
        ("success",),
    ),
    Row(("PENDING",), (), "any", P, K.UNKNOWN, SCH, "a pending reason this table does not know"),
    Row(
        ("REQUEUED", "REQUEUE_FED"),
        (),
        "any",
        P,
        K.REQUEUED,
        SCH,
        "being requeued (also how sacct -D shows an execution ended by a requeue)",
        ("scontrol-requeue-final",),
    ),
    Row(("REQUEUE_HOLD", "SPECIAL_EXIT"), (), "any", H, K.HELD, SCH, "requeued in a held state"),
    # -- alive --------------------------------------------------------------------------
    Row(
        ALIVE,
        (),
        "node-not-responding",
        R,
        K.NODE_LOST,
        SCH,
        "running on a node that stopped answering (the node-loss fence counts from here)",
        ("slurmd-killed-node-not-responding",),
    ),
    Row(
        ALIVE,
        (),
        "any",
        R,
        None,
        None,
        "running (or finishing: COMPLETING)",
        ("drain-running-job-while-draining",),
    ),
    # -- ended --------------------------------------------------------------------------
    Row(
        ("COMPLETED",),
        (),
        "any",
        E,
        K.NONE,
        APP,
        "the batch script exited 0 (a failed step it tolerated does not change that)",
        ("success", "srun-step-SIGKILL-batch-exit0", "held-then-released"),
    ),
    Row(
        ("FAILED",),
        ("NonZeroExitCode", "None", ""),
        "step-oom",
        E,
        K.OUT_OF_MEMORY,
        SCH,
        "an srun step was OOM-killed (DerivedExitCode 0:125); the script then failed",
        ("oom-in-srun-step",),
    ),
    Row(
        ("FAILED",),
        ("JobLaunchFailure", "None", ""),
        "signal",
        E,
        K.NON_ZERO_EXIT,
        APP,
        "the batch script was killed by a signal (reported 0:N; exit code 128+N)",
        ("batch-killed-by-SIGKILL", "batch-killed-by-SIGTERM"),
        versions=Versions(before=release("23.02")),
    ),
    Row(
        ("FAILED",),
        ("RaisedSignal:53*",),
        "any",
        E,
        K.LAUNCH_FAILED,
        SCH,
        "Slurm could not start the batch script (bad output path): 0:53, which 22.05 "
        "gave the reason JobLaunchFailure and 23.02 on RaisedSignal:53",
        ("launch_failed",),
        versions=Versions(since=release("23.02")),
    ),
    Row(
        ("FAILED",),
        ("RaisedSignal*", "None", ""),
        "signal",
        E,
        K.NON_ZERO_EXIT,
        APP,
        "the batch script was killed by a signal (reported 0:N; exit code 128+N); the "
        "reason is RaisedSignal:N(name) from 23.02, where 22.05 said JobLaunchFailure",
        ("signal",),
        versions=Versions(since=release("23.02")),
    ),
    Row(
        ("FAILED",),
        ("JobLaunchFailure", "BadConstraints"),
        "any",
        E,
        K.LAUNCH_FAILED,
        SCH,
        "Slurm could not start the batch script (bad output path, refused request)",
        ("launch-fail-bad-stdout-path",),
    ),
    Row(
        ("FAILED",),
        (),
        "exit-code",
        E,
        K.NON_ZERO_EXIT,
        APP,
        "the batch script exited non-zero (squeue: exact; sacct: exit-128 above 128, "
        "so sacct's 9:0 may be an exit 137)",
        ("exit1", "exit137", "command-not-found-127", "srun-step-SIGKILL-rc-propagated"),
        versions=Versions(before=release("25.11")),
    ),
    Row(
        ("FAILED",),
        (),
        "exit-code",
        E,
        K.NON_ZERO_EXIT,
        APP,
        "the batch script exited non-zero (squeue and sacct: exact; sacct no longer "
        "subtracts 128 above 128, so its 137:0 is an exit 137)",
        ("exit1", "exit137", "command-not-found-127"),
        versions=Versions(since=release("25.11")),
    ),
    Row(
        ("OUT_OF_MEMORY",),
        (),
        "any",
        E,
        K.OUT_OF_MEMORY,
        SCH,
        "the batch step was OOM-killed (cgroup memory enforcement)",
        ("oom-batch-step",),
    ),
    Row(("TIMEOUT",), (), "any", E, K.TIME_LIMIT, SCH, "killed at its time limit", ("timeout",)),
    Row(
        ("DEADLINE",),
        (),
        "any",
        E,
        K.TIME_LIMIT,
        SCH,
        "its --deadline passed before it could finish",
        ("deadline",),
    ),
    Row(
        ("PREEMPTED",),
        (),
        "any",
        E,
        K.PREEMPTED,
        SCH,
        "preempted and not requeued (PreemptMode=CANCEL, or --no-requeue)",
        ("preempt-cancel",),
    ),
    Row(
        ("NODE_FAIL",),
        (),
        "any",
        E,
        K.NODE_LOST,
        SCH,
        "a node of the job failed and the job was not requeued (ExitCode 0:0)",
        ("node-down-norequeue-job", "slurmd-killed-node-not-responding"),
        versions=Versions(before=release("24.11")),
    ),
    Row(
        ("NODE_FAIL",),
        (),
        "any",
        E,
        K.NODE_LOST,
        SCH,
        "a node of the job failed and the job was not requeued; Slurm sets exit code 1 "
        "on NODE_FAIL itself (24.11's changelog; sacct 1:0, squeue 0:1), so it is no exit "
        "code of the script",
        ("node-down-norequeue-job", "slurmd-killed-node-not-responding"),
        versions=Versions(since=release("24.11")),
    ),
    Row(
        ("BOOT_FAIL",),
        (),
        "any",
        E,
        K.LAUNCH_FAILED,
        SCH,
        "its nodes failed to boot",
        ("boot-fail",),
    ),
    Row(
        ("CANCELLED",),
        (),
        "any",
        E,
        K.CANCELLED,
        ACT,
        "scancel (actor: the user of sacct's 'CANCELLED by <uid>' when Slurm still says it)",
        ("scancel-running", "scancel-pending", "srun-immediate-failed"),
    ),
    Row(
        ("FAILED",),
        (),
        "any",
        E,
        K.UNKNOWN,
        SCH,
        "FAILED with neither an exit code nor a reason this table knows",
    ),
    Row(
        ("REVOKED",),
        (),
        "any",
        E,
        K.UNKNOWN,
        SCH,
        "federation moved the job to another cluster; dispatch cannot follow it",
    ),
)


@dataclass(frozen=True)
class Disagreement:
    """One way Slurm's two sources contradict each other, and what the adapter does."""

    case: str
    when: str | None  # the condition of the rows that decide it; None: no answer at all
    does: str
    test: str


#: Every contradiction between squeue, sacct and the job's own tag the adapter knows
#: (a scheduler that lies), each proven offline by the test it names
#: (``tests/test_slurm_lies.py``: Slurm's outputs fed to the real runner).
DISAGREEMENTS: tuple[Disagreement, ...] = (
    Disagreement(
        "sacct misses a job squeue showed a tick ago (slurmctld forgot it before slurmdbd "
        "recorded it)",
        None,
        "nothing to classify: the object is left out of the discovery; the core keeps the "
        "job as it was for the node-loss window (10 min), then ends it `unknown` (not "
        "listed by the backend) and the rule on unknown (hold or escalate) applies",
        "test_sacct_missing_a_job_squeue_just_showed_waits_then_is_unknown_S4",
    ),
    Disagreement(
        "squeue shows it running or waiting, sacct says this execution ended",
        "sacct-ended",
        "`unknown` with both answers' words, alive (running) or waiting (pending): never "
        "sacct's ending; squeue's own ending is read when it comes",
        "test_squeue_showing_a_job_sacct_says_ended_is_unknown_never_sacct_s_cause_S4",
    ),
    Disagreement(
        "sacct says it runs or waits, squeue does not list it (a runaway row)",
        "unlisted",
        "`unknown`, alive: no second execution starts beside it, and no cause is guessed",
        "test_sacct_running_job_squeue_does_not_list_is_alive_unknown_S4",
    ),
    Disagreement(
        "the job id was handed out again after slurmctld's state was wiped: rows of "
        "another job (another name, or a tag naming another submission) under the same id",
        "id-reused",
        "the earlier job ends `unknown` with the later job's words; the later job is read "
        "from its own rows only (never the earlier job's executions), and its step rows "
        "are those of the incarnation that started when its execution did",
        "test_reused_job_id_is_unknown_never_the_other_job_s_cause_S4",
    ),
    Disagreement(
        "squeue's restart count is ahead of sacct's rows (sacct lags 1-10 s)",
        None,
        "the executions sacct has not recorded are left out, never guessed; the next "
        "discovery adds them",
        "test_sacct_lagging_squeue_s_requeue_leaves_the_execution_out_S4",
    ),
)


@dataclass(frozen=True)
class Verdict:
    phase: Phase
    cause: Cause | None
    row: int | None


def user_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def classify(a: Answer, at: datetime | None = None) -> Verdict:
    """Map one answer through :data:`TABLE`; an answer no row matches is ``unknown`` (S-4),
    treated as alive so that dispatch never starts a second execution beside it."""
    index, fields = _match(a)
    if index is not None and TABLE[index].kind is None:
        return Verdict(TABLE[index].phase, None, index)
    phase = TABLE[index].phase if index is not None else R
    return Verdict(phase, Cause(**fields, at=at), index)


@lru_cache(maxsize=4096)
def _match(a: Answer) -> tuple[int | None, dict[str, Any]]:
    """The first matching row and the cause's fields; cached, because a discovery of many
    jobs sees the same few answers over and over."""
    for index, row in enumerate(TABLE):
        if not row.matches(a):
            continue
        if row.kind is None:
            return index, {}
        exit_code: int | None = None
        if row.kind is K.NON_ZERO_EXIT:
            exit_code = a.exit.code if a.exit.code else 128 + a.exit.signal
        actor = None
        if row.kind is K.CANCELLED and a.cancelled_by is not None:
            actor = user_of(a.cancelled_by)
        return index, {
            "kind": row.kind,
            "provenance": row.provenance or SCH,
            "actor": actor,
            "detail": a.words(),
            "exit_code": exit_code,
        }
    return None, {"kind": K.UNKNOWN, "provenance": SCH, "detail": a.words()}


def render_markdown() -> str:
    """The table as Markdown, for docs/mapping.md."""
    lines = [
        "| # | Slurm state | reason | when | Slurm releases | phase | cause kind | provenance "
        "| why | proven on (captures) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(TABLE):
        reasons = ", ".join(f"`{r}`" for r in row.reasons) or "any"
        kind = row.kind.value if row.kind else "(none)"
        prov = row.provenance.value if row.provenance else ""
        proof = ", ".join(row.proof) or "(no capture)"
        lines.append(
            f"| {i} | {', '.join(row.states)} | {reasons} | {CONDITIONS[row.when][0]} | "
            f"{row.versions} | {row.phase.value} | {kind} | {prov} | {row.why} | {proof} |"
        )
    lines.append(
        "| - | anything else | any | always | all | running | unknown | scheduler | "
        "no row matched: unknown, kept alive so no second execution starts beside it (S-4) | |"
    )
    return "\n".join(lines) + "\n"


def render_disagreements() -> str:
    """:data:`DISAGREEMENTS` as Markdown, for docs/mapping.md."""
    lines = [
        "| when Slurm's answers disagree | rows | what dispatch reports | test |",
        "|---|---|---|---|",
    ]
    for d in DISAGREEMENTS:
        rows = ", ".join(str(i) for i, row in enumerate(TABLE) if d.when and row.when == d.when)
        lines.append(f"| {d.case} | {rows or 'none'} | {d.does} | `{d.test}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    disagreements = sys.argv[1:] == ["disagreements"]
    print((render_disagreements if disagreements else render_markdown)(), end="")
