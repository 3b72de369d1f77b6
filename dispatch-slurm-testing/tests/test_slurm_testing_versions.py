"""start-slurm.sh's versions, without starting anything: what `env` points a client at, the
one line when a tarball is absent, and the refusals that keep clusters apart."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from dispatch_slurm_testing import cluster


def _script(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DISPATCH_SLURM"))}
    full.update(env)
    return subprocess.run(
        ["bash", str(cluster.start_script()), *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _tarball(tmp_path: Path, version: str) -> Path:
    sources = tmp_path / "src"
    sources.mkdir(exist_ok=True)
    (sources / f"slurm-{version}.tar.gz").write_bytes(b"not really a tarball")
    return sources


def test_env_of_a_built_version_names_its_own_commands_config_and_state(tmp_path: Path) -> None:
    sources = _tarball(tmp_path, "26.05.3")
    done = _script(
        "env",
        SLURM_VERSION="26.05.3",
        DISPATCH_SLURM_SOURCES=str(sources),
        DISPATCH_SLURM_CACHE=str(tmp_path / "cache"),
        DISPATCH_SLURM_DIR=str(tmp_path / "state"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    prefix = f"{tmp_path}/cache/26.05.3-"
    assert lines[0].startswith(f"export PATH={prefix}") and lines[0].endswith("/sbin:$PATH")
    assert f"export SLURM_CONF={tmp_path}/state/etc/slurm.conf" in lines
    assert f"export DISPATCH_SLURM_DIR={tmp_path}/state" in lines
    assert "export SLURM_VERSION=26.05.3" in lines


def test_22_05_is_the_default_and_keeps_its_paths() -> None:
    done = _script("env")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "export DISPATCH_SLURM_DIR=/var/tmp/dispatch-slurm",
        "export SLURM_VERSION=22.05",
    ]


def test_an_absent_tarball_is_said_in_one_line(tmp_path: Path) -> None:
    done = _script("build", SLURM_VERSION="24.11.7", DISPATCH_SLURM_SOURCES=str(tmp_path))
    assert done.returncode == 1
    assert done.stdout.strip().splitlines() == [
        f"[start-slurm] Slurm 24.11.7: no source tarball {tmp_path}/slurm-24.11.7.tar.gz "
        "(set DISPATCH_SLURM_SOURCES); only 22.05 can run here"
    ]


def test_a_version_the_script_does_not_build_is_refused() -> None:
    done = _script("env", SLURM_VERSION="23.11.4")
    assert done.returncode == 2
    assert "SLURM_VERSION=23.11.4: not one of 22.05, 24.11.7, 25.11.7, 26.05.3" in done.stderr


def test_a_state_dir_holding_another_versions_cluster_is_refused(tmp_path: Path) -> None:
    sources = _tarball(tmp_path, "26.05.3")
    state = tmp_path / "state"
    state.mkdir()
    (state / "version").write_text("24.11.7\n")
    for command in (("env",), ("status",), ("stop",), ("lose", "node1")):
        done = _script(
            *command,
            SLURM_VERSION="26.05.3",
            DISPATCH_SLURM_SOURCES=str(sources),
            DISPATCH_SLURM_DIR=str(state),
        )
        assert done.returncode == 2, command
        assert "holds the Slurm 24.11.7 cluster, not 26.05.3" in done.stdout, command
