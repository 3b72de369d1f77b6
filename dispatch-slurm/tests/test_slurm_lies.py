"""A scheduler that lies (S-4): squeue and sacct contradicting each other, a job id
slurmctld handed out again after its state was wiped. Each case is a row of
``classify.DISAGREEMENTS`` (docs/mapping.md, "When Slurm's answers disagree"), proven
here by the real runner and backend reading Slurm's outputs as written by commands of a
fake Slurm (no cluster), and by the core deciding on what the backend discovered: each
gives unknown or waits, never a cause one source claims against the other."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import (
    Action,
    CauseKind,
    Discovery,
    JobSpec,
    Phase,
    Plan,
    RecoveryPolicy,
    Rule,
    State,
    decide,
    fold,
    project,
)
from dispatch.core.effects import Append
from dispatch.model.events import Event, JobCreated, SubmissionCreated
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.classify import DISAGREEMENTS, TABLE, render_disagreements
from dispatch_slurm.runner import Runner

VERSION = "slurm-wlm 22.05.8"
T = "2026-11-29T23:11"
X, Y = "job-x", "job-y"


def _tag(job: str, submission: int = 1) -> str:
    return f"dispatch;job={job};submission={submission};gate=open"


def squeue_line(
    oid: str,
    job: str,
    state: str,
    *,
    reason: str = "None",
    restarts: int = 0,
    sub: int = 1,
    start: str = "05",
) -> str:
    ended = f"{T}:40" if state not in ("RUNNING", "PENDING") else "N/A"
    started = "N/A" if state == "PENDING" else f"{T}:{start}"
    exit_status = "256" if state == "FAILED" else "0"
    return (
        f"{oid}|dsp.{job}|{state}|{exit_status}|0|{restarts}|{T}:04|{started}|{ended}|"
        f"{'vm[1-2]' if started != 'N/A' else ''}|low|{_tag(job, sub)}|{reason}|"
    )


def sacct_line(
    oid: str,
    job: str,
    state: str,
    *,
    exit: str = "0:0",
    comment: bool = True,
    sub: int = 1,
    start: str = "05",
) -> str:
    end = "Unknown" if state in ("RUNNING", "PENDING") else f"{T}:40"
    return (
        f"{oid}|dsp.{job}|{state}|{exit}|0:0|{T}:04|{T}:{start}|{end}|vm[1-2]|low|"
        f"{_tag(job, sub) if comment else ''}"
    )


class FakeSlurm:
    """Slurm's commands as scripts printing what the test wrote (the runner runs them as
    it runs the real ones, through ``path_prefix``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        scripts = {
            "squeue": 'cat "$D/squeue.out"',
            "sacct": 'case " $* " in *" -j "*) cat "$D/steps.out";; *) cat "$D/sacct.out";; esac',
            "sacctmgr": 'cat "$D/events.out"',
            "sinfo": f'if [ "$1" = --version ]; then echo "{VERSION}"; else cat "$D/sinfo.out"; fi',
        }
        for name, body in scripts.items():
            path = root / name
            path.write_text(f'#!/bin/sh\nD="{root}"\n{body}\n')
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        self.say()
        (root / "sinfo.out").write_text("vm1|mixed|none\nvm2|mixed|none\n")

    def say(
        self,
        squeue: list[str] = (),  # type: ignore[assignment]
        sacct: list[str] = (),  # type: ignore[assignment]
        steps: list[str] = (),  # type: ignore[assignment]
    ) -> None:
        for name, lines in (("squeue", squeue), ("sacct", sacct), ("steps", steps)):
            (self.root / f"{name}.out").write_text("".join(f"{line}\n" for line in lines))
        (self.root / "events.out").write_text("")


