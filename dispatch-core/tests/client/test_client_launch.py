"""The launcher follows the command (S-41): a command that starts torchrun runs under the
``torchrun`` launcher unless told otherwise, and ``gpus_per_node`` N starts N workers per
node there; any other command keeps the ``tasks`` launcher."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch import Client, Launcher
from dispatch.inputs import starts_torchrun
from dispatch.model.errors import BadInput


@pytest.fixture
def client(tmp_path: Path) -> Client:
    return Client(f"sqlite:///{tmp_path / 'record.db'}")


@pytest.mark.parametrize(
    "command",
    [
        ["torchrun", "train.py"],
        ["/opt/venv/bin/torchrun", "--standalone", "train.py"],
        ["python", "-m", "torch.distributed.run", "train.py"],
        ["python3.11", "-m", "torch.distributed.run", "train.py"],
        ["env", "NCCL_DEBUG=INFO", "torchrun", "train.py"],
    ],
)
def test_a_command_starting_torchrun_is_recognised(command: list[str]) -> None:
    assert starts_torchrun(command)


@pytest.mark.parametrize(
    "command",
    [
        ["python", "train.py"],
        ["python", "-m", "torch.distributed.launch", "train.py"],
        ["sh", "-c", "torchrun train.py"],
        ["pythonista", "-m", "torch.distributed.run"],
        ["env"],
        ["echo", "torchrun"],
    ],
)
def test_other_commands_are_not_torchrun(command: list[str]) -> None:
    assert not starts_torchrun(command)


def test_torchrun_with_gpus_gives_one_worker_per_gpu_S41(client: Client) -> None:
    spec = client.spec(["torchrun", "train.py"], resources={"nodes": 2, "gpus_per_node": 8})
    assert spec.launcher is Launcher.TORCHRUN
    assert spec.resources.tasks_per_node == 8
    assert spec.resources.nodes == 2


def test_python_m_torch_distributed_run_is_torchrun_S41(client: Client) -> None:
    spec = client.spec(
        ["python", "-m", "torch.distributed.run", "train.py"], resources={"gpus_per_node": 4}
    )
    assert (spec.launcher, spec.resources.tasks_per_node) == (Launcher.TORCHRUN, 4)


def test_tasks_per_node_given_wins_over_the_gpus_S41(client: Client) -> None:
    spec = client.spec(
        ["torchrun", "train.py"], resources={"gpus_per_node": 8, "tasks_per_node": 2}
    )
    assert (spec.launcher, spec.resources.tasks_per_node) == (Launcher.TORCHRUN, 2)


def test_a_launcher_given_wins_over_the_command_S41(client: Client) -> None:
    spec = client.spec(["torchrun", "train.py"], resources={"gpus_per_node": 8}, launcher="tasks")
    assert (spec.launcher, spec.resources.tasks_per_node) == (Launcher.TASKS, 1)


def test_torchrun_without_gpus_keeps_one_worker_per_node_S41(client: Client) -> None:
    spec = client.spec(["torchrun", "train.py"])
    assert (spec.launcher, spec.resources.tasks_per_node) == (Launcher.TORCHRUN, 1)


def test_other_commands_keep_the_tasks_launcher_S41(client: Client) -> None:
    spec = client.spec(["python", "train.py"], resources={"gpus_per_node": 8})
    assert (spec.launcher, spec.resources.tasks_per_node) == (Launcher.TASKS, 1)


def test_an_unknown_launcher_is_still_refused_S36(client: Client) -> None:
    with pytest.raises(BadInput, match="mpirun"):
        client.spec(["torchrun", "train.py"], launcher="mpirun")
