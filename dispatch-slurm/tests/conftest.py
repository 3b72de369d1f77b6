"""Fixtures for dispatch-slurm's tests.

Live tests need the real Slurm that the start script of dispatch-slurm-testing builds
(``dispatch_slurm_testing.cluster.start``). The session fixture runs that script
(idempotent; ``SKIP_APT=1`` when Slurm is already installed) and fails loudly when
``sinfo`` still cannot reach a controller: a live test never skips silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm_testing.cluster import ClusterError, start
from dispatch_slurm_testing.provoke import Provoker
from dispatch_testing.waiting import eventually

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    try:
        started = start()
    except ClusterError as exc:
        pytest.fail(str(exc), pytrace=False)
    sinfo = subprocess.run(
        ["sinfo", "-h", "-o", "%P %a %T"], capture_output=True, text=True, timeout=60, check=False
    )
    if sinfo.returncode != 0 or not sinfo.stdout.strip():
        pytest.fail(f"sinfo cannot reach the Slurm controller: {sinfo.stderr}", pytrace=False)
    cgroup = [line for line in started.splitlines() if "cgroup-memory-enforcement" in line]
    print(f"\n[dispatch-slurm live] {cgroup[0] if cgroup else 'cgroup: not reported'}")
    return sinfo.stdout


@pytest.fixture
def workdir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="dispatch-slurm-live-", dir="/var/tmp")
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def backend(slurm_cluster: str) -> SlurmBackend:
    return SlurmBackend()


@pytest.fixture
def provoker(backend: SlurmBackend, workdir: str) -> Provoker:
    return Provoker(backend.dispatch_submit, workdir)


def _step_tasks(object_id: str) -> set[str]:
    """The nodes on which a task of a numbered step of the job runs, read from ``/proc``
    (the test cluster's slurmd's all run on this host): srun has launched it there."""
    nodes = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or exiting
        env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        if (
            env.get(b"SLURM_JOB_ID") == object_id.encode()
            and env.get(b"SLURM_STEP_ID", b"").isdigit()
        ):
            nodes.add(env.get(b"SLURMD_NODENAME", b"").decode())
    return nodes


@pytest.fixture
def launched(provoker: Provoker) -> Callable[[str], None]:
    """``launched(object_id)``: wait until srun has launched the job's steps through the
    slurmd of every node of the job (a task of them runs on each), so losing a node then
    loses a running step, not one still being launched."""

    def wait(object_id: str) -> None:
        nodes = set(provoker.nodes_of(object_id))
        eventually(
            lambda: _step_tasks(object_id),
            until=lambda running: nodes <= running,
            timeout=120,
            interval=0.2,
            what=f"job {object_id}'s steps running on {sorted(nodes)}",
        )

    return wait