@pytest.fixture
def slurm(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm(tmp_path)


@pytest.fixture
def backend(slurm: FakeSlurm) -> SlurmBackend:
    return SlurmBackend(Runner(timeout=30, path_prefix=str(slurm.root)))


def objects(backend: SlurmBackend, *jobs: str):  # type: ignore[no-untyped-def]
    return {(o.job_id, o.submission): o for o in backend.dispatch_discover(list(jobs)).objects}


def disagreement(test: str) -> tuple[int, ...]:
    """The table rows the case of ``test`` names (the docs are rendered from them)."""
    (case,) = [d for d in DISAGREEMENTS if d.test == test]
    return tuple(i for i, row in enumerate(TABLE) if case.when and row.when == case.when)


class Core:
    """One job of the record submitted as object ``oid``, decided on by the core as a
    supervisor would on each discovery, with the clock the test moves."""

    T0 = datetime(2026, 11, 29, 23, 12, tzinfo=UTC)

    def __init__(self, backend: SlurmBackend, job: str, oid: str) -> None:
        rules = (Rule(on=(CauseKind.UNKNOWN,), action=Action.HOLD),)
        self.backend, self.job = backend, job
        self.plan = Plan.bind(RecoveryPolicy(rules=rules), backend.dispatch_declare())
        self.now = self.T0
        self.events: list[Event] = [
            JobCreated(
                job_id=job,
                seq=1,
                at=self.T0,
                name="train",
                backend="slurm",
                spec=JobSpec(command=("python", "train.py")),
                plan=self.plan,
            )
        ]
        # the first submission, as the supervisor records it: asked for, then created as oid
        empty = Discovery(backend="slurm", at=self.T0)
        for effect in decide(fold(self.events), empty, self.plan, self.now):
            if isinstance(effect, Append):
                self.events.extend(effect.events)
        seq = self.events[-1].seq + 1
        self.events.append(
            SubmissionCreated(job_id=job, seq=seq, at=self.T0, submission=1, object_id=oid)
        )

    def tick(self, seconds: float = 0) -> State:
        self.now += timedelta(seconds=seconds)
        found = self.backend.dispatch_discover([self.job]).model_copy(update={"at": self.now})
        for effect in decide(fold(self.events), found, self.plan, self.now):
            if isinstance(effect, Append):
                self.events.extend(effect.events)
        return project(fold(self.events), found, self.now).state

    def causes(self) -> list[CauseKind]:
        return [e.cause.kind for e in self.events if getattr(e, "cause", None) is not None]


def test_sacct_missing_a_job_squeue_just_showed_waits_then_is_unknown_S4(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    core = Core(backend, X, "123")
    slurm.say(squeue=[squeue_line("123", X, "RUNNING")], sacct=[sacct_line("123", X, "RUNNING")])
    assert core.tick() is State.RUNNING
    slurm.say()  # slurmctld forgot it and slurmdbd never recorded it
    assert (
        disagreement("test_sacct_missing_a_job_squeue_just_showed_waits_then_is_unknown_S4") == ()
    )
    assert objects(backend, X) == {}  # nothing to classify: left out, never guessed
    # shown unknown (not listed) while the record waits: no ending is committed
    assert core.tick(30) is State.UNKNOWN
    window = backend.dispatch_declare().node_loss_window
    assert core.tick(window.total_seconds() - 60) is State.UNKNOWN
    assert core.causes() == []
    assert core.tick(120) is State.HELD  # then unknown, and the rule on unknown holds it
    assert core.causes() == [CauseKind.UNKNOWN]


def test_squeue_showing_a_job_sacct_says_ended_is_unknown_never_sacct_s_cause_S4(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    rows = disagreement(
        "test_squeue_showing_a_job_sacct_says_ended_is_unknown_never_sacct_s_cause_S4"
    )
    assert {TABLE[i].phase for i in rows} == {Phase.RUNNING, Phase.PENDING}
    core = Core(backend, X, "123")
    slurm.say(
        squeue=[squeue_line("123", X, "RUNNING")],
        sacct=[sacct_line("123", X, "FAILED", exit="1:0")],
    )
    obj = objects(backend, X)[(X, 1)]
    assert obj.phase is Phase.RUNNING and obj.alive
    assert obj.cause is not None and obj.cause.kind is CauseKind.UNKNOWN
    assert "squeue: State=RUNNING" in obj.cause.detail
    assert "but sacct: State=FAILED ExitCode=1:0" in obj.cause.detail
    for _ in range(3):
        assert core.tick(600) is State.RUNNING  # waits, alive: no ending is recorded
    assert core.causes() == []
    # waiting in squeue while sacct says this execution completed: waiting, unknown
    slurm.say(
        squeue=[squeue_line("123", X, "PENDING", reason="Priority")],
        sacct=[sacct_line("123", X, "COMPLETED")],
    )
    obj = objects(backend, X)[(X, 1)]
    assert obj.phase is Phase.PENDING and obj.cause is not None
    assert obj.cause.kind is CauseKind.UNKNOWN and "but sacct: State=COMPLETED" in obj.cause.detail
    # squeue's own ending, when it comes, is the one read
    slurm.say(
        squeue=[squeue_line("123", X, "FAILED")], sacct=[sacct_line("123", X, "FAILED", exit="1:0")]
    )
    obj = objects(backend, X)[(X, 1)]
    assert obj.phase is Phase.ENDED and obj.cause is not None
    assert obj.cause.kind is CauseKind.NON_ZERO_EXIT and obj.cause.exit_code == 1


def test_sacct_running_job_squeue_does_not_list_is_alive_unknown_S4(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    (row,) = disagreement("test_sacct_running_job_squeue_does_not_list_is_alive_unknown_S4")
    assert TABLE[row].phase is Phase.RUNNING
    slurm.say(sacct=[sacct_line("123", X, "RUNNING")])  # a site whose sacct has the comment
    obj = objects(backend, X)[(X, 1)]
    assert obj.phase is Phase.RUNNING and obj.alive
    assert obj.cause is not None and obj.cause.kind is CauseKind.UNKNOWN
    assert "but squeue does not list it" in obj.cause.detail
    # without the comment the submission is unknowable: left out, as the missing case
    slurm.say(sacct=[sacct_line("123", X, "RUNNING", comment=False)])
    assert objects(backend, X) == {}


def test_reused_job_id_is_unknown_never_the_other_job_s_cause_S4(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    """job-x ran as 123; slurmctld's state was wiped and 123 went to job-y, which failed.
    Both forgotten by slurmctld: sacct alone holds the id's two jobs, in order."""
    (row,) = disagreement("test_reused_job_id_is_unknown_never_the_other_job_s_cause_S4")
    assert TABLE[row].kind is CauseKind.UNKNOWN
    slurm.say(
        sacct=[
            sacct_line("123", X, "COMPLETED", start="05"),  # sacctmgr's fix of a runaway
            sacct_line("123", Y, "FAILED", exit="1:0", start="20"),
        ]
    )
    found = objects(backend, X, Y)
    x, y = found[(X, 1)], found[(Y, 1)]
    assert x.object_id == y.object_id == "123"
    assert x.phase is Phase.ENDED and x.cause is not None
    assert x.cause.kind is CauseKind.UNKNOWN, x.cause  # never job-y's exit 1, nor "completed"
    assert "its job id now belongs to another job: sacct: JobID=123 JobName=dsp.job-y" in (
        x.cause.detail
    )
    assert y.cause is not None and y.cause.kind is CauseKind.NON_ZERO_EXIT
    assert [e.index for e in y.executions] == [0]  # job-x's row is never job-y's execution
    assert y.executions[0].started_at == datetime.fromisoformat(f"{T}:20").astimezone()

    # the id reused by the same job's next submission: the tags tell them apart
    slurm.say(
        squeue=[squeue_line("123", X, "RUNNING", sub=2)],
        sacct=[sacct_line("123", X, "RUNNING", comment=False), sacct_line("123", X, "COMPLETED")],
    )
    found = objects(backend, X)
    assert found[(X, 2)].phase is Phase.RUNNING and found[(X, 2)].cause is None
    assert found[(X, 1)].cause is not None and found[(X, 1)].cause.kind is CauseKind.UNKNOWN
    assert "Name=dsp.job-x Comment=dispatch;job=job-x;submission=2" in found[(X, 1)].cause.detail


def test_reused_job_id_steps_are_the_later_job_s_own_S42(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    """``sacct -j 123`` lists the steps of every job that held 123: the failing job's
    execution is attributed from the incarnation that started when it did."""
    slurm.say(
        squeue=[squeue_line("123", Y, "FAILED", start="20")],
        sacct=[
            sacct_line("123", X, "COMPLETED", start="05"),
            sacct_line("123", Y, "FAILED", exit="1:0", start="20"),
        ],
        steps=[
            f"123|dsp.{X}|COMPLETED|0:0||{T}:05|{T}:40|vm[1-2]",
            f"123.0|dsp-ranks-0-0|FAILED|1:0|1|{T}:06|{T}:30|vm1",
            f"123.1|dsp-ranks-1-1|COMPLETED|0:0|1|{T}:06|{T}:40|vm2",
            f"123|dsp.{Y}|FAILED|1:0||{T}:20|{T}:40|vm[1-2]",
            f"123.0|dsp-ranks-0-0|COMPLETED|0:0|1|{T}:21|{T}:40|vm1",
            f"123.1|dsp-ranks-1-1|FAILED|1:0|1|{T}:21|{T}:30|vm2",
        ],
    )
    y = objects(backend, X, Y)[(Y, 1)]
    assert y.cause is not None and y.cause.kind is CauseKind.NON_ZERO_EXIT
    assert (y.cause.nodes, y.cause.rank) == (("vm2",), 1)  # job-x's failing rank was 0 on vm1


def test_sacct_lagging_squeue_s_requeue_leaves_the_execution_out_S4(
    slurm: FakeSlurm, backend: SlurmBackend
) -> None:
    slurm.say(squeue=[squeue_line("123", X, "PENDING", reason="BeginTime", restarts=1)])
    obj = objects(backend, X)[(X, 1)]
    assert obj.phase is Phase.PENDING and obj.executions == ()
    assert obj.cause is not None and obj.cause.kind is CauseKind.REQUEUED
    slurm.say(
        squeue=[squeue_line("123", X, "PENDING", reason="BeginTime", restarts=1)],
        sacct=[sacct_line("123", X, "PREEMPTED"), sacct_line("123", X, "PENDING", comment=False)],
    )
    obj = objects(backend, X)[(X, 1)]
    assert [e.cause.kind for e in obj.executions if e.cause] == [CauseKind.PREEMPTED]


def test_docs_say_every_disagreement_and_name_tests_that_exist() -> None:
    text = (Path(__file__).parents[1] / "docs" / "mapping.md").read_text()
    assert render_disagreements() in text, (
        "docs/mapping.md is stale: python -m dispatch_slurm.classify disagreements"
    )
    names = set(globals())
    assert [d.test for d in DISAGREEMENTS if d.test not in names] == []
