"""Python functions on the real Slurm: ``Client.map`` as one sweep whose members each run
``python -m dispatch.function_runner`` through sbatch, the values read back from the
checkpoint directory every node reaches; a two-node function run by every rank, its value
written by rank 0; a function's exception raised again here with its remote traceback."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from dispatch import Client, RemoteError
from dispatch.model.enums import State

pytestmark = pytest.mark.live(server="slurm")

# the functions below travel by value: the cluster's interpreter need not import this file
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def power(x: int, exponent: int = 2) -> int:
    return int(x**exponent)


def note_rank(directory: str) -> dict[str, Any]:
    rank = os.environ["RANK"]
    Path(directory, f"rank-{rank}").write_text(os.environ.get("SLURMD_NODENAME", ""))
    return {"rank": rank, "world": os.environ["WORLD_SIZE"]}


def no_such_row(key: str) -> None:
    raise LookupError(f"no row {key!r}")


def _client(tmp_path: Path) -> Client:
    return Client(f"sqlite:///{tmp_path / 'record.db'}")


def _job(workdir: str, **more: Any) -> dict[str, Any]:
    return {
        "workdir": workdir,
        "options": {"partition": "high"},
        "resources": {"time": "5m"},
        **more,
    }


def test_map_returns_the_values_of_a_function_sweep_on_slurm(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    with _client(tmp_path) as client:
        sweep = client.submit_map(
            power,
            range(6),
            backend="slurm",
            name=f"live-map-{uuid.uuid4().hex[:6]}-{{i}}",
            checkpoint_dir=Path(workdir) / "map",
            **_job(workdir),
        )
        assert sweep.results(timeout=600, interval=1) == [0, 1, 4, 9, 16, 25]
        arrays = set()
        for member in sweep.members:
            job = member.record()
            assert job.backend == "slurm" and job.outcome is not None
            assert job.outcome.state is State.SUCCEEDED
            (object_id,) = [s.object_id for s in job.submissions if s.object_id]
            array, _, task = object_id.partition("_")
            assert task == str(job.group.index if job.group else -1), object_id
            arrays.add(array)
        assert len(arrays) == 1, f"a map is one Slurm job array; got {sorted(arrays)}"


def test_every_rank_of_a_two_node_function_runs_it_and_rank_0_gives_the_value(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    ranks = Path(workdir) / "ranks"
    ranks.mkdir()
    os.chmod(ranks, 0o777)
    with _client(tmp_path) as client:
        handle = client.submit_function(
            note_rank,
            str(ranks),
            backend="slurm",
            resources={"nodes": 2, "time": "5m"},
            job={
                "name": f"live-fn-{uuid.uuid4().hex[:6]}",
                "workdir": workdir,
                "options": {"partition": "high"},
                "checkpoint_dir": str(Path(workdir) / "two"),
            },
        )
        assert handle.result(timeout=600, interval=1) == {"rank": "0", "world": "2"}
    written = {p.name: p.read_text() for p in ranks.iterdir()}
    assert sorted(written) == ["rank-0", "rank-1"]
    assert len(set(written.values())) == 2  # on two nodes


def test_a_functions_exception_on_slurm_is_raised_here_with_its_traceback(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    with _client(tmp_path) as client:
        handle = client.submit_function(
            no_such_row,
            "lr",
            backend="slurm",
            job={
                "name": f"live-fn-{uuid.uuid4().hex[:6]}",
                "workdir": workdir,
                "options": {"partition": "high"},
                "checkpoint_dir": str(Path(workdir) / "raises"),
            },
        )
        with pytest.raises(LookupError, match="no row 'lr'") as raised:
            handle.result(timeout=600, interval=1)
        remote = raised.value.__cause__
        assert isinstance(remote, RemoteError) and remote.type_name == "LookupError"
        assert ", in no_such_row\n" in remote.traceback
        final = handle.status()
        assert final.state is State.FAILED and final.cause is not None
        assert final.cause.exit_code == 1
