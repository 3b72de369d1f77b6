"""``list`` and ``watch`` say whether a supervisor watches each job not ended, in the
words ``status`` uses (one function, :func:`dispatch.core.supervision.supervision`, and
one rendering, :func:`dispatch.cli.render.watch_line`): in the table's notes, in
``list --json`` per row, and in ``watch``'s lines and ``watch --json``."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from datetime import timedelta

from cli.cli_shell import DISPATCH, Shell
from cli.test_cli_list_table import EXIT_HOLD, PREEMPT, Rig, rig
from dispatch.cli.live import Follow
from dispatch.cli.table import plain
from dispatch.job_records import status_of, with_supervision
from dispatch.listing import Listing, list_jobs
from dispatch.model.supervision import SupervisorBeat
from dispatch_testing.simulated.scheduler import runs_forever, succeed
from dispatch_testing.waiting import eventually

__all__ = ["rig"]  # the fixture, shared with the list tests

HOLD_ON_EXIT = '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n'


def _beat(rig: Rig, owner: str = "sup") -> SupervisorBeat:
    now = rig.sched.now()
    return SupervisorBeat(
        owner=owner, host="login1", pid=4242, started_at=now, last_tick=now, interval=5, lease=90
    )


def test_list_rows_say_who_supervises_as_status_does(rig: Rig) -> None:
    running = rig.job(PREEMPT, name="running")
    done = rig.job(name="done")
    rig.sched.plan(running, 1, runs_forever())
    rig.sched.plan(done, 1, succeed(after=1))
    rig.settle()

    def same_as_status() -> None:
        now = rig.sched.now()
        shown = rig.rows()[running].supervisor
        status = with_supervision(rig.store, status_of(rig.store, rig.registry, running), now)
        assert shown == status.supervisor  # the answer status gives, from the same function

    rows = rig.rows()
    assert rows[done].supervisor is None  # an ended job needs no supervisor
    holder = rows[running].supervisor  # its lease is held by a supervisor with no beat
    assert holder is not None and holder.watched and holder.holds_lease
    assert holder.message.startswith("supervised by sup, which follows this job alone")
    same_as_status()

    rig.store.record_beat(_beat(rig))  # the supervisor holding the lease ticks
    shown = rig.rows()[running].supervisor
    assert shown is not None and shown.watched and shown.holds_lease
    assert shown.message == "supervised by login1:4242, last tick 0 s ago"
    same_as_status()

    rig.sched.advance(900)  # it stopped ticking: its lease lapsed
    gone = rig.rows()[running].supervisor
    assert gone is not None and not gone.watched
    assert gone.message.startswith("no supervisor has ticked for 15 min")
    same_as_status()


def test_the_table_says_it_once_or_per_answer_loudly_when_nobody_watches(rig: Rig) -> None:
    first = rig.job(PREEMPT, name="first")
    second = rig.job(EXIT_HOLD, name="second")
    rig.sched.plan(first, 1, runs_forever())
    rig.sched.plan(second, 1, runs_forever())
    rig.settle()
    rig.sched.advance(300)  # the leases of the supervisor that made them lapse

    text = plain(rig_listing(rig), rig.sched.now(), None, {})
    (line,) = [t for t in text.splitlines() if t.startswith("watch:")]
    assert line == (
        "watch: WARNING: no supervisor has ever ticked: nothing will be recovered; "
        "run `dispatch supervise`"
    )

    rig.store.record_beat(_beat(rig, owner="other"))
    rig.store.acquire_leases([first], "other", timedelta(seconds=90), rig.sched.now())
    rig.sched.advance(4)
    text = plain(rig_listing(rig), rig.sched.now(), None, {})
    lines = {t for t in text.splitlines() if t.startswith("watch:")}
    assert lines == {
        f"watch: supervised by login1:4242, last tick 4 s ago ({first})",
        "watch: supervised by login1:4242, last tick 4 s ago (it takes this job at its "
        f"next tick) ({second})",
    }


def rig_listing(rig: Rig) -> Listing:
    return list_jobs(rig.store, rig.registry, now=rig.sched.now())


def test_a_watch_line_each_time_who_supervises_changes() -> None:
    from datetime import UTC, datetime

    from dispatch.core.status import Status
    from dispatch.model.enums import Level, State
    from dispatch.model.supervision import Supervision

    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def status(sup: Supervision | None, seconds: int) -> Status:
        return Status(
            job_id="j1",
            backend="local",
            state=State.RUNNING,
            level=Level.RECORD,
            settled=True,
            at=t0 + timedelta(seconds=seconds),
            supervisor=sup,
        )

    other = Supervision(
        watched=True, message="supervised by login1:7, last tick 3 s ago", owner="login1:7"
    )
    older = other.model_copy(update={"message": "supervised by login1:7, last tick 9 s ago"})
    gone = Supervision(watched=False, message="no supervisor has ticked for 12 min: run it")
    shown: list[str] = []
    follow = Follow(t0, tty=False)
    follow.echo = shown.append  # type: ignore[method-assign]
    for i, sup in enumerate([other, older, gone, gone]):
        follow.status(status(sup, i))
    assert shown == [
        "09:00:00  running    -",
        "09:00:00  watch: supervised by login1:7, last tick 3 s ago",
        "09:00:02  watch: WARNING: no supervisor has ticked for 12 min: run it",
    ]


def test_list_and_list_json_say_nobody_supervises_a_submitted_job(sh: Shell) -> None:
    job = sh.run("submit", "--", "sleep", "300").stdout.strip()
    try:
        table = sh.run("list")
        assert table.returncode == 0, table.stderr
        assert (
            "watch: WARNING: no supervisor has ever ticked: nothing will be recovered; "
            "run `dispatch supervise`" in table.stdout.splitlines()
        )
        (row,) = sh.json("list")  # type: ignore[misc]
        assert row["job_id"] == job
        assert row["supervisor"]["watched"] is False
        assert row["supervisor"]["message"] == sh.json("status", job)["supervisor"]["message"]  # type: ignore[index]
    finally:
        sh.run("cancel", job)
    assert sh.run("supervise", "--once").returncode == 0  # commits the cancel
    (row,) = sh.json("list")  # type: ignore[misc]
    assert row["outcome"] == "cancelled" and row["supervisor"] is None


def test_watch_names_itself_while_it_follows_and_who_watches_once_held(sh: Shell) -> None:
    policy = sh.write("hold.toml", HOLD_ON_EXIT)
    job = sh.run("submit", "--policy", str(policy), "--", "sh", "-c", "exit 3").stdout.strip()
    watch = subprocess.run(
        [DISPATCH, "watch", job, "--interval", "0.2"],
        env=sh.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert watch.returncode == 6, watch.stderr  # held
    lines = watch.stdout.splitlines()
    me = rf"supervised by {re.escape(socket.gethostname())}:\d+, which follows this job alone"
    assert any(re.fullmatch(rf"\d\d:\d\d:\d\d  watch: {me} .*", t) for t in lines), lines
    # once it has let the job go, what status says: nobody watches
    assert lines[-1].startswith("watch: WARNING: no supervisor has ever ticked"), lines
    held = sh.run("watch", job, "--interval", "0.2", "--json")
    assert held.returncode == 6
    shown = json.loads(held.stdout)["supervisor"]
    assert shown["watched"] is False
    assert shown["message"] == sh.json("status", job)["supervisor"]["message"]  # type: ignore[index]
    eventually(lambda: sh.run("give-up", job).returncode, until=lambda rc: rc == 0, what="give-up")
