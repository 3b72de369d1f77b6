"""``dispatch submit --sweep`` as a user runs it: the local backend and a SQLite record."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from click.testing import CliRunner
from dispatch import Capability, Declarations, Registry, hookimpl
from dispatch.cli.common import Context
from dispatch.cli.main import cli
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.waiting import eventually

PRINT = ["sh", "-c", 'echo "lr={lr} seed={seed} index=$DISPATCH_SWEEP_INDEX"']


def _events(sh: Shell) -> int:
    if not sh.db.exists():
        return 0
    with sqlite3.connect(sh.db) as db:
        return int(db.execute("SELECT count(*) FROM dispatch_events").fetchone()[0])


def test_a_2x2_sweep_runs_four_jobs_each_with_its_values(sh: Shell) -> None:
    out = sh.run("submit", "--sweep", "lr=[1e-3,3e-4],seed=1..2", "--json", "--", *PRINT)
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    group = made["group_id"]
    members = [m["job_id"] for m in made["members"]]
    assert members == [f"{group}-{i}" for i in range(4)]
    assert [m["values"] for m in made["members"]] == [
        {"lr": "1e-3", "seed": "1"},
        {"lr": "1e-3", "seed": "2"},
        {"lr": "3e-4", "seed": "1"},
        {"lr": "3e-4", "seed": "2"},
    ]
    assert all(m["object_id"] for m in made["members"])  # every one submitted at once

    def ended() -> list[str]:
        sh.run("supervise", "--once")
        return [m["state"] for m in sh.json("status", group)["members"]]  # type: ignore[index]

    eventually(ended, until=lambda s: s == ["succeeded"] * 4, interval=0.2, what="all succeed")
    for index, job_id in enumerate(members):
        logs = sh.run("logs", job_id)
        values = made["members"][index]["values"]
        assert logs.stdout.strip() == f"lr={values['lr']} seed={values['seed']} index={index}"
    (row,) = sh.json("list")  # type: ignore[misc]
    assert (row["group_id"], row["size"], row["states"]) == (group, 4, {"succeeded": 4})
    table = sh.run("list").stdout
    assert group in table and "4 succeeded" in table and f"{group}-1" not in table
    detail = sh.run("list", "--group", group).stdout
    assert all(job_id in detail for job_id in members)


def test_max_running_keeps_the_rest_waiting_for_a_slot(sh: Shell) -> None:
    out = sh.run("submit", "--sweep", "seed=1..3", "--max-running", "1", "--", "sleep", "{seed}0")
    assert out.returncode == 0, out.stderr
    group = out.stdout.strip()
    assert "waiting for a sweep slot" in out.stderr
    shown = sh.json("status", group)
    states = [(m["state"], m["waiting"]) for m in shown["members"]]  # type: ignore[index]
    assert states[1:] == [("pending", "waiting for a sweep slot")] * 2
    assert states[0][0] in ("pending", "running")
    assert shown["max_running"] == 1  # type: ignore[index]


def test_cancel_group_cancels_every_member(sh: Shell) -> None:
    out = sh.run("submit", "--sweep", "seed=1..3", "--max-running", "2", "--", "sleep", "3{seed}")
    group = out.stdout.strip()
    cancelled = sh.run("cancel", group, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    result = json.loads(cancelled.stdout)
    assert result["group_id"] == group and len(result["cancelled"]) == 3
    shown = sh.json("status", group)
    assert [m["state"] for m in shown["members"]] == ["cancelled"] * 3  # type: ignore[index]
    assert [m["attempt"] for m in shown["members"]] == [1, 1, 0]  # type: ignore[index]


@pytest.mark.parametrize(
    ("grid", "command", "words"),
    [
        ("lr=[1e-3,3e-4", ["echo", "{lr}"], "at character 4: a list opened with '['"),
        ("lr=1..x", ["echo", "{lr}"], "at character 4: expected a list"),
        ("lr=[1],seed=[2]", ["echo", "{lr}"], "never used: put {seed}"),
        ("lr=[1]", ["echo", "{lr}", "{seed}"], "command word 3 uses {seed}"),
        ("lr=[1],lr=[2]", ["echo", "{lr}"], "at character 8: the key 'lr' is given twice"),
        ("a=1..101,b=1..100", ["echo", "{a}{b}"], "10100 members; at most 10000"),
        ("a=[1]", ["echo", "{a} {x y}"], "not a {key} placeholder"),
    ],
)
def test_a_bad_sweep_exits_2_naming_the_part_and_records_nothing(
    sh: Shell, grid: str, command: list[str], words: str
) -> None:
    out = sh.run("submit", "--sweep", grid, "--", *command)
    assert out.returncode == 2, out.stderr
    assert words in out.stderr
    assert _events(sh) == 0


def test_max_running_without_a_sweep_is_refused(sh: Shell) -> None:
    out = sh.run("submit", "--max-running", "2", "--", "true")
    assert out.returncode == 2 and "give --sweep" in out.stderr
    assert _events(sh) == 0


def test_a_job_file_sweep_table(sh: Shell) -> None:
    sh.write(
        "job.toml",
        'command = ["sh", "-c", "echo {seed}"]\nname = "seed-{seed}"\n\n'
        '[sweep]\nseed = "1..2"\nmax_running = 1\n',
    )
    out = sh.run("submit", "job.toml", "--json")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["max_running"] == 1 and len(made["members"]) == 2
    rows = sh.json("list", "--group", made["group_id"])
    assert [r["name"] for r in rows] == ["seed-1", "seed-2"]  # type: ignore[index]
    sh.write("bad.toml", 'command = ["echo", "{seed}"]\n\n[sweep]\nseed = 3\n')
    bad = sh.run("submit", "bad.toml")
    assert bad.returncode == 2 and "line 4: key 'sweep.seed'" in bad.stderr


def test_a_sweeps_dry_run_shows_each_members_own_submission_and_records_nothing_S30(
    sh: Shell,
) -> None:
    """On a backend without arrays (local) each member is its own object: the dry run
    shows what each member's first submission sends."""
    grid = "lr=[0.1],seed=1..3"
    out = sh.run("submit", "--sweep", grid, "--max-running", "2", "--dry-run", "--", *PRINT)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    group = text.split("group id  ", 1)[1].split()[0]
    assert "dry run: nothing recorded, nothing sent to local" in text
    assert "one object per member (the first 2 at once; a supervisor sends each other" in text
    for index in range(3):
        assert f"=== {group}-{index}, submission 1 ===\n--- runner ---" in text
        assert f"DISPATCH_JOB_ID={group}-{index}\n" in text
        assert f"DISPATCH_SWEEP_INDEX={index}\n" in text
    assert text.count("--- command ---") == 3
    assert sh.recorded() == []


