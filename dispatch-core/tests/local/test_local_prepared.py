"""A local dry run is what runs (S-30): ``dispatch_prepare`` decides the runner's argv and
the command's argv, directory and environment; ``dispatch_send`` starts exactly that
runner, and the command the runner starts sees exactly that argv, directory and (on top
of the submitter's kept environment) environment, as the kernel shows them in ``/proc``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from dispatch import JobSpec, ObjectView, Phase
from dispatch.local.backend import LocalBackend
from dispatch.local.layout import StateDir


def _words(raw: bytes) -> list[str]:
    return raw.decode().split("\0")[:-1]


def test_the_prepared_runner_command_directory_and_environment_are_what_runs_S30(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
) -> None:
    out = tmp_path / "seen"
    out.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    show = (
        f"cat /proc/$$/cmdline > {out}/argv; cat /proc/$$/environ > {out}/env; pwd -P > {out}/cwd; "
        f"while [ ! -e {out}/go ]; do sleep 0.05; done"
    )
    spec = JobSpec(
        command=("sh", "-c", show, "one", "two words"), env={"MINE": "x y"}, workdir=str(work)
    )
    kept = {"FROM_SUBMITTER": "kept", "PATH": os.environ["PATH"], "MINE": "overridden"}
    backend.keep_environment("job-prepared", kept)

    prepared = backend.dispatch_prepare("job-prepared", 2, spec, False)
    object_id = backend.dispatch_send(prepared)

    assert prepared.mapping("object")["object_id"] == object_id
    cwd = wait_file(out / "cwd")
    runner = json.loads((StateDir(backend.state.root).object_dir(object_id).runner).read_text())
    ran_runner = _words(Path(f"/proc/{runner['pid']}/cmdline").read_bytes())
    (out / "go").write_text("")
    settle("job-prepared", lambda v: v.phase is Phase.ENDED)

    assert ran_runner == prepared.words("runner")
    assert _words((out / "argv").read_bytes()) == prepared.words("command")
    assert cwd.strip() == prepared.text("directory") == str(work.resolve())
    env = dict(word.split("=", 1) for word in _words((out / "env").read_bytes()))
    assert env == {**kept, **prepared.mapping("environment")}
    assert env["MINE"] == "x y" and env["DISPATCH_SUBMISSION"] == "2"
    assert env["DISPATCH_OBJECT_ID"] == object_id


def test_prepare_writes_nothing_and_a_refusal_is_said_before_anything_S30(
    backend: LocalBackend, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "ck"
    prepared = backend.dispatch_prepare(
        "job-dry", 1, JobSpec(command=("true",), checkpoint_dir=str(checkpoints)), False
    )
    assert prepared.mapping("environment")["DISPATCH_CHECKPOINT_DIR"] == str(checkpoints)
    assert not checkpoints.exists()
    assert not (backend.state.root / "objects").exists() or not any(
        (backend.state.root / "objects").iterdir()
    )
