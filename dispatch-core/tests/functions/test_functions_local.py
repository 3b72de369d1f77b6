"""``Client.submit_function`` and ``Client.map`` on the local backend: real processes of
``python -m dispatch.function_runner``, the record, the supervisor run by ``result``."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import dispatch
import pytest
from dispatch import BadInput, Client, FunctionError, RemoteError
from dispatch.core.policy import RecoveryPolicy, Rule
from dispatch.function_runner import call_dir, version_text
from dispatch.model.enums import State

cloudpickle.register_pickle_by_value(sys.modules[__name__])

HERE = version_text()


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with Client(f"sqlite://{tmp_path / 'record.db'}") as opened:
        yield opened


def power(x: int, exponent: int = 2) -> int:
    return int(x**exponent)


def divide(a: float, b: float) -> float:
    return a / b


def where() -> dict[str, Any]:
    return {
        "checkpoint": os.environ["DISPATCH_CHECKPOINT_DIR"],
        "index": os.environ.get("DISPATCH_SWEEP_INDEX"),
        "job": os.environ["DISPATCH_JOB_ID"],
    }


def test_submit_function_returns_the_value(client: Client, tmp_path: Path) -> None:
    handle = client.submit_function(power, 3, exponent=3, job={"name": "cube"})
    assert handle.result(timeout=120, interval=0.2) == 27
    job = handle.record()
    assert job.name == "cube" and job.outcome is not None
    assert job.outcome.state is State.SUCCEEDED
    assert job.spec.command == (sys.executable, "-m", "dispatch.function_runner", "--python", HERE)
    assert job.spec.checkpoint_dir == str(tmp_path / "data/dispatch/functions" / job.job_id)
    assert client.function_job(handle.job_id).result(timeout=60) == 27


def test_the_functions_exception_is_raised_with_its_remote_traceback(client: Client) -> None:
    handle = client.submit_function(divide, 1, 0)
    with pytest.raises(ZeroDivisionError, match="division by zero") as raised:
        handle.result(timeout=120, interval=0.2)
    remote = raised.value.__cause__
    assert isinstance(remote, RemoteError) and remote.type_name == "ZeroDivisionError"
    assert "in divide\n" in remote.traceback
    assert handle.status().state is State.FAILED
    assert b"ZeroDivisionError" in b"".join(c.data for c in handle.logs(stream="stderr"))


def test_map_returns_the_values_in_item_order_each_member_in_its_own_directory(
    client: Client, tmp_path: Path
) -> None:
    sweep = client.submit_map(power, [4, 1, 3, 2], max_running=2)
    assert client.store.jobs()  # recorded as a sweep of four members
    assert sweep.results(timeout=180, interval=0.2) == [16, 1, 9, 4]
    jobs = [m.record() for m in sweep.members]
    assert [j.name for j in jobs] == ["power-0", "power-1", "power-2", "power-3"]
    root = tmp_path / "data/dispatch/functions" / sweep.group_id
    assert [j.spec.checkpoint_dir for j in jobs] == [str(root / str(i)) for i in range(4)]
    assert [j.group.values for j in jobs if j.group] == [{"i": str(i)} for i in range(4)]
    assert (call_dir(root) / "function.pkl").exists()


def test_map_of_two_iterables_calls_with_each_pair(client: Client) -> None:
    assert client.map(power, [2, 3], [3, 2], timeout=180, interval=0.2) == [8, 9]


def test_map_sees_its_checkpoint_and_sweep_index(client: Client, tmp_path: Path) -> None:
    first, second = client.map(lambda _: where(), ["a", "b"], timeout=180, interval=0.2)
    assert first["index"] == "0" and second["index"] == "1"
    assert first["checkpoint"].endswith("/0") and second["checkpoint"].endswith("/1")


def test_map_raises_the_first_members_exception_in_item_order(client: Client) -> None:
    with pytest.raises(ZeroDivisionError):
        client.map(divide, [1, 2, 3], [1, 0, 0], timeout=180, interval=0.2)


def test_a_recovered_function_runs_again_and_sees_resumed_S44(client: Client) -> None:
    def first_time_fails() -> str:
        if not dispatch.resumed():
            sys.exit(3)
        return "resumed"

    policy = RecoveryPolicy(rules=(Rule(on=("non-zero-exit",), action="resubmit", budget=1),))  # type: ignore[arg-type]
    handle = client.submit_function(first_time_fails, policy=policy)
    assert handle.result(timeout=120, interval=0.2) == "resumed"
    assert len(handle.record().submissions) == 2


def test_a_job_that_ends_without_a_value_says_how(client: Client) -> None:
    def exits() -> None:
        os._exit(4)

    with pytest.raises(FunctionError, match=r"failed: non-zero-exit \(application\), exit 4"):
        client.submit_function(exits).result(timeout=120, interval=0.2)


def test_a_function_that_cannot_be_pickled_is_refused_and_nothing_recorded(
    client: Client, tmp_path: Path
) -> None:
    lock = threading.Lock()

    def holds_a_lock() -> bool:
        return lock.locked()

    with pytest.raises(BadInput, match=r"the function 'holds_a_lock' cannot be pickled: .*lock"):
        client.submit_function(holds_a_lock)
    with pytest.raises(BadInput, match=r"the arguments of 'power' cannot be pickled: .*lock"):
        client.submit_function(power, lock)
    with pytest.raises(BadInput, match=r"item 1 of 'power-\{i\}' cannot be pickled: .*lock"):
        client.submit_map(power, [1, lock])
    assert client.store.jobs() == []
    assert not (tmp_path / "data").exists()


def test_a_job_the_backend_refuses_leaves_no_files(client: Client, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="cpus_per_task"):
        client.submit_function(power, 2, resources={"cpus_per_task": 0})
    with pytest.raises(BadInput, match="gpus"):
        client.submit_map(power, [1, 2], resources={"gpus_per_node": 1})
    assert client.store.jobs() == []
    assert list((tmp_path / "data").rglob("*.pkl")) == []


def test_map_refuses_no_items_and_iterables_of_different_lengths(client: Client) -> None:
    with pytest.raises(BadInput, match="no items"):
        client.submit_map(power, [])
    with pytest.raises(BadInput, match="not of one length"):
        client.submit_map(power, [1, 2], [1])
    with pytest.raises(BadInput, match="not a script"):
        client.submit_function(power, 1, job={"script": "echo hi"})
    assert client.store.jobs() == []


def test_without_cloudpickle_submit_says_what_to_install(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cloudpickle", None)
    with pytest.raises(BadInput, match=r"pip install 'dispatch-core\[functions\]'"):
        client.submit_function(power, 1)
    assert client.store.jobs() == []


def test_python_names_the_interpreter_the_job_runs(client: Client, tmp_path: Path) -> None:
    handle = client.submit_function(power, 2, python=tmp_path / "no-such-python")
    assert handle.record().spec.command[0] == str(tmp_path / "no-such-python")
    with pytest.raises(FunctionError, match=r"failed: launch-failed.*left no value"):
        handle.result(timeout=120, interval=0.2)
