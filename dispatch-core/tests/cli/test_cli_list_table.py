"""``dispatch list``: the live state as status computes it, cause, attempt n/N, budget
left, the filters, a bounded read of a big record (one discovery per backend, only the
shown jobs' events), and the table itself, piped and on a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterable
from typing import Any

import pytest
from cli.cli_shell import DISPATCH, Shell
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, Registry, State
from dispatch.job_records import create_job, status_of
from dispatch.listing import list_jobs
from dispatch.store.base import Feed, RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import exit_with, runs_forever, succeed
from dispatch_testing.waiting import eventually

SPEC = JobSpec(command=("python", "train.py"), resources={"nodes": 2})
PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)
EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.sched = SimScheduler()
        self.registry = Registry.from_plugins({"simulated": SimulatedBackend(self.sched)})
        self.store = store
        self.sup = Supervisor(store, self.registry, owner="sup", clock=self.sched.now)

    def job(self, *rules: Any, name: str = "train") -> str:
        return create_job(
            self.store,
            self.registry,
            backend="simulated",
            spec=SPEC.model_copy(update={"name": name}),
            policy=policy(*rules),
            now=self.sched.now(),
        )

    def settle(self, ticks: int = 6) -> None:
        for _ in range(ticks):
            self.sup.tick()
            self.sched.advance(2)

    def rows(self, **filters: Any) -> dict[str, Any]:
        listing = list_jobs(self.store, self.registry, now=self.sched.now(), **filters)
        return {r.job_id: r for r in listing.rows}


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    return Rig(store)


def test_list_shows_the_live_state_cause_attempts_and_budget_S24(rig: Rig) -> None:
    recovered = rig.job(PREEMPT, name="recovered")
    held = rig.job(EXIT_HOLD, name="held")
    done = rig.job(name="done")
    rig.sched.plan(recovered, 1, runs_forever())
    rig.sched.plan(recovered, 2, runs_forever())
    rig.sched.plan(held, 1, exit_with(1, after=1))
    rig.sched.plan(done, 1, succeed(after=1))
    rig.settle()
    (obj,) = [o for o in rig.sched.objects() if o.tags[SimScheduler.TAG_JOB] == recovered]
    rig.sched.preempt(obj.object_id)
    rig.settle()
    rows = rig.rows()
    for job_id, row in rows.items():  # the state status computes, for every row
        assert row.state == status_of(rig.store, rig.registry, job_id).state.value
    assert (rows[recovered].state, rows[recovered].attempt, rows[recovered].attempts) == (
        "running",
        2,
        3,
    )
    assert rows[recovered].budget_left == 1
    assert rows[recovered].object_id is not None and rows[recovered].nodes == 2
    assert (rows[held].state, rows[held].cause, rows[held].budget_left) == (
        "held",
        "non-zero-exit",
        None,
    )
    assert (rows[done].state, rows[done].cause, rows[done].attempt) == ("succeeded", "none", 1)


def test_list_filters_by_live_state_cause_and_backend(rig: Rig) -> None:
    running = rig.job(PREEMPT)
    held = rig.job(EXIT_HOLD)
    rig.sched.plan(running, 1, runs_forever())
    rig.sched.plan(held, 1, exit_with(3, after=1))
    rig.settle()
    assert set(rig.rows(state="running")) == {running}
    assert set(rig.rows(state="held")) == {held}
    assert set(rig.rows(state="active")) == {running, held}
    assert set(rig.rows(state="succeeded")) == set()
    assert set(rig.rows(cause="non-zero-exit")) == {held}
    assert set(rig.rows(backend="simulated")) == {running, held}
    assert set(rig.rows(backend="slurm")) == set()


class Counting:
    """The store, recording which jobs each read_feed asked for."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.asked: list[set[str] | None] = []

    def read_feed(
        self, position: int = 0, limit: int | None = None, *, job_ids: Iterable[str] | None = None
    ) -> Feed:
        self.asked.append(None if job_ids is None else set(job_ids))
        return self.store.read_feed(position, limit, job_ids=job_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_big_record_is_read_for_the_shown_jobs_with_one_discovery_per_backend(
    rig: Rig,
) -> None:
    ids = [rig.job(PREEMPT) for _ in range(60)]
    for job_id in ids:
        rig.sched.plan(job_id, 1, runs_forever())
    rig.settle(2)
    counting = Counting(rig.store)
    before = rig.sched.calls
    listing = list_jobs(counting, rig.registry, limit=10, now=rig.sched.now())  # type: ignore[arg-type]
    assert rig.sched.calls - before == 1  # one listing call for the ten jobs
    shown = {r.job_id for r in listing.rows}
    assert len(shown) == 10 and listing.more
    assert counting.asked and all(asked is not None and asked <= shown for asked in counting.asked)
    before = rig.sched.calls
    everything = list_jobs(rig.store, rig.registry, now=rig.sched.now())
    assert len(everything.rows) == 60 and not everything.more
    assert rig.sched.calls - before == 1  # still one call per backend, not one per job
    assert all(r.state == "running" for r in everything.rows)


def test_a_backend_that_cannot_be_asked_leaves_its_jobs_as_recorded_with_a_note(
    rig: Rig,
) -> None:
    job = rig.job(PREEMPT)
    rig.sched.plan(job, 1, runs_forever())
    rig.settle(2)
    with rig.sched.down():
        listing = list_jobs(rig.store, rig.registry, now=rig.sched.now())
    (row,) = listing.rows
    assert "simulated" in listing.unreachable
    assert row.note is not None and "record only" in row.note
    assert row.state == "active"  # what the record knows, nothing guessed
    assert row.object_id is not None and row.job_id == job


def test_one_backend_down_does_not_hide_another_S50(store: RecordStore) -> None:
    good, bad = SimScheduler(), SimScheduler()
    registry = Registry.from_plugins(
        {"good": SimulatedBackend(good, name="good"), "bad": SimulatedBackend(bad, name="bad")}
    )
    for name in ("good", "bad"):
        create_job(store, registry, backend=name, spec=SPEC, policy=policy(), now=good.now())
    with bad.down():
        listing = list_jobs(store, registry, now=good.now())
    states = {r.backend: (r.state, r.note) for r in listing.rows}
    assert states["good"] == (State.PENDING.value, None)  # asked: the live state
    assert states["bad"][1] is not None and "bad could not be asked" in states["bad"][1]
    assert set(listing.unreachable) == {"bad"}


# ---------------------------------------------------------------------- the table itself
def test_the_table_has_a_header_and_a_row_per_job_piped_plain(sh: Shell) -> None:
    first = sh.run("submit", "--name", "first", "--", "true").stdout.strip()
    second = sh.run("submit", "--name", "second", "--", "sleep", "60").stdout.strip()
    try:

        def listed() -> str:
            out = sh.run("list")
            assert out.returncode == 0, out.stderr
            return out.stdout

        def settled(text: str) -> bool:  # the runner may still be starting under load
            rows = {line.split()[0]: line.split() for line in text.splitlines()[1:]}
            return (
                rows.get(second, [""] * 5)[4] == "running"
                and rows.get(first, [""] * 5)[4].rstrip("*") == "succeeded"
            )

        text = eventually(listed, until=settled, what="one job running, one succeeded")
        assert "\x1b" not in text  # piped: plain text
        lines = text.splitlines()
        assert lines[0].split() == [
            "JOB",
            "NAME",
            "BACKEND",
            "STATE",
            "CAUSE",
            "ATTEMPT",
            "BUDGET",
            "NODES",
            "AGE",
        ]
        rows = {line.split()[0]: line.split() for line in lines[1:] if line.startswith("j")}
        assert rows[second][1:3] == ["second", "local"] and rows[second][4] == "running"
        assert rows[first][1] == "first" and rows[first][4].rstrip("*") == "succeeded"
        assert "active" not in text
        listed = {r["job_id"]: r for r in sh.json("list")}  # type: ignore[union-attr,index]
        assert listed[second]["state"] == "running" and listed[second]["attempt"] == 1
        assert listed[second]["object_id"].startswith("local-")
        assert sh.run("list", "--state", "running").stdout.count(second) == 1
        assert first not in sh.run("list", "--state", "running").stdout
        assert second not in sh.run("list", "--backend", "slurm").stdout
    finally:
        sh.run("cancel", second)


def _pty(sh: Shell, *args: str, timeout: float = 60) -> str:
    """Run dispatch on a terminal (a pseudo-terminal), return all it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: dispatch, with the shell's environment
        os.chdir(sh.home)
        os.execve(DISPATCH, [DISPATCH, *args], {**sh.env, "COLUMNS": "160", "TERM": "xterm"})
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                out += data
            elif os.waitpid(pid, os.WNOHANG)[0]:
                break
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)
    return out.decode("utf-8", "replace")


def _interruptible() -> None:
    """In the child: Ctrl-C at its default, as on a terminal. A shell starts a background
    command with SIGINT ignored, and the child would inherit that and never stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_exit(pid: int, *, deadline: float) -> int:
    """The child's wait status once it exits; fails (never hangs) if it has not by then."""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        select.select([], [], [], 0.1)
    raise AssertionError(f"process {pid} did not exit after Ctrl-C")


def test_on_a_terminal_the_table_is_drawn_and_json_stays_plain(sh: Shell) -> None:
    job = sh.run("submit", "--name", "[red]markup", "--", "true").stdout.strip()
    drawn = _pty(sh, "list")
    assert "JOB" in drawn and "STATE" in drawn and job in drawn
    assert "\x1b[" in drawn  # drawn with a terminal's attributes
    assert "[red]markup" in drawn  # a name is text, never markup
    data = _pty(sh, "list", "--json")
    assert "\x1b" not in data
    assert json.loads(data.replace("\r\n", "\n"))[0]["job_id"] == job


def test_list_watch_piped_prints_the_table_again_when_a_row_changes(sh: Shell) -> None:
    job = sh.run("submit", "--", "sleep", "60").stdout.strip()
    watching = subprocess.Popen(
        [DISPATCH, "list", "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sh.env,
        cwd=sh.home,
        preexec_fn=_interruptible,
    )
    try:
        assert watching.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("running" in s for s in seen):
            seen.append(watching.stdout.readline())
        assert any(job in s and "running" in s for s in seen), seen
        assert sh.run("cancel", job).returncode == 0
        while time.monotonic() < deadline and not any("cancelled" in s for s in seen):
            seen.append(watching.stdout.readline())
        assert any(job in s and "cancelled" in s for s in seen), seen
        assert sum(s.startswith("--- ") for s in seen) >= 2  # one table per change
        watching.send_signal(signal.SIGINT)
        assert watching.wait(timeout=60) == 0
    finally:
        watching.kill()
        watching.wait()


def test_list_watch_on_a_terminal_redraws_in_place(sh: Shell) -> None:
    job = sh.run("submit", "--", "true").stdout.strip()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(sh.home)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background shell may ignore it
        args = [DISPATCH, "list", "--watch", "--interval", "0.2"]
        os.execve(DISPATCH, args, {**sh.env, "COLUMNS": "160", "TERM": "xterm"})
    out = b""
    deadline = time.monotonic() + 60
    try:
        # the table drawn, then drawn again over itself (cursor moved up, lines erased)
        while time.monotonic() < deadline and not (out.count(b"JOB") >= 2 and b"\x1b[2K" in out):
            if select.select([fd], [], [], 0.5)[0]:
                out += os.read(fd, 65536)
        os.kill(pid, signal.SIGINT)
        assert _wait_exit(pid, deadline=time.monotonic() + 60) == 0  # Ctrl-C ends it cleanly
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    text = out.decode("utf-8", "replace")
    assert text.count("JOB") >= 2 and job in text and "\x1b[2K" in text, text
