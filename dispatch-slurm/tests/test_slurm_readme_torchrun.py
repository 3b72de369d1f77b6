"""The README's multi-node example runs as written (S-41): ``dispatch submit --backend
slurm --nodes 2 --gpus-per-node 8 ... -- torchrun train.py`` runs under the torchrun
launcher with 8 workers per node, and the batch script its dry run shows, run as Slurm
would run it (with ``scontrol`` and ``srun`` standing in on PATH), starts one torchrun per
node with the rendezvous settings of that node."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

DISPATCH = str(Path(sys.executable).with_name("dispatch"))

FAKE_SCONTROL = """#!/bin/sh
case "$1 $2" in
  "show hostnames") printf 'gpu1\\ngpu2\\n' ;;
  "show node") echo "NodeName=$3 Arch=x86_64 NodeAddr=10.1.0.$(printf %s "$3" | tr -dc 0-9)" ;;
esac
"""

# records, per step, the PET_* variables, NODE_RANK and the words srun was asked to run
FAKE_SRUN = """#!/bin/sh
out="$FAKE_OUT/step.$PET_NODE_RANK"
env | grep -E '^(PET_[A-Z_]+|NODE_RANK)=' | sort >"$out"
printf 'argv=%s\\n' "$*" >>"$out"
"""


def _tool(directory: Path, name: str, text: str) -> None:
    path = directory / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_readme_multinode_example_reaches_each_nodes_torchrun_S41(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 3\n')
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")},
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DISPATCH_SLURM_LOG_DIR": str(tmp_path / "logs"),
    }
    # the README's words, with --dry-run --json
    done = subprocess.run(
        [
            DISPATCH,
            "submit",
            "--dry-run",
            "--json",
            "--backend",
            "slurm",
            "--policy",
            str(policy),
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--time",
            "4:00:00",
            "-o",
            "partition=gpu",
            "--",
            "torchrun",
            "train.py",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    dry = json.loads(done.stdout)
    assert dry["spec"]["launcher"] == "torchrun"
    assert dry["spec"]["resources"]["tasks_per_node"] == 8
    parts = dry["prepared"]["parts"]
    sbatch = parts["sbatch"]
    assert {"--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8"} <= set(sbatch)
    arguments = parts["script arguments"]
    assert arguments[0] == "torchrun" and arguments[2:] == ["torchrun", "train.py"]
    assert not (tmp_path / "state" / "dispatch" / "record.db").exists()

    # run the batch script as Slurm would on the job's first node
    tools = tmp_path / "bin"
    tools.mkdir()
    _tool(tools, "scontrol", FAKE_SCONTROL)
    _tool(tools, "srun", FAKE_SRUN)
    _tool(tools, "squeue", "#!/bin/sh\n")
    script = tmp_path / "batch.sh"
    script.write_text(parts["batch script"])
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    steps = tmp_path / "steps"
    steps.mkdir()
    slurm = {
        "SLURM_JOB_NODELIST": "gpu[1-2]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NTASKS_PER_NODE": "8",
        "SLURM_JOB_ID": "4242",
    }
    ran = subprocess.run(
        ["bash", str(script), arguments[0], str(logdir), *arguments[2:]],
        capture_output=True,
        text=True,
        env={
            "PATH": f"{tools}:{os.environ['PATH']}",
            "HOME": str(tmp_path),
            "FAKE_OUT": str(steps),
            **slurm,
            **parts["environment"],
        },
        cwd=tmp_path,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr + ran.stdout
    port = str(20000 + 4242 % 20000)
    for rank in (0, 1):
        seen = (steps / f"step.{rank}").read_text().splitlines()
        assert seen[:-1] == [
            "NODE_RANK=" + str(rank),
            "PET_MASTER_ADDR=10.1.0.1",
            f"PET_MASTER_PORT={port}",
            "PET_NNODES=2",
            f"PET_NODE_RANK={rank}",
            "PET_NPROC_PER_NODE=8",
        ]
        argv = seen[-1].removeprefix("argv=").split()
        assert f"--nodelist=gpu{rank + 1}" in argv and "--ntasks=1" in argv
        assert argv[-2:] == ["torchrun", "train.py"]
    assert sorted(p.name for p in steps.iterdir()) == ["step.0", "step.1"]
