"""``dispatch backends`` as text: each backend's own declarations (a stale loop
variable printed the last backend's windows for every backend)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner
from dispatch import CauseKind, Declarations, Discovery, hookimpl
from dispatch.backends import Registry
from dispatch.cli.common import Context
from dispatch.cli.main import cli


class Windowed:
    def __init__(self, name: str, loss: int, pending: int) -> None:
        self.name, self.loss, self.pending = name, loss, pending

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=self.name,
            node_loss_window=timedelta(seconds=self.loss),
            pending_windows={CauseKind.NO_CAPACITY: timedelta(seconds=self.pending)},
            reports=frozenset({CauseKind.NONE}),
        )

    @hookimpl
    def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
        return Discovery(backend=self.name, at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        return "x"

    @hookimpl
    def dispatch_open_gate(self, object_id):  # type: ignore[no-untyped-def]
        return None

    @hookimpl
    def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
        return None


def test_backends_text_shows_each_backends_own_windows_S31(tmp_path: Path) -> None:
    registry = Registry.from_plugins(
        {"aaa": Windowed("aaa", 60, 7200), "zzz": Windowed("zzz", 300, 45)}
    )
    out = CliRunner().invoke(
        cli, ["backends"], obj=Context(f"sqlite://{tmp_path / 'r.db'}", registry=registry)
    )
    assert out.exit_code == 0, out.output
    aaa, zzz = out.stdout.split("zzz  (")
    assert "node-loss window  1 min" in aaa and "no-capacity 2 h" in aaa
    assert "node-loss window  5 min" in zzz and "no-capacity 45 s" in zzz
    assert "5 min" not in aaa and "45 s" not in aaa


class Described(Windowed):
    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=self.name,
            description="WARNING: scheduler 9.1 is not a tested version",
            node_loss_window=timedelta(seconds=self.loss),
            reports=frozenset({CauseKind.NONE}),
        )


def test_backends_text_shows_a_backends_description_with_its_warning(tmp_path: Path) -> None:
    registry = Registry.from_plugins(
        {"aaa": Windowed("aaa", 60, 60), "bbb": Described("bbb", 60, 60)}
    )
    out = CliRunner().invoke(
        cli, ["backends"], obj=Context(f"sqlite://{tmp_path / 'r.db'}", registry=registry)
    )
    assert out.exit_code == 0, out.output
    aaa, bbb = out.stdout.split("bbb  (")
    assert "about" not in aaa
    assert "  about             WARNING: scheduler 9.1 is not a tested version" in bbb
