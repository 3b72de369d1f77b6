"""A sweep as one Slurm job array, offline: the sbatch it sends, the MaxArraySize check,
and array tasks read from squeue/sacct (``123_4`` and the gathered ``123_[5-11%4]``) in
every release's own output form (S-19, S-30, S-32, S-36)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import ArrayMember, BadInput, CauseKind, JobSpec, ObjectView, Phase
from dispatch_slurm.backend import SlurmBackend, _ranges
from dispatch_slurm.observe import build_objects
from dispatch_slurm.parse import ParseError, array_tasks, parse_sinfo_nodes, parse_squeue
from dispatch_slurm.runner import Result, Runner
from dispatch_slurm.tags import array_comment, array_group
from dispatch_slurm.version import parse_version

DATA = Path(__file__).resolve().parent / "data"
RELEASES = sorted(p.name for p in DATA.iterdir() if (p / "tick.version").exists())
GROUP = "g0123456789ab"


class _Recording(Runner):
    def __init__(self, answers: Mapping[str, Result] | None = None) -> None:
        super().__init__()
        self.answers = dict(answers or {})
        self.sent: list[tuple[list[str], str]] = []

    def run(self, argv: Sequence[str], **_: object) -> Result:
        self.calls += 1
        if argv[0] == "sbatch":
            self.sent.append((list(argv), Path(argv[-1]).read_text()))
            return Result(tuple(argv), 0, "4242\n", "")
        return self.answers[" ".join(argv[:2])]


def _members(count: int) -> list[ArrayMember]:
    return [
        ArrayMember(
            job_id=f"{GROUP}-{i}",
            index=i,
            spec=JobSpec(
                name=f"seed-{i}",
                command=("python", "train.py", "--seed", str(i), "it's"),
                env={"DISPATCH_SWEEP_INDEX": str(i), "DISPATCH_SWEEP_SEED": str(i)},
                options={"partition": "low"},
            ),
        )
        for i in range(count)
    ]


def test_array_ids_read_as_each_task_and_a_plain_id_as_no_task() -> None:
    assert array_tasks("123_4") == [("123_4", 4)]
    assert array_tasks("123_[0-2,7%4]") == [("123_0", 0), ("123_1", 1), ("123_2", 2), ("123_7", 7)]
    assert array_tasks("123_[5-11]") == [(f"123_{i}", i) for i in range(5, 12)]
    assert array_tasks("123") == []


@pytest.mark.parametrize("bad", ["123_", "123_[3-1]", "123_[a-b]", "123_[1-2", "_4", "1_2_3"])
def test_an_array_id_that_does_not_parse_is_refused_naming_it_S36(bad: str) -> None:
    with pytest.raises(ParseError, match="array task"):
        array_tasks(bad)


def test_the_array_comment_names_its_group_and_no_other_comment_does() -> None:
    assert array_group(array_comment(GROUP)) == GROUP
    assert array_group("dispatch;job=j1;submission=1;gate=open") is None
    assert array_group("") is None


def test_a_sweep_is_one_sbatch_array_bounded_by_max_running_each_task_its_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    ids = SlurmBackend(runner).dispatch_submit_array(GROUP, _members(3), 2)
    assert ids == ["4242_0", "4242_1", "4242_2"]
    ((argv, script),) = runner.sent
    assert "--array=0-2%2" in argv
    assert f"--job-name=dsp.{GROUP}" in argv
    assert f"--comment=dispatch;array={GROUP};submission=1;gate=open" in argv
    assert f"--output={tmp_path}/logs/job-{GROUP}-%a/submission-1/batch.out" in argv
    assert "--partition=low" in argv
    # the script's member prologue, run by bash as array task 1 (the wrapper cut off)
    prologue = script.split("\nlauncher=$1", 1)[0]
    shown = subprocess.run(
        [
            "bash",
            "-c",
            prologue + '\nprintf "%s\\n" "$@" "$DISPATCH_JOB_ID" "$DISPATCH_SWEEP_SEED"',
        ],
        env={"SLURM_ARRAY_TASK_ID": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    logs = f"{tmp_path}/logs/job-{GROUP}-1/submission-1"
    assert shown == ["tasks", logs, "python", "train.py", "--seed", "1", "it's", f"{GROUP}-1", "1"]
    assert (tmp_path / "logs" / f"job-{GROUP}-2" / "submission-1").is_dir()
    stray = subprocess.run(
        ["bash", "-c", prologue], env={"SLURM_ARRAY_TASK_ID": "9"}, capture_output=True, text=True
    )
    assert stray.returncode == 1 and "no member" in stray.stderr


def test_members_with_their_own_checkpoint_directories_share_one_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A map's members (one checkpoint directory and heartbeat each) are still one array:
    each task exports its own directory."""
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    members = [
        m.model_copy(
            update={
                "spec": m.spec.model_copy(
                    update={
                        "checkpoint_dir": str(tmp_path / f"member-{m.index}"),
                        "heartbeat": str(tmp_path / f"member-{m.index}" / "beat"),
                    }
                )
            }
        )
        for m in _members(3)
    ]
    ids = SlurmBackend(runner).dispatch_submit_array(GROUP, members, None)
    assert ids == ["4242_0", "4242_1", "4242_2"]
    ((_, script),) = runner.sent
    prologue = script.split("\nlauncher=$1", 1)[0]
    shown = subprocess.run(
        [
            "bash",
            "-c",
            prologue + '\nprintf "%s\\n" "$DISPATCH_CHECKPOINT_DIR" "$DISPATCH_HEARTBEAT"',
        ],
        env={"SLURM_ARRAY_TASK_ID": "2", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert shown == [str(tmp_path / "member-2"), str(tmp_path / "member-2" / "beat")]


def test_the_array_names_its_tasks_as_ranges() -> None:
    assert _ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert _ranges(list(range(1000))) == "0-999"
    assert _ranges([4]) == "4"


def test_members_that_cannot_share_one_array_are_left_to_single_submits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    members = _members(2)
    scripted = [m.model_copy(update={"spec": JobSpec(script="#!/bin/sh\ntrue\n")}) for m in members]
    assert SlurmBackend(runner).dispatch_submit_array(GROUP, scripted, None) is None
    odd = members[1].spec.model_copy(update={"options": {"partition": "high"}})
    mixed = [members[0], members[1].model_copy(update={"spec": odd})]
    assert SlurmBackend(runner).dispatch_submit_array(GROUP, mixed, None) is None
    assert runner.sent == []


def test_a_sweep_over_max_array_size_is_refused_naming_the_limit() -> None:
    config = "Configuration data as of 2026-12-02T01:00:00\nMaxArraySize            = 1001\n"
    runner = _Recording({"scontrol show": Result(("scontrol",), 0, config, "")})
    backend = SlurmBackend(runner)
    backend.dispatch_check_array(1001, None)
    with pytest.raises(BadInput, match="MaxArraySize is 1001"):
        backend.dispatch_check_array(1002, 4)
    assert runner.calls == 1  # read once


def _as_array_rows(line: str, array: str) -> str:
    """A release's real squeue row rewritten as task 0 of a sweep's array, and beside it
    a gathered pending row for tasks 1-3 (every other field as that release printed it)."""
    fields = line.split("|")
    fields[1] = f"dsp.{GROUP}"
    fields[11] = array_comment(GROUP)
    task = [f"{array}_0", *fields[1:]]
    pending = [f"{array}_[1-3%2]", *fields[1:]]
    pending[2], pending[5], pending[9] = "PENDING", "0", ""
    pending[12] = "JobArrayTaskLimit|"
    return "|".join(task) + "\n" + "|".join(pending) + "\n"


@pytest.mark.parametrize("release", RELEASES)
def test_array_tasks_read_in_every_releases_own_output_form_S19(release: str) -> None:
    """Each dispatch row of the release's capture, read as an array task, is classified as
    the plain job was; the gathered pending row stands for each of its tasks."""
    folder = DATA / release
    version = parse_version((folder / "tick.version").read_text())
    at = datetime.now(UTC)
    wanted = {f"{GROUP}-{i}" for i in range(4)}
    seen = 0
    for line in (folder / "tick.squeue").read_text().splitlines():
        (row,) = parse_squeue(line, version)
        job = row.name[len("dsp.") :]
        plain = build_objects(line + "\n", "", None, {job}, at, version=version)
        if not row.name.startswith("dsp.") or not plain or "gate=held" in row.comment:
            continue  # an array's tasks are never gated by dispatch
        text = _as_array_rows(line, "777")
        found = {o.job_id: o for o in build_objects(text, "", None, wanted, at, version=version)}
        assert sorted(found) == sorted(wanted), line
        task, alone = found[f"{GROUP}-0"], plain[0]
        assert task.object_id == "777_0" and task.submission == 1
        assert (task.phase, task.scheduler_state) == (alone.phase, alone.scheduler_state), line
        assert (task.cause and task.cause.kind, task.cause and task.cause.exit_code) == (
            alone.cause and alone.cause.kind,
            alone.cause and alone.cause.exit_code,
        ), line
        for i in (1, 2, 3):
            waiting = found[f"{GROUP}-{i}"]
            assert waiting.object_id == f"777_{i}" and waiting.phase is Phase.PENDING
            assert waiting.pending_reason == "JobArrayTaskLimit" and waiting.cause is None
        seen += 1
    assert seen >= 5, f"only {seen} dispatch rows in the {release} capture"


def _recorded(prefix: str, wanted: set[str]) -> dict[tuple[str, int], ObjectView]:
    """One discovery recorded on 26.05.3 (``scripts/record-discovery.py``), read again."""
    folder = DATA / "26.05.3"

    def text(kind: str) -> str:
        path = folder / f"{prefix}.{kind}"
        return path.read_text() if path.exists() else ""

    version = parse_version(text("version"))
    nodes = parse_sinfo_nodes(text("sinfo")) if text("sinfo") else None
    objects = build_objects(
        text("squeue"),
        text("sacct"),
        nodes,
        wanted,
        datetime.now(UTC),
        steps_text=text("steps"),
        events_text=text("sacctmgr"),
        version=version,
    )
    return {(o.job_id, o.submission): o for o in objects}


def test_a_recorded_array_each_task_classified_on_its_own_S19() -> None:
    """The live 12-member array on 26.05.3: task 0 preempted, task 1 on a lost node, task 3
    exit 1, the rest succeeded; members 0 and 1 then ran again as single jobs."""
    group = "g24e0f8e20b35"
    seen = _recorded("arrays-ended", {f"{group}-{i}" for i in range(12)})
    kinds = {
        (job_id, submission): (o.object_id, o.phase, o.cause.kind if o.cause else None)
        for (job_id, submission), o in seen.items()
    }
    assert kinds.pop((f"{group}-0", 1)) == ("15000_0", Phase.ENDED, CauseKind.PREEMPTED)
    assert kinds.pop((f"{group}-1", 1)) == ("15000_1", Phase.ENDED, CauseKind.NODE_LOST)
    assert kinds.pop((f"{group}-3", 1)) == ("15000_3", Phase.ENDED, CauseKind.NON_ZERO_EXIT)
    assert kinds.pop((f"{group}-0", 2)) == ("15008", Phase.ENDED, CauseKind.NONE)
    assert kinds.pop((f"{group}-1", 2)) == ("15014", Phase.ENDED, CauseKind.NONE)
    assert kinds == {
        (f"{group}-{i}", 1): (f"15000_{i}", Phase.ENDED, CauseKind.NONE)
        for i in (2, 4, 5, 6, 7, 8, 9, 10, 11)
    }
    failed = seen[(f"{group}-3", 1)].cause
    assert failed is not None and failed.exit_code == 1
    lost = seen[(f"{group}-1", 1)].cause
    assert lost is not None and "NODE_FAIL" in lost.detail


def test_a_recorded_pending_array_row_stands_for_each_waiting_task_S19() -> None:
    """``15015_[4-11%4]``: squeue's one row for the eight tasks the array's %4 holds back
    (sacct's gathered ``15015_[0-11%4]`` row is left to squeue)."""
    group = "g17209227b226"
    seen = _recorded("arrays-pending", {f"{group}-{i}" for i in range(12)})
    assert sorted(seen) == sorted((f"{group}-{i}", 1) for i in range(12))
    for i in range(12):
        view = seen[(f"{group}-{i}", 1)]
        assert view.object_id == f"15015_{i}"
        if i < 4:
            assert view.phase is Phase.RUNNING and view.cause is None
            assert [e.nodes for e in view.executions] == [("node1",)]
        else:
            assert view.phase is Phase.PENDING and view.executions == ()
            assert view.pending_reason == "JobArrayTaskLimit" and view.cause is None
