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


def run_script(command: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``start-kube.sh COMMAND ARGS...`` with the caller's environment (plus ``env``)."""
    proc = subprocess.run(
        ["bash", str(SCRIPT), command, *args],
        capture_output=True,
        text=True,
        env=os.environ | (env or {}),
        timeout=3600,
    )
    if proc.returncode != 0:
        said = " ".join((command, *args))
        raise ControlPlaneError(
            f"{SCRIPT} {said} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


@functools.cache
def control_plane() -> ControlPlane:
    """Started once per process (the script itself is idempotent across processes)."""
    return _start()


def own_plane(run_dir: Path, offset: int) -> ControlPlane:
    """Start (or find running) a control plane of its own beside the default one: its
    state in ``run_dir``, every port plus ``offset``. Stop it with :func:`stop_own`."""
    return _start(own(run_dir, offset))


def own(run_dir: Path, offset: int) -> dict[str, str]:
    """The variables that make ``start-kube.sh`` act on the plane in ``run_dir``."""
    return {"DISPATCH_KUBE_RUN": str(run_dir), "DISPATCH_KUBE_PORT_OFFSET": str(offset)}


def stop_own(run_dir: Path, offset: int) -> None:
    run_script("stop", env=own(run_dir, offset))


def apiserver(plane: ControlPlane, action: str) -> str:
    """``start-kube.sh apiserver ACTION`` (stop, start, freeze, thaw) on ``plane``'s
    kube-apiserver alone; what the script said."""
    offset = (plane.run_dir / "port-offset").read_text().strip()
    return run_script("apiserver", action, env=own(plane.run_dir, int(offset)))


def _start(changes: dict[str, str] | None = None) -> ControlPlane:
    out = run_script("start", env=changes)
    env: dict[str, str] = {}
    for line in run_script("env", env=changes).splitlines():
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
