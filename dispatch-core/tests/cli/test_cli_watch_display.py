"""What ``watch`` and ``submit --wait`` show: one plain line per change, with how long
and why a pending job waits (the scheduler's pending reason), and on a terminal a last
line kept up to date in place."""

from __future__ import annotations

import io
import itertools
import subprocess
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta

from cli.cli_shell import DISPATCH, Shell
from cli.test_cli_list_table import _pty
from dispatch.cli.live import Follow, line
from dispatch.core.status import Status, SubmissionStatus
from dispatch.model.discovery import Execution, ObjectView
from dispatch.model.enums import Level, Phase, State

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _status(
    state: State, phase: Phase | None, reason: str | None = None, at: datetime = T0
) -> Status:
    objects = ()
    if phase is not None:
        objects = (
            ObjectView(
                object_id="4242",
                job_id="j1",
                submission=1,
                phase=phase,
                scheduler_state="PENDING" if phase is Phase.PENDING else "RUNNING",
                pending_reason=reason,
                created_at=T0,
                executions=(Execution(index=0, started_at=T0 + timedelta(minutes=5)),)
                if phase is Phase.RUNNING
                else (),
            ),
        )
    return Status(
        job_id="j1",
        backend="slurm",
        state=state,
        level=Level.RECORD,
        settled=True,
        at=at,
        submissions=(SubmissionStatus(number=1, object_id="4242", objects=objects),),
    )


def test_a_pending_line_says_how_long_and_why_it_waits() -> None:
    waiting = _status(State.PENDING, Phase.PENDING, "Priority", at=T0 + timedelta(minutes=2))
    shown = line(waiting, T0, T0 + timedelta(minutes=2, seconds=13))
    assert shown == "09:02:00  pending    -  waiting 2m13s: Priority"
    running = _status(State.RUNNING, Phase.RUNNING)
    assert line(running, T0, T0 + timedelta(hours=1)) == "09:00:00  running    -"


def test_the_reason_is_escaped() -> None:
    evil = _status(State.PENDING, Phase.PENDING, "Reason\x1b[2J")
    assert "\x1b" not in line(evil, T0, T0) and "\\x1b[2J" in line(evil, T0, T0)


def test_piped_one_line_per_change_the_reason_counting() -> None:
    follow = Follow(T0, tty=False)
    out = io.StringIO()
    with redirect_stdout(out), follow:
        follow.status(_status(State.PENDING, Phase.PENDING, "Priority"))
        follow.status(_status(State.PENDING, Phase.PENDING, "Priority"))  # no change
        follow.status(_status(State.PENDING, Phase.PENDING, "Resources"))  # the reason
        follow.status(_status(State.RUNNING, Phase.RUNNING))
        follow.status(_status(State.RUNNING, Phase.RUNNING))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].endswith(": Priority") and lines[1].endswith(": Resources")
    assert "running" in lines[2] and "waiting" not in lines[2]
    assert "\x1b" not in out.getvalue()


def test_the_live_line_counts_and_names_the_object() -> None:
    follow = Follow(T0, tty=False)
    follow.current = _status(State.PENDING, Phase.PENDING, "Priority")
    text = follow.now_line()
    assert text.startswith("pending for ") and "waiting: Priority" in text
    assert "(slurm 4242)" in text
    follow.current = _status(State.RUNNING, Phase.RUNNING)
    assert follow.now_line().startswith("running for ")


def test_watch_piped_prints_plain_lines(sh: Shell) -> None:
    job = sh.run("submit", "--", "sh", "-c", "sleep 1").stdout.strip()
    out = sh.run("watch", job, "--interval", "0.2", timeout=120)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    shown = [row.split(None, 1)[1] for row in out.stdout.splitlines()]  # without the time
    assert shown[-1].startswith("succeeded")
    assert all(a != b for a, b in itertools.pairwise(shown)), shown  # changes only


def test_submit_wait_on_a_terminal_keeps_a_live_line(sh: Shell) -> None:
    drawn = _pty(sh, "submit", "--wait", "--interval", "0.2", "--", "sh", "-c", "sleep 3")
    assert "running for " in drawn  # the line kept up to date
    assert "\x1b[2K" in drawn  # redrawn in place
    assert "succeeded  none" in drawn  # and the changes, as lines


def test_submit_wait_piped_exits_with_the_state(sh: Shell) -> None:
    done = subprocess.run(
        [DISPATCH, "submit", "--wait", "--interval", "0.2", "--", "sh", "-c", "exit 3"],
        capture_output=True,
        text=True,
        env=sh.env,
        cwd=sh.home,
        timeout=120,
    )
    assert done.returncode != 0
    assert "failed" in done.stdout and "\x1b" not in done.stdout
