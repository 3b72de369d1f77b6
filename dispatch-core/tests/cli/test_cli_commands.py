"""The ``dispatch`` command as a user runs it: a real process, the local backend, SQLite."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from dispatch_testing.waiting import eventually

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


class Shell:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "XDG_STATE_HOME": str(home / "state"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
        }
        self.env.pop("DISPATCH_STORE", None)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            cwd=self.home,
        )

    def json(self, *args: str) -> object:
        out = self.run(*args, "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def write(self, name: str, text: str) -> Path:
        path = self.home / name
        path.write_text(text)
        return path

    @property
    def db(self) -> Path:
        return self.home / "state" / "dispatch" / "record.db"


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


HOLD_ON_EXIT = '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n'
RESUBMIT_ON_EXIT = '[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 1\n'


def test_submit_wait_recovers_by_policy_and_shows_history(sh: Shell) -> None:
    marker = sh.home / "ran"
    script = sh.write("flaky.sh", f"[ -e {marker} ] && exit 0\ntouch {marker}\nexit 1\n")
    policy = sh.write("p.toml", RESUBMIT_ON_EXIT)
    out = sh.run(
        "submit", "--policy", str(policy), "--interval", "0.2", "--wait", "--", "sh", str(script)
    )
    assert out.returncode == 0, out.stderr
    job = out.stdout.splitlines()[0]
    status = sh.json("status", job)
    assert status["state"] == "succeeded" and status["settled"] is True  # type: ignore[index]
    assert [h["event"] for h in status["history"]] == ["recovery-started", "outcome-committed"]  # type: ignore[index]
    assert status["history"][0]["cause"]["exit_code"] == 1  # type: ignore[index]
    assert set(status) >= {
        "job_id",
        "state",
        "cause",
        "settled",
        "level",
        "history",
        "submissions",
        "escalations",
    }  # type: ignore[arg-type]
    text = sh.run("history", job).stdout
    assert "recovery-started" in text and "outcome-committed" in text


@pytest.mark.parametrize(
    "command,code,state",
    [
        (["sh", "-c", "exit 3"], 1, "failed"),
        (["true"], 0, "succeeded"),
    ],
)
def test_wait_exit_codes_follow_the_outcome(
    sh: Shell, command: list[str], code: int, state: str
) -> None:
    out = sh.run("submit", "--interval", "0.2", "--wait", "--json", "--", *command)
    assert out.returncode == code, out.stderr
    assert json.loads(out.stdout)["state"] == state


def test_hold_exits_6_then_give_up_fails_with_the_ending_cause_S14(sh: Shell) -> None:
    policy = sh.write("p.toml", HOLD_ON_EXIT)
    out = sh.run(
        "submit", "--policy", str(policy), "--interval", "0.2", "--wait", "--", "sh", "-c", "exit 4"
    )
    assert out.returncode == 6, out.stderr
    job = out.stdout.splitlines()[0]
    assert "dispatch resubmit" in out.stdout
    gave = sh.run("give-up", job, "--json")
    assert gave.returncode == 0, gave.stderr
    st = json.loads(gave.stdout)
    assert (st["state"], st["cause"]["kind"], st["cause"]["exit_code"]) == (
        "failed",
        "non-zero-exit",
        4,
    )


def test_give_up_a_job_shown_held_not_yet_committed_S14(sh: Shell) -> None:
    """A regression: status said `held (not yet committed)` while give-up said "not held"."""
    policy = sh.write("p.toml", HOLD_ON_EXIT)
    job = sh.run("submit", "--policy", str(policy), "--", "sh", "-c", "exit 4").stdout.strip()
    # submitted by submit itself; no supervisor runs, so nobody commits its ending
    shown = eventually(
        lambda: sh.json("status", job),
        until=lambda shown: shown["state"] == "held",  # type: ignore[index]
        interval=0.1,
        what=f"{job} is shown held",
    )
    assert (shown["state"], shown["settled"]) == ("held", False)  # type: ignore[index]
    gave = sh.run("give-up", job, "--json")
    assert gave.returncode == 0, gave.stderr
    st = json.loads(gave.stdout)
    assert (st["state"], st["cause"]["exit_code"], st["settled"]) == ("failed", 4, True)
    events = [h["event"] for h in sh.json("history", job)]  # type: ignore[union-attr]
    assert events[0] == "hold-placed" and events[-1] == "outcome-committed"


def test_cancel_a_running_job_S12(sh: Shell) -> None:
    job = sh.run("submit", "--", "sleep", "30").stdout.strip()
    sh.run("supervise", "--once")
    out = sh.run("cancel", job, "--json")
    assert out.returncode == 0, out.stderr
    st = sh.run("watch", job, "--interval", "0.2", "--json")
    assert st.returncode == 5, st.stderr
    final = json.loads(st.stdout)
    assert final["state"] == "cancelled" and final["cause"]["provenance"] == "actor"


def test_supersede_a_failed_job_S18(sh: Shell) -> None:
    out = sh.run("submit", "--interval", "0.2", "--wait", "--", "false")
    old = out.stdout.splitlines()[0]
    new = sh.json("supersede", old)["job_id"]  # type: ignore[index]
    old_status = sh.json("status", old)
    assert old_status["state"] == "failed" and old_status["superseded_by"] == [new]  # type: ignore[index]
    assert sh.json("status", new)["supersedes"] == old  # type: ignore[index]


@pytest.mark.parametrize(
    "policy,words",
    [
        (
            '[[rule]]\non = ["martian"]\naction = "hold"\n',
            ["p.toml: rule 1", "field 'on'", "'martian'"],
        ),
        (
            '[[rule]]\non = ["preempted"]\naction = "resubmit"\n',
            ["p.toml: rule 1", "positive budget"],
        ),
        (
            '[[rule]]\non = ["preempted"]\naction = "hold"\n'
            '[[rule]]\non = ["preempted"]\naction = "escalate"\n',
            ["rule 1 and rule 2", "'preempted'"],
        ),
        (
            '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = "3"\n',
            ["rule 1", "field 'budget'"],
        ),
        ('[[rule]]\non = ["preempted"]\nactoin = "hold"\n', ["rule 1", "actoin"]),
        ("[[rule]\n", ["p.toml: not valid TOML"]),
    ],
)
def test_invalid_policy_file_exit_2_names_file_rule_field_S36(
    sh: Shell, policy: str, words: list[str]
) -> None:
    path = sh.write("p.toml", policy)
    for args in (
        ["plan", "--backend", "local", "--policy", str(path)],
        ["submit", "--policy", str(path), "--", "true"],
    ):
        out = sh.run(*args)
        assert out.returncode == 2, out.stdout + out.stderr
        for word in words:
            assert word in out.stderr
    assert not sh.db.exists() or sh.json("list") == []  # nothing was recorded


def test_plan_shows_enforcers_uncovered_and_unenforced_S10_S11(sh: Shell) -> None:
    path = sh.write("p.toml", '[[rule]]\non = ["non-zero-exit"]\naction = "restart"\nbudget = 2\n')
    plan = sh.json("plan", "--backend", "local", "--policy", str(path))
    assert plan["unenforced"] == [1]  # type: ignore[index]
    assert "launch-failed" in plan["uncovered"] and "preempted" in plan["not_reported"]  # type: ignore[index]
    text = sh.run("plan", "--backend", "local", "--policy", str(path)).stdout
    assert "NOT ENFORCED" in text


@pytest.mark.parametrize(
    "args,words",
    [
        (
            ["submit", "--backend", "mysched", "--", "true"],
            "can't be found, is its plugin installed",
        ),
        (
            ["submit", "-o", "partition=gpu", "--", "true"],
            "does not accept the option(s) partition",
        ),
        (["submit", "--time", "soon", "--", "true"], "--time 'soon'"),
        (["submit", "--mem", "lots", "--", "true"], "--mem 'lots'"),
        (["submit", "--nodes", "0", "--", "true"], "'--nodes': 0 is not in the range 1<=x"),
        (["submit"], "give a command after `--` or --script FILE"),
        (["submit", "--script", "missing.sh"], "--script missing.sh"),
        (["status", "jnope"], "no record for job id 'jnope'"),
        (["resubmit", "jnope"], "no record for job id 'jnope'"),
    ],
)
def test_bad_input_exit_2_and_nothing_recorded_S36(sh: Shell, args: list[str], words: str) -> None:
    out = sh.run(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert words in out.stderr
    assert not sh.db.exists() or sh.json("list") == []


def test_request_the_state_refuses_changes_nothing_S36(sh: Shell) -> None:
    job = sh.run("submit", "--", "sleep", "30").stdout.strip()
    before = sh.json("history", job)
    for verb in ("resubmit", "give-up"):
        out = sh.run(verb, job)
        assert out.returncode == 2 and "is not held" in out.stderr
    assert sh.json("history", job) == before
    sh.run("cancel", job)


def test_undecodable_record_exit_4_names_job_seq_field_S6_S36(sh: Shell) -> None:
    job = sh.run("submit", "--", "true").stdout.strip()
    with sqlite3.connect(sh.db) as db:
        table, column = _event_table(db)
        row = db.execute(
            f"SELECT rowid, {column} FROM {table} WHERE job_id = ? ORDER BY seq LIMIT 1", (job,)
        ).fetchone()
        body = row[1].replace('"backend":"local"', '"backend":"local","colour":"blue"', 1)
        assert body != row[1]
        db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (body, row[0]))
    out = sh.run("status", job)
    assert out.returncode == 4, out.stderr
    assert job in out.stderr and "colour" in out.stderr and "1" in out.stderr


def test_list_shows_a_quarantined_job_and_the_others_S48(sh: Shell) -> None:
    good = sh.run("submit", "--name", "good", "--", "true").stdout.strip()
    bad = sh.run("submit", "--name", "bad", "--", "true").stdout.strip()
    with sqlite3.connect(sh.db) as db:
        table = next(
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if {"job_id", "outcome"} <= {c[1] for c in db.execute(f"PRAGMA table_info({name})")}
        )
        db.execute(f"UPDATE {table} SET outcome = 'martian' WHERE job_id = ?", (bad,))
    out = sh.run("list")
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert "good" in lines[good] and "quarantined" not in lines[good]
    assert "quarantined" in lines[bad]
    assert "martian" in lines[f"{bad}:"]  # the note under the table says what is wrong
    rows = {r["job_id"]: r for r in sh.json("list")}  # type: ignore[union-attr]
    assert rows[good]["quarantined"] is None and "martian" in rows[bad]["quarantined"]


def _event_table(db: sqlite3.Connection) -> tuple[str, str]:
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        cols = [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
        if "seq" in cols and "job_id" in cols:
            body = next(c for c in cols if c not in ("job_id", "seq", "position", "type", "at"))
            return name, body
    raise AssertionError("no event table")


def test_unreachable_store_exit_3_S5(sh: Shell) -> None:
    sh.env["DISPATCH_STORE"] = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    out = sh.run("list")
    assert out.returncode == 3, out.stderr


def test_backends_lists_installed_with_declarations_S31(sh: Shell) -> None:
    data = sh.json("backends")
    names = {b["name"]: b for b in data["backends"]}  # type: ignore[index]
    assert names["local"]["distribution"] == "dispatch-core"
    assert "gating" in names["local"]["declarations"]["capabilities"]
    assert "broken" in data  # type: ignore[operator]


def test_status_without_record_is_object_only_S29(sh: Shell) -> None:
    job = sh.run("submit", "--", "sleep", "30").stdout.strip()
    sh.run("supervise", "--once")
    st = sh.json("status", job, "--no-record", "--backend", "local")
    assert (st["level"], st["state"]) == ("object-only", "running")  # type: ignore[index]
    sh.run("cancel", job)


def test_help_lists_the_commands() -> None:
    out = subprocess.run([DISPATCH, "--help"], capture_output=True, text=True, check=True)
    listed = {line.split()[0] for line in out.stdout.split("Commands:")[1].splitlines() if line}
    assert listed == {
        "backends",
        "plan",
        "submit",
        "status",
        "list",
        "watch",
        "history",
        "logs",
        "cancel",
        "resubmit",
        "give-up",
        "supersede",
        "supervise",
        "config",
        "ui",
        "metrics",
    }
