"""The function runner on its own (``python -m dispatch.function_runner``), run in this
process with the environment a job gets: what it writes, what it refuses, and what
``outcome_of`` makes of it (the value, the function's exception, or why there is none)."""

from __future__ import annotations

import pickle
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from dispatch import function_runner as runner
from dispatch.core.cause import Cause
from dispatch.core.job import Job, Outcome
from dispatch.core.policy import Plan, RecoveryPolicy
from dispatch.functions import FunctionError, RemoteError, outcome_of, resumed
from dispatch.model.declarations import Declarations
from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.spec import JobSpec

cloudpickle.register_pickle_by_value(sys.modules[__name__])

HERE = runner.version_text()
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DECLARED = Declarations(
    name="local", node_loss_window=timedelta(seconds=30), reports=frozenset(CauseKind)
)


def square(x: int) -> int:
    return x * x


class Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def raises_unpicklable() -> None:
    raise Unpicklable("holds a lock")


def fails(x: int) -> None:
    if x > 1:
        raise KeyError(f"no row {x}")


def returns_a_lock() -> Any:
    return threading.Lock()


def _job(directory: Path, state: State | None, kind: CauseKind = CauseKind.NONE) -> Job:
    cause = Cause(kind=kind, provenance=Provenance.APPLICATION, detail="exited", exit_code=1)
    outcome = None if state is None else Outcome(seq=3, at=AT, state=state, cause=cause)
    return Job(
        job_id="j000000000001",
        name="f",
        backend="local",
        spec=JobSpec(name="f", command=("python",), checkpoint_dir=str(directory)),
        plan=Plan.bind(RecoveryPolicy(), DECLARED),
        created_at=AT,
        version=3,
        outcome=outcome,
    )


@pytest.fixture
def job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DISPATCH_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.delenv("RANK", raising=False)
    runner.call_dir(tmp_path).mkdir()
    return tmp_path


def _call(job_dir: Path, fn: Any, *args: Any, **kwargs: Any) -> Path:
    directory = runner.call_dir(job_dir)
    (directory / runner.FUNCTION).write_bytes(cloudpickle.dumps(fn))
    (directory / runner.CALL).write_bytes(cloudpickle.dumps((args, kwargs)))
    return directory


def _outcome(job_dir: Path) -> dict[str, Any]:
    return pickle.loads((runner.call_dir(job_dir) / runner.OUTCOME).read_bytes())  # type: ignore[no-any-return]


def test_rank_0_writes_the_value_and_the_reader_returns_it(job_dir: Path) -> None:
    _call(job_dir, square, 7)
    assert runner.run(["--python", HERE]) == 0
    assert _outcome(job_dir)["stage"] == runner.RETURNED
    assert outcome_of(_job(job_dir, State.SUCCEEDED)) == 49


def test_other_ranks_run_the_function_and_write_nothing(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = job_dir / "ranks"
    seen.mkdir()

    def touch(rank_dir: str) -> str:
        import os

        Path(rank_dir, os.environ["RANK"]).touch()
        return "done"

    _call(job_dir, touch, str(seen))
    monkeypatch.setenv("RANK", "1")
    assert runner.run(["--python", HERE]) == 0
    assert (seen / "1").exists()
    assert not (runner.call_dir(job_dir) / runner.OUTCOME).exists()


def test_an_earlier_executions_outcome_is_removed_before_the_function_runs_again(
    job_dir: Path,
) -> None:
    directory = _call(job_dir, fails, 2)
    (directory / runner.OUTCOME).write_bytes(b"an earlier execution's")
    assert runner.run(["--python", HERE]) == runner.RAISED
    assert _outcome(job_dir)["stage"] == runner.STAGE_CALL


def test_another_python_is_refused_with_both_versions_and_what_to_do(
    job_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _call(job_dir, square, 2)
    assert runner.run(["--python", "3.8"]) == runner.REFUSED
    said = capsys.readouterr().err
    assert f"pickled by Python 3.8 and this interpreter ({sys.executable}) is Python {HERE}" in said
    assert "python=" in said
    with pytest.raises(FunctionError, match=r"pickled by Python 3\.8") as raised:
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))
    assert not isinstance(raised.value, RemoteError)


def test_the_functions_exception_is_raised_again_with_its_remote_traceback(job_dir: Path) -> None:
    _call(job_dir, fails, 5)
    assert runner.run(["--python", HERE]) == runner.RAISED
    with pytest.raises(KeyError, match="no row 5") as raised:
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))
    remote = raised.value.__cause__
    assert isinstance(remote, RemoteError)
    assert remote.type_name == "KeyError" and remote.message == "'no row 5'"
    assert ", in fails\nKeyError: 'no row 5'" in remote.traceback
    assert "function_runner.py" not in remote.traceback  # the function's frames only
    assert "remote traceback:" in str(remote)


def test_an_exception_that_does_not_pickle_is_our_error_with_its_name_and_traceback(
    job_dir: Path,
) -> None:
    _call(job_dir, raises_unpicklable)
    assert runner.run(["--python", HERE]) == runner.RAISED
    with pytest.raises(RemoteError) as raised:
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))
    assert raised.value.type_name.endswith("Unpicklable")
    assert raised.value.message == "holds a lock"
    assert "raises_unpicklable" in raised.value.traceback


def test_a_value_that_does_not_pickle_fails_the_job_saying_so(job_dir: Path) -> None:
    _call(job_dir, returns_a_lock)
    assert runner.run(["--python", HERE]) == runner.RAISED
    with pytest.raises(FunctionError, match="returned a lock that cannot be pickled"):
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))


def test_a_function_whose_module_the_interpreter_cannot_import_is_refused(job_dir: Path) -> None:
    directory = _call(job_dir, square, 1)
    # what pickle writes for a function of a module this interpreter does not have
    (directory / runner.FUNCTION).write_bytes(b"cnot_a_module_here\nf\n.")
    assert runner.run(["--python", HERE]) == runner.REFUSED
    with pytest.raises(FunctionError, match=r"No module named 'not_a_module_here'.*must import"):
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))


def test_without_a_checkpoint_directory_the_runner_refuses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DISPATCH_CHECKPOINT_DIR", raising=False)
    assert runner.run(["--python", HERE]) == runner.REFUSED
    assert "DISPATCH_CHECKPOINT_DIR is not set" in capsys.readouterr().err


def test_a_job_that_ended_without_an_outcome_says_how_it_ended(job_dir: Path) -> None:
    with pytest.raises(FunctionError, match=r"failed: preempted \(application\), exit 1, exited"):
        outcome_of(_job(job_dir, State.FAILED, CauseKind.PREEMPTED))
    with pytest.raises(FunctionError, match=r"succeeded.*left no value"):
        outcome_of(_job(job_dir, State.SUCCEEDED))


def test_a_value_from_rank_0_of_a_job_that_failed_is_not_its_result(job_dir: Path) -> None:
    _call(job_dir, square, 3)
    assert runner.run(["--python", HERE]) == 0
    with pytest.raises(FunctionError, match="rank 0's function returned, but the job did not"):
        outcome_of(_job(job_dir, State.FAILED, CauseKind.NON_ZERO_EXIT))


def test_resumed_reads_DISPATCH_RESUMED_S44(monkeypatch: pytest.MonkeyPatch) -> None:
    import dispatch

    monkeypatch.delenv("DISPATCH_RESUMED", raising=False)
    assert dispatch.resumed() is False
    monkeypatch.setenv("DISPATCH_RESUMED", "0")
    assert resumed() is False
    monkeypatch.setenv("DISPATCH_RESUMED", "1")
    assert dispatch.resumed() is True
