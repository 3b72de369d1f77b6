"""The README's multi-node example, run as written on the real cluster (S-41):
``dispatch submit --backend slurm --nodes 2 --gpus-per-node N ... -- torchrun train.py``
with no --launcher and no --tasks-per-node runs one torch.distributed job of 2 x N
workers (each node's GRES has 2 GPUs here; gloo on CPU does the work)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dispatch_slurm_testing.cluster import ClusterError, torch_python

pytestmark = pytest.mark.live(server="slurm")

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "torch-ddp" / "train.py"
DISPATCH = str(Path(sys.executable).with_name("dispatch"))
RESULT = re.compile(r"rank (\d)/4 on (node\d): all_reduce=10 expected=10")


@pytest.fixture(scope="module")
def torch_py(slurm_cluster: str) -> str:
    try:
        return torch_python()
    except ClusterError as exc:
        pytest.fail(f"torch cannot be installed here: {exc}", pytrace=False)


def test_the_readme_example_runs_gpus_per_node_workers_on_each_node_S41(
    torch_py: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")},
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DISPATCH_SLURM_LOG_DIR": str(logs),
        "OMP_NUM_THREADS": "1",
    }
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\non = ["preempted", "node-lost"]\naction = "resubmit"\nbudget = 3\n'
    )
    torchrun = str(Path(torch_py).with_name("torchrun"))
    done = subprocess.run(
        [
            DISPATCH,
            "submit",
            "--backend",
            "slurm",
            "--policy",
            str(policy),
            "--nodes",
            "2",
            "--gpus-per-node",
            "2",
            "--time",
            "0:10:00",
            "-o",
            "partition=high",  # PreemptMode=OFF: another test's preemption cannot end it
            "--mem",
            "3G",
            "--workdir",
            str(tmp_path),
            "--wait",
            "--interval",
            "1",
            "--",
            torchrun,
            str(TRAIN),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    job_id = done.stdout.splitlines()[0].strip()
    printed = "".join(p.read_text() for p in sorted((logs / f"job-{job_id}").rglob("node*.out")))
    ranks = dict(RESULT.findall(printed))
    assert sorted(ranks) == ["0", "1", "2", "3"], printed
    assert sorted(ranks.values()).count(ranks["0"]) == 2 and len(set(ranks.values())) == 2
    assert printed.count("weights-in-sync=True") == 4, printed