class _Arrays(SimulatedBackend):
    """An adapter declaring ``arrays`` without ``dispatch_prepare_array``."""

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        made = super().dispatch_declare()
        return made.model_copy(update={"capabilities": made.capabilities | {Capability.ARRAYS}})

    @hookimpl
    def dispatch_check_array(self, size: int, max_running: int | None) -> None:
        return None

    @hookimpl
    def dispatch_submit_array(self, group_id, members, max_running):  # type: ignore[no-untyped-def]
        raise AssertionError("a dry run sends nothing")


def test_a_sweeps_dry_run_on_arrays_without_prepare_array_says_one_array_S30(
    tmp_path: Path,
) -> None:
    registry = Registry.from_plugins({"simulated": _Arrays(SimScheduler())})
    out = CliRunner().invoke(
        cli,
        [
            *("submit", "--backend", "simulated", "--sweep", "seed=1..4", "--max-running", "2"),
            *("--dry-run", "--", "python", "train.py", "--seed", "{seed}"),
        ],
        obj=Context(f"sqlite://{tmp_path / 'r.db'}", registry=registry),
    )
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert (
        "gets the first submissions of all 4 members as ONE array, at most 2 at once "
        "(dispatch_submit_array); it builds it only when it sends it" in text
    )
    assert text.count('"command": [') == 4 and '    "4"\n' in text
    assert not (tmp_path / "r.db").exists()
