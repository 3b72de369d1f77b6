"""The one error boundary: every error type a user can meet reaches them as a message and
the documented exit code, never a traceback: each error type is fed
through the CLI."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dispatch.model.errors
import pytest
from click.testing import CliRunner
from dispatch import CauseKind, Declarations, Discovery, hookimpl
from dispatch.backends import Registry
from dispatch.cli.common import Context
from dispatch.cli.main import cli
from dispatch.client import Client, Deferred, WaitTimeout
from dispatch.store.sqlite import SQLiteStore

#: docs/cli.md, "Exit codes": the documented code of each kind of error.
DOCUMENTED = [
    (dispatch.model.errors.Unreachable, 3),
    (dispatch.model.errors.RecordConflict, 4),
    (dispatch.model.errors.DecodeError, 4),
    (dispatch.model.errors.BackendBroken, 7),
    (dispatch.model.errors.BadInput, 2),
    (dispatch.model.errors.SubmitRefused, 2),
    (dispatch.model.errors.DispatchError, 2),
    (OSError, 3),
    (Exception, 70),
]


def _documented(cls: type[BaseException]) -> int:
    return next(code for base, code in DOCUMENTED if issubclass(cls, base))


def _error_types() -> list[type[BaseException]]:
    """Every dispatch error class (those added later included), plus a bug and an OS error."""
    found = {
        cls
        for _, cls in inspect.getmembers(dispatch.model.errors, inspect.isclass)
        if issubclass(cls, dispatch.model.errors.DispatchError)
    }
    found |= {Deferred, WaitTimeout, OSError, RuntimeError, KeyError}
    return sorted(found, key=lambda c: c.__name__)


def _make(cls: type[BaseException]) -> BaseException:
    for args in ((["boom: what went wrong"],), ("boom: what went wrong",)):
        try:
            return cls(*args)
        except TypeError:
            continue
    exc = cls.__new__(cls)
    Exception.__init__(exc, "boom: what went wrong")
    return exc


class Raising:
    """A backend whose discovery raises the exception it is given."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name="raising",
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE}),
        )

    @hookimpl
    def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
        if self.error is not None:
            raise self.error
        return Discovery(backend="raising", at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        return f"raising-{job_id}"

    @hookimpl
    def dispatch_open_gate(self, object_id):  # type: ignore[no-untyped-def]
        return None

    @hookimpl
    def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
        return None


class FaultyStore(SQLiteStore):
    """A real SQLite record whose reads raise the exception it is given: the way to put
    any error type in front of the CLI's boundary unchanged."""

    error: BaseException | None = None

    def read(self, job_id: str, after: int = 0) -> list[Any]:
        if self.error is not None:
            raise self.error
        return super().read(job_id, after)


def _invoke(tmp_path: Path, error: BaseException, *args: str, env: Any = None) -> Any:
    store = FaultyStore(tmp_path / "record.db")
    registry = Registry.from_plugins({"raising": Raising()})
    job = Client(store, registry=registry).submit(["true"], backend="raising").job_id
    store.error = error
    context = Context(registry=registry, store=store)
    return CliRunner(env=env).invoke(cli, ["status", job, *args], obj=context)


@pytest.mark.parametrize("cls", _error_types(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("as_json", [False, True])
def test_every_error_type_exits_with_its_code_and_a_message(
    tmp_path: Path, cls: type[BaseException], as_json: bool
) -> None:
    result = _invoke(tmp_path, _make(cls), *(["--json"] if as_json else []))
    assert result.exit_code == _documented(cls), (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # not an escaped exception
    assert "Traceback" not in result.stderr
    assert "boom: what went wrong" in result.stderr or cls.__name__ in result.stderr
    if as_json:
        assert f'"exit_code": {_documented(cls)}' in result.stdout


@pytest.mark.parametrize("cls", _error_types(), ids=lambda c: c.__name__)
def test_a_backend_error_passes_if_documented_else_names_backend_and_hook_S50(
    tmp_path: Path, cls: type[BaseException]
) -> None:
    plugin = Raising()
    registry = Registry.from_plugins({"raising": plugin})
    url = f"sqlite://{tmp_path / 'record.db'}"
    job = Client(url, registry=registry).submit(["true"], backend="raising").job_id
    plugin.error = _make(cls)
    result = CliRunner().invoke(cli, ["status", job], obj=Context(url, registry=registry))
    if issubclass(cls, dispatch.model.errors.Unreachable):  # documented for discover
        assert result.exit_code == 3
    else:
        assert result.exit_code == 7, result.stderr
        assert "'raising'" in result.stderr and "dispatch_discover" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bug_names_itself_and_hides_the_traceback_unless_asked(tmp_path: Path) -> None:
    quiet = _invoke(tmp_path / "a", ZeroDivisionError("division by zero"))
    assert quiet.exit_code == 70
    assert "internal error" in quiet.stderr and "ZeroDivisionError" in quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = _invoke(tmp_path / "b", ZeroDivisionError("x"), env={"DISPATCH_DEBUG": "1"})
    assert loud.exit_code == 70 and "Traceback" in loud.stderr


def test_a_password_is_never_printed_S51(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    dispatch = str(Path(sys.executable).with_name("dispatch"))
    url = "postgresql://ana:hunter2@127.0.0.1:1/db?connect_timeout=2"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    for args in (["list"], ["list", "--json"], ["config"], ["config", "--json"]):
        out = subprocess.run(
            [dispatch, "--store", url, *args], capture_output=True, text=True, env=env
        )
        assert "hunter2" not in out.stdout + out.stderr, (args, out.stdout, out.stderr)
        assert out.returncode in (0, 3), (args, out.returncode, out.stderr)
