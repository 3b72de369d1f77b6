"""The test cluster: where its start script is, how to start it, how to lose a node.

The start script ships inside this package (package data), so ``dispatch-conformance
slurm --live`` works from an installed wheel; ``dispatch-slurm/scripts/start-slurm.sh`` in
the checkout is a symbolic link to the same file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

#: where the start script keeps state, spool, logs and pid files
STATE_DIR = Path(os.environ.get("DISPATCH_SLURM_DIR", "/var/tmp/dispatch-slurm"))


class ClusterError(RuntimeError):
    """The test cluster could not be started or changed; the message holds what it said."""


def start_script() -> Path:
    """The start script: ``DISPATCH_SLURM_START_SCRIPT`` when set, else the packaged one."""
    override = os.environ.get("DISPATCH_SLURM_START_SCRIPT")
    if override:
        return Path(override)
    return Path(str(resources.files(__package__).joinpath("start-slurm.sh")))


def start(timeout: float = 900) -> str:
    """Run the start script (idempotent); its output, or :class:`ClusterError`."""
    env = dict(os.environ)
    if shutil.which("sbatch") and shutil.which("slurmctld"):
        env.setdefault("SKIP_APT", "1")
    done = subprocess.run(
        ["bash", str(start_script())],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ClusterError(
            f"{start_script()} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def cgroup_memory() -> tuple[bool, str]:
    """What the start script found: whether an OOM can be provoked here, and why."""
    marker = STATE_DIR / "cgroup-memory"
    if not marker.exists():
        return False, f"{marker} missing: run the start script first"
    text = marker.read_text().strip()
    return text.split(":", 1)[1].strip().startswith("yes"), text


def memory_enforcement() -> tuple[bool, str]:
    """Whether the cluster ``sinfo`` reaches kills a job over its ``--mem`` (an OOM can be
    provoked), from ``scontrol show config``: task/cgroup with ConstrainRAMSpace=yes.

    Works on any cluster (the non-destructive mode asks it of a platform team's own).
    """
    done = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return False, f"scontrol show config failed: {done.stderr.strip()}"
    config = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip()
    task = config.get("TaskPlugin", "")
    ram = config.get("ConstrainRAMSpace", "no")
    if "task/cgroup" in task and ram.lower() == "yes":
        return True, f"TaskPlugin={task}, ConstrainRAMSpace={ram}"
    return False, f"memory is not enforced: TaskPlugin={task}, ConstrainRAMSpace={ram}"


def nodes() -> list[str]:
    """The cluster's node names, as ``sinfo`` lists them (empty when it cannot answer)."""
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return []
    return list(dict.fromkeys(done.stdout.split()))


def _node_command(*args: str, timeout: float) -> str:
    done = subprocess.run(
        ["bash", str(start_script()), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ClusterError(
            f"start-slurm.sh {' '.join(args)} failed ({done.returncode}): "
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout


def lose_node(node: str, how: str = "kill") -> str:
    """Lose ``node`` for real: ``kill`` SIGKILLs its slurmd and every process in its
    cgroups (their sockets close at once); ``freeze`` stops them all (sockets stay open,
    like a node that lost power). Slurm declares it DOWN after SlurmdTimeout."""
    return _node_command("lose", node, how, timeout=60)


def restore_node(node: str) -> str:
    """Kill what is left on ``node``, start its slurmd again, wait until it is usable."""
    return _node_command("restore", node, timeout=180)


def torch_python(timeout: float = 1800) -> str:
    """The python of a virtualenv where torch imports (the packaged install-torch.sh,
    idempotent and cached outside the checkout); :class:`ClusterError` when it cannot."""
    script = Path(str(resources.files(__package__).joinpath("install-torch.sh")))
    done = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise ClusterError(f"{script} failed ({done.returncode}): {done.stderr}")
    return done.stdout.strip().splitlines()[-1]
