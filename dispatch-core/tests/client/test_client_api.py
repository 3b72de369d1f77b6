"""``dispatch.Client``: the Python API over the same record and supervisor as the CLI."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dispatch.client import Client, Deferred, JobHandle, WaitTimeout
from dispatch.core.policy import RecoveryPolicy, Rule
from dispatch.model.enums import State
from dispatch.model.errors import BadInput, NotAllowed
from dispatch.model.events import EscalationRaised
from dispatch.store.sqlite import SQLiteStore

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1")
    with Client(f"sqlite://{tmp_path / 'record.db'}") as opened:
        yield opened


def test_submit_wait_history_logs(client: Client) -> None:
    seen: list[str] = []
    job = client.submit(["sh", "-c", "echo hello; exit 0"], resources={"time": "5m"})
    assert isinstance(job, JobHandle)
    final = job.wait(timeout=60, interval=0.2, on_change=lambda s: seen.append(s.state.value))
    assert final.state is State.SUCCEEDED and final.settled
    assert seen[-1] == "succeeded" and len(seen) == len(set(seen))  # called on changes only
    assert [t.event for t in job.history()] == ["outcome-committed"]
    assert b"".join(c.data for c in job.logs()) == b"hello\n"
    assert [j.job_id for j in client.jobs()] == [job.job_id]
    assert client.job(job.job_id).status().state is State.SUCCEEDED


def test_hold_then_give_up_and_resubmit(client: Client) -> None:
    policy = RecoveryPolicy(rules=(Rule(on=("non-zero-exit",), action="hold"),))  # type: ignore[arg-type]
    job = client.submit(["sh", "-c", "exit 3"], policy=policy)
    assert job.wait(timeout=60, interval=0.2).state is State.HELD
    again = job.resubmit()
    assert again.state in (State.PENDING, State.RUNNING, State.RECOVERING, State.HELD)
    assert job.wait(timeout=60, interval=0.2).state is State.HELD
    failed = job.give_up()
    assert failed.state is State.FAILED and failed.cause is not None
    assert failed.cause.exit_code == 3
    with pytest.raises(NotAllowed, match="already failed"):
        job.cancel()
    new = job.supersede()
    assert new.status().supersedes == job.job_id


def test_cancel_and_wait_timeout(client: Client) -> None:
    job = client.submit(["sleep", "30"])
    with pytest.raises(WaitTimeout, match="still"):
        job.wait(timeout=1, interval=0.2)
    assert job.cancel().state in (State.CANCELLED, State.RUNNING)
    assert job.wait(timeout=60, interval=0.2).state is State.CANCELLED


def test_the_cli_and_the_api_share_one_record(client: Client, tmp_path: Path) -> None:
    job = client.submit(["true"], name="shared")
    env = {**os.environ, "DISPATCH_STORE": f"sqlite://{tmp_path / 'record.db'}"}
    listed = subprocess.run([DISPATCH, "list"], capture_output=True, text=True, env=env)
    assert job.job_id in listed.stdout and "shared" in listed.stdout


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"resources": {"cpus_per_task": 0}}, "resources.cpus_per_task must be at least 1"),
        ({"resources": {"gpus": 1}}, "unknown key(s) gpus"),
        ({"resources": {"time": "0"}}, "resources.time '0'"),
        ({"resources": {"nodes": 2}}, "needs the 'multi-node' capability"),
        ({"resources": {"tasks_per_node": 2}}, "the local backend starts one process"),
        ({"backend": "nosuch"}, "can't be found"),
        ({"policy": "/dev/zero"}, "character device"),
        ({"env": {"K": "\udcff"}}, "not valid UTF-8"),
    ],
)
def test_bad_input_refused_and_nothing_recorded_S36(
    client: Client, kwargs: dict[str, object], words: str
) -> None:
    with pytest.raises(BadInput) as err:
        client.submit(["true"], **kwargs)  # type: ignore[arg-type]
    assert words in str(err.value)
    assert client.jobs() == []


def test_command_must_be_a_list_S36(client: Client) -> None:
    with pytest.raises(BadInput, match="list of strings"):
        client.submit("python train.py")  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="one of them"):
        client.submit(["true"], script="echo")


def test_dry_run_records_nothing(client: Client) -> None:
    dry = client.dry_run(["python", "train.py"], resources={"mem": "1G"})
    assert dry.spec.resources.memory_mb == 1024
    assert dry.prepared is not None and dry.prepared.words("command") == ["python", "train.py"]
    assert dry.prepared.job_id == dry.job_id and dry.prepared.submission == 1
    assert client.jobs() == []


def test_deferred_when_the_scheduler_is_unreachable_S5(client: Client, tmp_path: Path) -> None:
    job = client.submit(["sleep", "30"])
    client.supervisor([job.job_id]).tick()
    local = tmp_path / "local"
    moved = tmp_path / "local-away"
    local.rename(moved)
    local.write_text("not a directory")  # the state directory is unreadable now
    try:
        with pytest.raises(Deferred, match="cancel requested"):
            job.cancel()
    finally:
        local.unlink()
        moved.rename(local)
    assert job.record().cancel is not None  # the request is in the record
    assert job.wait(timeout=60, interval=0.2).state is State.CANCELLED


def test_supervise_once_then_follow_the_logs_S46(client: Client) -> None:
    job = client.submit(["sh", "-c", "echo a; sleep 0.5; echo b >&2; echo c"], start=False)
    report = client.supervise(once=True)
    assert report.submitted == 1
    out = b"".join(c.data for c in job.logs(follow=True, interval=0.2))
    assert out == b"a\nc\n"
    assert [c.text for c in job.logs(stream="stderr")] == ["b\n"]
    with pytest.raises(BadInput, match="stdout or stderr"):
        job.logs(stream="both")


class RacingStore(SQLiteStore):
    """A real SQLite record where another writer appends just before our next append
    (what a supervisor's tick does when a request races it)."""

    race = 0

    def append(self, job_id: str, expected_version: int, events: Any, *, lease: Any = None) -> int:
        if self.race:
            self.race -= 1
            version = self.read(job_id)[-1].seq
            other = EscalationRaised(
                job_id=job_id, seq=version + 1, at=datetime.now(UTC), reason="another writer"
            )
            super().append(job_id, version, [other])
        return super().append(job_id, expected_version, events, lease=lease)


def test_a_request_racing_another_writer_is_read_and_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regression: a cancel racing the supervisor exited 4 (record conflict)."""
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    store = RacingStore(tmp_path / "record.db")
    client = Client(store)
    job = client.submit(["sleep", "30"])
    store.race = 2
    assert job.cancel().state.value in ("cancelled", "pending", "running")
    events = [t.event for t in job.history()]
    assert events.count("escalation-raised") == 2  # the racing writer's, kept
    assert job.record().cancel is not None
    assert job.wait(timeout=60, interval=0.2).state.value == "cancelled"


def test_the_keywords_of_a_job_are_defined_once(client: Client) -> None:
    """``spec``, ``submit`` and ``dry_run`` take the job's keywords from one definition,
    :class:`dispatch.client.SpecFields`, and refuse a keyword it does not define."""
    from dispatch.client import SpecFields

    defined = set(SpecFields.__annotations__)
    assert {"script", "resources", "launcher", "progress_window"} <= defined
    for method in (Client.spec, Client.submit, Client.dry_run):
        params = inspect.signature(method).parameters
        assert params["fields"].kind is inspect.Parameter.VAR_KEYWORD
        assert not defined & set(params), f"{method.__name__} spells a job keyword out again"
    with pytest.raises(TypeError, match="colour"):
        client.spec(["true"], colour="red")  # type: ignore[call-arg]


def test_submit_makes_the_first_submission_without_a_supervisor_S28(client: Client) -> None:
    """Only recovery needs a supervisor: the object exists as soon as submit returns."""
    job = client.submit(["true"])
    record = job.record()
    assert record.current is not None and record.current.object_id is not None
    assert client.supervise(once=True).submitted == 0  # nothing left for a supervisor


def test_submit_with_start_false_records_only(client: Client) -> None:
    job = client.submit(["true"], start=False)
    assert job.record().submissions == ()
    assert client.supervise(once=True).submitted == 1
