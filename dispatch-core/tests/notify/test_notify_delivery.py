"""Notifications after holds, escalations and outcomes: delivered after the commit, at
least once, never twice for one (job, seq) across restarts, retried with backoff, never
in the supervisor's way. Against a real HTTP server on loopback."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from dispatch.client import Client
from dispatch.core.policy import RecoveryPolicy, Rule
from dispatch.notify import Notifier
from dispatch.store import open_store
from dispatch_testing.waiting import eventually
from notify.notify_receiver import Receiver

HOLD = RecoveryPolicy(rules=(Rule(on=("non-zero-exit",), action="hold"),))  # type: ignore[arg-type]


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    return f"sqlite://{tmp_path / 'record.db'}"


def _notifier(store_url: str, tmp_path: Path, **kwargs: object) -> Notifier:
    """Outcomes only unless asked (a failed job also raises an escalation)."""
    options: dict[str, object] = {
        "cursor": tmp_path / "cursor.json",
        "backoff": 0.05,
        "events": ["outcome-committed"],
    }
    options.update(kwargs)
    return Notifier(store_url, **options)  # type: ignore[arg-type]


@pytest.fixture
def started(url: str, tmp_path: Path, receiver: Receiver) -> Iterator[Notifier]:
    notifier = _notifier(url, tmp_path, url=receiver.url)
    notifier.poke()  # the first pass sets the cursor: events from now on are owed
    assert notifier.flush(10)
    yield notifier
    notifier.close()


def test_hold_escalation_outcome_each_posted_once_with_status(
    url: str, tmp_path: Path, receiver: Receiver
) -> None:
    started = _notifier(url, tmp_path, url=receiver.url, events=None)
    started.poke()
    assert started.flush(10)
    client = Client(url, notifier=started)
    job = client.submit(["sh", "-c", "exit 3"], policy=HOLD)
    assert job.wait(timeout=60, interval=0.2).state.value == "held"
    job.give_up()
    assert started.flush(10)
    eventually(lambda: len(receiver.bodies) == 3, what="3 delivered")
    events = [b["event"]["type"] for b in receiver.bodies]
    assert events == ["hold-placed", "escalation-raised", "outcome-committed"]
    hold, _, outcome = receiver.bodies
    assert hold["status"]["state"] == "held" and hold["status"]["cause"]["exit_code"] == 3
    assert outcome["status"]["state"] == "failed" and outcome["status"]["job_id"] == job.job_id
    assert len(set(receiver.keys())) == 3 and all(k.startswith(job.job_id) for k in receiver.keys())


def test_never_twice_across_restarts(
    url: str, tmp_path: Path, started: Notifier, receiver: Receiver
) -> None:
    client = Client(url)
    job = client.submit(["false"])
    assert job.wait(timeout=60, interval=0.2).state.value == "failed"
    started.poke()
    eventually(lambda: len(receiver.bodies) == 1, what="1 delivered")
    # received is not yet recorded: the pass ends (cursor written, lock let go) after the
    # answer, and a notifier still in its pass makes the next one wait its turn
    assert started.flush(60)
    started.close()
    for _ in range(3):  # three "restarted supervisors" reading the same cursor
        again = _notifier(url, tmp_path, url=receiver.url)
        with open_store(url) as store:
            assert again.deliver_pending(store) is None
    assert receiver.attempts == receiver.keys() == [f"{job.job_id}:{job.record().version}"]


def test_failing_hook_retried_with_backoff_then_delivered_in_order(
    url: str, started: Notifier, receiver: Receiver
) -> None:
    receiver.answers = [500, 503]
    client = Client(url)
    first = client.submit(["false"])
    second = client.submit(["false"])
    for job in (first, second):
        assert job.wait(timeout=60, interval=0.2).state.value == "failed"
    started.poke()
    eventually(lambda: len(receiver.bodies) == 2, what="2 delivered")
    assert receiver.attempts[:2] == receiver.attempts[2:3] * 2  # the same event, retried
    assert receiver.keys()[0].startswith(receiver.attempts[0].split(":")[0])
    assert len(receiver.keys()) == len(set(receiver.keys())) == 2


def test_a_hook_that_always_fails_is_dropped_and_the_next_goes_out(
    url: str, tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = _notifier(url, tmp_path, url=receiver.url, max_attempts=2)
    notifier.poke()
    notifier.flush(10)
    receiver.answers = [500, 500]
    client = Client(url)
    for _ in range(2):
        assert client.submit(["false"]).wait(timeout=60, interval=0.2).state.value == "failed"
    with caplog.at_level("WARNING", logger="dispatch.notify"):
        notifier.poke()
        eventually(lambda: len(receiver.bodies) == 1, what="1 delivered")
    assert "dropped after 2 attempts" in caplog.text
    notifier.close()


def test_a_hanging_hook_times_out_and_never_blocks_the_tick(
    url: str, tmp_path: Path, receiver: Receiver
) -> None:
    notifier = _notifier(url, tmp_path, url=receiver.url, timeout=0.5)
    notifier.poke()
    notifier.flush(10)
    client = Client(url, notifier=notifier)
    receiver.hold.clear()
    job = client.submit(["false"])
    assert job.wait(timeout=60, interval=0.2).state.value == "failed"  # poked every tick
    assert receiver.entered.wait(10)  # the delivery is stuck in the hook...
    other = client.submit(["true"])
    assert other.wait(timeout=60, interval=0.2).state.value == "succeeded"  # ...ticks go on
    receiver.hold.set()
    eventually(lambda: len(receiver.bodies) >= 1, what="at least 1 delivered")
    assert set(receiver.keys()) <= {
        f"{job.job_id}:{job.record().version}",
        f"{other.job_id}:{other.record().version}",
    }
    notifier.close()


def test_command_sink_gets_the_body_on_stdin(url: str, tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    code = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')"
    notifier = _notifier(url, tmp_path, command=[sys.executable, "-c", code])
    notifier.poke()
    notifier.flush(10)
    job = Client(url).submit(["false"])
    assert job.wait(timeout=60, interval=0.2).state.value == "failed"
    notifier.poke()
    eventually(lambda: out.exists() and out.read_text().count("\n") == 1, what="1 delivered")
    body = json.loads(out.read_text())
    assert body["event"]["type"] == "outcome-committed" and body["status"]["state"] == "failed"
    notifier.close()


def test_supervise_processes_notify_once_from_the_profile(sh: Shell, receiver: Receiver) -> None:
    sh.write("dispatch.toml", f'[profile.default.notify]\nurl = "{receiver.url}"\ntimeout = 5\n')
    job = sh.run("submit", "--", "false").stdout.strip()  # before any notifier ran

    def supervised() -> bool:  # each time a new supervisor process
        assert sh.run("supervise", "--once", "--lease", "1").returncode == 0
        return len(receiver.bodies) >= 2

    eventually(supervised, interval=0.3, what="the escalation and the outcome delivered")
    for _ in range(2):  # more supervisors deliver nothing again
        assert sh.run("supervise", "--once", "--lease", "1").returncode == 0
    assert receiver.keys() == [k for k in receiver.keys() if k.startswith(job)]
    assert [b["event"]["type"] for b in receiver.bodies] == [
        "escalation-raised",
        "outcome-committed",
    ]
    assert len(receiver.attempts) == 2


def test_a_supervisor_given_a_notifier_tells_it_after_each_tick(
    url: str, started: Notifier, receiver: Receiver
) -> None:
    from dispatch.backends import Registry
    from dispatch.supervisor import Supervisor

    job = Client(url).submit(["false"])
    with open_store(url) as store:
        supervisor = Supervisor(store, Registry.from_entry_points(), notifier=started)

        def told() -> bool:
            supervisor.tick()
            return bool(receiver.bodies)

        eventually(told, interval=0.1, what="the notifier told after a tick")
        supervisor.release()
    assert receiver.keys() == [f"{job.job_id}:{job.record().version}"]
