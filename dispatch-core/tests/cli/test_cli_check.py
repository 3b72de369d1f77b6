"""The optional ``dispatch_check`` (S-30, S-36): what the scheduler's present state makes
impossible is refused before anything is recorded, on every path that records a job or
shows a dry run; a scheduler that cannot be read refuses nothing silently (exit 3,
nothing recorded); a backend without the hook submits as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from dispatch import (
    BadInput,
    CauseKind,
    Client,
    Declarations,
    Discovery,
    JobSpec,
    Unreachable,
    hookimpl,
)
from dispatch.backends import Registry
from dispatch.cli.common import Context
from dispatch.cli.main import cli

QUEUES = ("team-a", "team-b")


class Queued:
    """A scheduler with named queues: a job names one with ``-o queue=``."""

    def __init__(self, *, checks: bool = True) -> None:
        self.checks = checks
        self.calls: list[str] = []
        self.down = False
        self.queues = QUEUES

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name="queued",
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE, CauseKind.UNKNOWN}),
            options={"queue": "the queue"},
        )

    @hookimpl
    def dispatch_discover(self, job_ids: Any) -> Discovery:
        return Discovery(backend="queued", at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        self.calls.append(f"submit {job_id}")
        return f"obj-{job_id}-{submission}"

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Any) -> None:
        return None


class Checking(Queued):
    @hookimpl
    def dispatch_check(self, spec: JobSpec) -> None:
        self.calls.append("check")
        if self.down:
            raise Unreachable("the queue list could not be read: connection refused")
        queue = spec.options.get("queue")
        if queue is not None and queue not in self.queues:
            there = ", ".join(self.queues)
            raise BadInput(f"-o queue={queue!r}: no such queue (there are: {there})")


def _run(tmp_path: Path, plugin: Queued, *args: str) -> Result:
    registry = Registry.from_plugins({"queued": plugin})
    return CliRunner().invoke(
        cli,
        ["submit", "--backend", "queued", *args],
        obj=Context(f"sqlite:///{tmp_path / 'r.db'}", registry=registry),
    )


def _recorded(tmp_path: Path, plugin: Queued) -> list[Any]:
    registry = Registry.from_plugins({"queued": plugin})
    with Client(f"sqlite:///{tmp_path / 'r.db'}", registry=registry) as client:
        return client.jobs()


@pytest.mark.parametrize(
    "how",
    [
        [],
        ["--dry-run"],
        ["--no-start"],
        ["--sweep", "seed=1..3"],
        ["--sweep", "seed=1..3", "--dry-run"],
        ["--save", "job.toml"],
    ],
    ids=["submit", "dry-run", "no-start", "sweep", "sweep-dry-run", "save"],
)
def test_check_refuses_a_missing_queue_before_anything_is_recorded_S36(
    tmp_path: Path, how: list[str]
) -> None:
    plugin = Checking()
    how = [str(tmp_path / w) if w == "job.toml" else w for w in how]
    out = _run(tmp_path, plugin, "-o", "queue=team-x", *how, "--", "train", "{seed}")
    assert out.exit_code == 2, out.output
    assert "-o queue='team-x': no such queue (there are: team-a, team-b)" in out.output
    assert plugin.calls == ["check"]  # asked once (a sweep too), nothing submitted
    assert _recorded(tmp_path, plugin) == []
    assert not (tmp_path / "job.toml").exists()


def test_a_check_that_cannot_be_made_records_nothing_and_exits_unreachable_S5(
    tmp_path: Path,
) -> None:
    plugin = Checking()
    plugin.down = True
    out = _run(tmp_path, plugin, "-o", "queue=team-a", "--", "train")
    assert out.exit_code == 3, out.output
    assert "the queue list could not be read" in out.output
    assert _recorded(tmp_path, plugin) == []


def test_no_start_records_a_job_whose_check_could_not_be_made(tmp_path: Path) -> None:
    """``--no-start`` records for a supervisor elsewhere, from a host that may not reach
    the scheduler: a check that cannot be made does not stop it (one that can still
    refuses, above); nothing is submitted here."""
    plugin = Checking()
    plugin.down = True
    out = _run(tmp_path, plugin, "--no-start", "-o", "queue=team-x", "--", "train")
    assert out.exit_code == 0, out.output
    assert plugin.calls == ["check"]
    assert len(_recorded(tmp_path, plugin)) == 1
    registry = Registry.from_plugins({"queued": plugin})
    with Client(f"sqlite:///{tmp_path / 'r.db'}", registry=registry) as client:
        client.submit(["train"], backend="queued", start=False)  # the API's --no-start
        with pytest.raises(Unreachable, match="could not be read"):
            client.submit(["train"], backend="queued")
        assert len(client.jobs()) == 2
    assert [c.split()[0] for c in plugin.calls] == ["check"] * 3


def test_a_job_the_check_accepts_is_recorded_and_submitted(tmp_path: Path) -> None:
    plugin = Checking()
    out = _run(tmp_path, plugin, "-o", "queue=team-b", "--", "train")
    assert out.exit_code == 0, out.output
    assert plugin.calls[0] == "check" and plugin.calls[1].startswith("submit ")
    assert len(_recorded(tmp_path, plugin)) == 1


def test_a_backend_without_the_hook_submits_as_before_S30(tmp_path: Path) -> None:
    plugin = Queued()
    out = _run(tmp_path, plugin, "-o", "queue=team-x", "--", "train")
    assert out.exit_code == 0, out.output
    assert [c.split()[0] for c in plugin.calls] == ["submit"]
    assert len(_recorded(tmp_path, plugin)) == 1


def test_client_api_paths_go_through_the_check(tmp_path: Path) -> None:
    """``Client.submit``, ``dry_run``, ``sweep`` and ``submit_function`` all refuse."""
    plugin = Checking()
    registry = Registry.from_plugins({"queued": plugin})
    with Client(f"sqlite:///{tmp_path / 'r.db'}", registry=registry) as client:
        options = {"queue": "team-x"}
        calls = [
            lambda: client.submit(["train"], backend="queued", options=options),
            lambda: client.dry_run(["train"], backend="queued", options=options),
            lambda: client.sweep(["train", "{s}"], "s=1..2", backend="queued", options=options),
            lambda: client.submit_function(
                len,
                [1],
                backend="queued",
                job={"options": options, "checkpoint_dir": str(tmp_path)},
            ),
        ]
        for call in calls:
            with pytest.raises(BadInput, match="no such queue"):
                call()
        assert client.jobs() == []
    assert plugin.calls == ["check"] * len(calls)


def test_supersede_goes_through_the_check_S18(tmp_path: Path) -> None:
    """A finished job run again as a new one: its spec passed when first recorded, but the
    scheduler may have changed since (a queue deleted): the new job is refused before it
    is recorded, not at every submission. A check that cannot be made lets it be recorded,
    as ``--no-start`` does (a supervisor submits it)."""
    plugin = Checking()
    registry = Registry.from_plugins({"queued": plugin})
    with Client(f"sqlite:///{tmp_path / 'r.db'}", registry=registry) as client:
        old = client.submit(["train"], backend="queued", start=False, options={"queue": "team-b"})
        old.cancel()
        plugin.queues = ("team-a",)  # team-b deleted since
        with pytest.raises(BadInput, match="no such queue"):
            old.supersede()
        assert len(client.jobs()) == 1
        assert old.status().superseded_by == ()
        plugin.down = True
        new = old.supersede()
        assert old.status().superseded_by == (new.job_id,)
        assert new.status().supersedes == old.job_id
    assert plugin.calls == ["check"] * 3
