"""Start the real control plane through the project's script and say where it is.

Tests never skip for want of it: :func:`control_plane` runs ``start-kube.sh`` (which
builds what is missing and starts what is not running, idempotently) and raises with the
script's output when that fails.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "start-kube.sh"


class ControlPlaneError(RuntimeError):
    """start-kube.sh failed; the message holds its output."""


@dataclass(frozen=True)
class ControlPlane:
    kubeconfig: Path
    api: str
    run_dir: Path
    bin_dir: Path
    versions: dict[str, str]
    started_here: bool

    @property
    def trainer_version(self) -> tuple[int, int]:
        """The running Trainer's MAJOR.MINOR (``DISPATCH_KUBE_TRAINER``), the API shape
        the adapter must send it (its ``trainer_version`` setting)."""
        major, minor = self.versions["trainer"].lstrip("v").split(".")[:2]
        return int(major), int(minor)

    def pid(self, process: str) -> int:
        return int((self.run_dir / "pids" / f"{process}.pid").read_text())

    def log(self, process: str) -> Path:
        return self.run_dir / "logs" / f"{process}.log"


def run_script(command: str) -> str:
    proc = subprocess.run(
        ["bash", str(SCRIPT), command],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=3600,
    )
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"{SCRIPT} {command} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


@functools.cache
def control_plane() -> ControlPlane:
    """Started once per process (the script itself is idempotent across processes)."""
    out = run_script("start")
    env: dict[str, str] = {}
    for line in run_script("env").splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    versions = dict(kv.split("=", 1) for kv in env["DISPATCH_KUBE_VERSIONS"].split(","))
    return ControlPlane(
        kubeconfig=Path(env["KUBECONFIG"]),
        api=env["DISPATCH_KUBE_API"],
        run_dir=Path(env["DISPATCH_KUBE_RUN"]),
        bin_dir=Path(env["DISPATCH_KUBE_BIN"]),
        versions=versions,
        started_here="starting kube-apiserver" in out,
    )


def stop() -> None:
    run_script("stop")
