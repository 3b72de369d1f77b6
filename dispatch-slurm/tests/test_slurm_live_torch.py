"""A real 2-node torch.distributed job (gloo, CPU) on the 4-node cluster (S-41, S-42).

torch comes from PyPI into a virtualenv outside the checkout, its wheels cached
(``dispatch_slurm_testing/install-torch.sh``, run by the fixture: a warm run fetches
nothing). The training is ``examples/torch-ddp/train.py``: an all_reduce of rank + 1 and a
few DistributedDataParallel steps, which only succeed when both ranks took part.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from dispatch import CauseKind, Launcher, Phase, Resources
from dispatch_slurm.launch import log_dir
from dispatch_slurm_testing.cluster import ClusterError, torch_python
from dispatch_slurm_testing.provoke import wait_for
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

#: the top-tier partition (PreemptMode=OFF): another test preempting `low` jobs to make
#: room cannot end these
UNPREEMPTED = "high"

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "torch-ddp" / "train.py"
DISPATCH = str(Path(sys.executable).with_name("dispatch"))
RESULT = re.compile(r"rank (\d)/2 on (node\d): all_reduce=3 expected=3")


@pytest.fixture(scope="module")
def torch_py(slurm_cluster: str) -> str:
    try:
        return torch_python()
    except ClusterError as exc:
        pytest.fail(f"torch cannot be installed here: {exc}", pytrace=False)


def _ranks_agree(text: str) -> dict[int, str]:
    assert text.count("weights-in-sync=True") == 2, text
    return {int(rank): node for rank, node in RESULT.findall(text)}


def test_dispatch_submit_runs_one_torch_job_on_two_nodes_S41(torch_py, tmp_path: Path) -> None:
    """``dispatch submit --backend slurm --nodes 2 -- python train.py``, as a user types it."""
    logs = tmp_path / "logs"
    env = {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "DISPATCH_SLURM_LOG_DIR": str(logs),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [
            DISPATCH,
            "submit",
            "--backend",
            "slurm",
            "--nodes",
            "2",
            "--mem",
            "3G",
            "--workdir",
            str(tmp_path),
            "--interval",
            "1",
            "--wait",
            "--",
            torch_py,
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
    ranks = _ranks_agree(printed)
    assert sorted(ranks) == [0, 1] and len(set(ranks.values())) == 2, printed


def test_torchrun_launcher_trains_on_two_nodes_S41(backend, provoker, torch_py) -> None:
    job = f"live-torchrun-{uuid.uuid4().hex[:8]}"
    torchrun = str(Path(torch_py).with_name("torchrun"))
    spec = provoker.spec((torchrun, str(TRAIN)), resources=Resources(nodes=2, memory_mb=3072))
    spec = spec.model_copy(update={"launcher": Launcher.TORCHRUN, "env": {"OMP_NUM_THREADS": "1"}})
    backend.dispatch_submit(job, 1, spec, False)
    obj = wait_for(
        backend.dispatch_discover,
        [job],
        lambda s: job in s and s[job].phase is Phase.ENDED,
        timeout=240,
    )[job]
    printed = "".join(p.read_text() for p in sorted(log_dir(job, 1).glob("node*")))
    assert obj.cause.kind is CauseKind.NONE, (obj.cause, printed)
    assert sorted(_ranks_agree(printed)) == [0, 1]


@pytest.mark.parametrize("how", ["kill", "freeze"])
def test_torchrun_with_a_node_lost_or_frozen_names_that_node_S42(
    backend, provoker, torch_py, how: str
) -> None:
    """Lost: rank 0 fails at once (connection closed) but that is not the cause; frozen:
    rank 0 hangs in all_reduce (sockets stay open) until Slurm declares the node down."""
    job = f"live-torchrun-{how}-{uuid.uuid4().hex[:8]}"
    torchrun = str(Path(torch_py).with_name("torchrun"))
    spec = provoker.spec(
        (torchrun, str(TRAIN), "--seconds", "600"),
        resources=Resources(nodes=2, memory_mb=3072),
        requeue="no",
        sbatch_args="--nodelist=node[3-4]",
        partition=UNPREEMPTED,
    )
    spec = spec.model_copy(update={"launcher": Launcher.TORCHRUN, "env": {"OMP_NUM_THREADS": "1"}})
    oid = backend.dispatch_submit(job, 1, spec, False)
    try:
        eventually(
            lambda: "all_reduce=3" in "".join(p.read_text() for p in log_dir(job, 1).glob("node*")),
            timeout=180,
            interval=1,
            what="the training started (all_reduce=3 in the logs)",
        )
        assert provoker.lose(oid, which=-1, how=how) == "node4"
        obj = wait_for(
            backend.dispatch_discover, [job], lambda s: s[job].phase is Phase.ENDED, timeout=120
        )[job]
    finally:
        provoker.restore_nodes()
        provoker.cleanup([oid])
    assert obj.cause.kind is CauseKind.NODE_LOST
    assert obj.cause.nodes == ("node4",), obj.cause
