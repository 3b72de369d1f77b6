"""The local backend as a plugin: its declarations, its configuration, and what it refuses
(S-5, S-30, S-31, S-36)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch import (
    BadInput,
    Capability,
    Cause,
    CauseKind,
    JobSpec,
    Provenance,
    Registry,
    Resources,
    SubmitRefused,
    Unreachable,
)
from dispatch.local.backend import DEFAULT_STOP_GRACE, LocalBackend


def test_loads_from_its_entry_point_and_declares_what_it_can_report_S30(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """S-30/S-31: found through the entry-point group; declares exactly what it reports."""
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "state"))
    backend = Registry.from_entry_points().get("local")
    declared = backend.declarations
    assert declared.name == "local"
    assert declared.reports == {
        CauseKind.NONE,
        CauseKind.NON_ZERO_EXIT,
        CauseKind.TIME_LIMIT,
        CauseKind.LAUNCH_FAILED,
        CauseKind.CANCELLED,
        CauseKind.UNKNOWN,
    }
    assert not declared.reports & {
        CauseKind.PREEMPTED,
        CauseKind.NODE_LOST,
        CauseKind.OUT_OF_MEMORY,
        CauseKind.NO_CAPACITY,
    }
    assert declared.capabilities == {Capability.GATING, Capability.TIME_LIMIT, Capability.LOGS}
    assert declared.native_actions == frozenset()
    assert declared.max_discovery_batch is None
    assert declared.options == {}
    assert isinstance(backend.plugin, LocalBackend)
    assert backend.plugin.state.root == tmp_path / "state"
    assert backend.plugin.stop_grace == DEFAULT_STOP_GRACE


def test_state_dir_defaults_under_xdg_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DISPATCH_LOCAL_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert LocalBackend().state.root == tmp_path / "dispatch" / "local"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert LocalBackend().state.root == tmp_path / "home" / ".local/state/dispatch/local"


def test_stop_grace_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1.5")
    assert LocalBackend().stop_grace == 1.5


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_stop_grace_is_refused_naming_the_variable_S36(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """S-36: the error says what is wrong and where."""
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", value)
    with pytest.raises(BadInput, match=f"DISPATCH_LOCAL_STOP_GRACE='{value}' is not a number"):
        LocalBackend()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (JobSpec(command=("true",), options={"partition": "gpu"}), "takes no options"),
        (JobSpec(command=("true",), resources=Resources(nodes=2)), "resources.nodes=2"),
        (
            JobSpec(command=("true",), resources=Resources(tasks_per_node=4)),
            "resources.tasks_per_node=4",
        ),
        (
            JobSpec(command=("true",), resources=Resources(gpus_per_node=1)),
            "resources.gpus_per_node=1",
        ),
    ],
)
def test_what_this_host_cannot_provide_is_refused_and_nothing_is_created_S36(
    tmp_path: Path, spec: JobSpec, words: str
) -> None:
    """S-36: refused with the reason, and the state directory is left untouched."""
    state = tmp_path / "state"
    backend = LocalBackend(state_dir=state)
    with pytest.raises(SubmitRefused, match=words):
        backend.dispatch_submit("job-refused", 1, spec, False)
    assert not state.exists()


def test_a_state_dir_that_cannot_be_used_is_unreachable_S5(tmp_path: Path) -> None:
    """S-5: failing to reach the local "scheduler" is an error, never a state."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    backend = LocalBackend(state_dir=blocker)
    with pytest.raises(Unreachable, match=str(blocker)):
        backend.dispatch_discover(["job"])
    with pytest.raises(Unreachable, match=str(blocker)):
        backend.dispatch_submit("job", 1, JobSpec(command=("true",)), False)
    stop = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    with pytest.raises(Unreachable, match=str(blocker)):
        backend.dispatch_stop("local-0123456789ab", stop)
    with pytest.raises(Unreachable, match=str(blocker)):
        backend.dispatch_open_gate("local-0123456789ab")


def test_a_missing_state_dir_knows_no_jobs(tmp_path: Path) -> None:
    backend = LocalBackend(state_dir=tmp_path / "never-used")
    assert backend.dispatch_discover(["job-a", "job-b"]).objects == ()
