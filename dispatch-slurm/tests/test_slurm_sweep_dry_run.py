"""A sweep's dry run on Slurm is the array that is sent (S-30): ``dispatch_prepare_array``
builds the one ``sbatch --array`` (its argv, batch script with the per-task ``case``,
environment and the directories made first) and ``dispatch_submit_array`` sends exactly
that, byte for byte; ``Client.dry_run_sweep`` and ``dispatch submit --sweep ... --dry-run``
show it and record and send nothing; members that cannot share an array show one
``sbatch`` each, as they are sent."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from dispatch import ArrayMember, BadInput, Client, JobSpec, Registry
from dispatch.cli.common import Context
from dispatch.cli.main import cli
from dispatch.model.prepared import Prepared
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import submitter_environment
from dispatch_slurm.runner import Result, Runner

GROUP = "g0123456789ab"
CONFIG = "Configuration data as of 2026-12-02T01:00:00\nMaxArraySize            = 1001\n"
COMMAND = ["python", "train.py", "--lr", "{lr}", "--seed", "{seed}"]


class _Recording(Runner):
    """Answers Slurm's reads as an empty cluster would; records each sbatch: its argv,
    the bytes of the batch script it was given and its environment."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[list[str], bytes, dict[str, str]]] = []
        self.next_id = 4242

    def run(self, argv: Sequence[str], **kwargs: object) -> Result:
        self.calls += 1
        if argv[0] == "sbatch":
            env = kwargs.get("env")
            assert isinstance(env, Mapping) and kwargs.get("inherit_env") is False
            self.sent.append((list(argv), Path(argv[-1]).read_bytes(), dict(env)))
            self.next_id += 1
            return Result(tuple(argv), 0, f"{self.next_id - 1}\n", "")
        if list(argv[:2]) == ["scontrol", "show"]:
            return Result(tuple(argv), 0, CONFIG, "")
        if list(argv[:2]) == ["sinfo", "--version"]:
            return Result(tuple(argv), 0, "slurm 22.05.8\n", "")
        return Result(tuple(argv), 0, "", "")  # squeue, sacct: nothing of ours yet


def _members(tmp_path: Path, count: int) -> list[ArrayMember]:
    return [
        ArrayMember(
            job_id=f"{GROUP}-{i}",
            index=i,
            spec=JobSpec(
                name=f"seed-{i}",
                command=("python", "train.py", "--seed", str(i), "it's"),
                env={"DISPATCH_SWEEP_INDEX": str(i), "DISPATCH_SWEEP_SEED": str(i)},
                options={"partition": "low"},
                checkpoint_dir=str(tmp_path / "ckpt" / str(i)),
            ),
        )
        for i in range(count)
    ]


def _sent_as(sent: tuple[list[str], bytes, dict[str, str]], prepared: Prepared) -> None:
    """``sent`` is ``prepared``: its options then the batch script's temporary path, the
    script byte for byte, sbatch's environment the submitter's with the prepared on top."""
    argv, script, env = sent
    assert argv[:-1] == prepared.words("sbatch")
    assert Path(argv[-1]).name.startswith("dispatch-slurm-")
    assert script == prepared.text("batch script").encode()
    assert env == submitter_environment() | prepared.mapping("environment")


def test_the_prepared_array_is_what_dispatch_submit_array_sends_byte_for_byte_S30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    backend = SlurmBackend(runner)
    members = _members(tmp_path, 3)
    prepared = backend.dispatch_prepare_array(GROUP, members, 2)
    assert prepared is not None
    assert runner.calls == 0 and not (tmp_path / "logs").exists()  # nothing sent or made
    assert (prepared.backend, prepared.job_id, prepared.submission) == ("slurm", GROUP, 1)
    assert "--array=0-2%2" in prepared.words("sbatch")
    assert prepared.words("sbatch").count("--parsable") == 1
    script = prepared.text("batch script")
    assert "  1) set -- tasks " in script and "DISPATCH_JOB_ID=g0123456789ab-1" in script
    directories = prepared.words("directories")
    assert str(tmp_path / "ckpt" / "2") in directories
    assert f"{tmp_path}/logs/job-{GROUP}-2/submission-1" in directories

    ids = backend.dispatch_submit_array(GROUP, members, 2)

    assert ids == ["4242_0", "4242_1", "4242_2"]
    (sent,) = runner.sent
    _sent_as(sent, prepared)
    assert all(Path(d).is_dir() for d in directories)


def test_client_dry_run_sweep_shows_the_array_the_sweep_then_sends_S30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    client = Client(f"sqlite:///{tmp_path / 'record.db'}", registry=registry)
    options, env = {"partition": "low"}, {"MINE": "two words"}
    dry = client.dry_run_sweep(
        COMMAND,
        "lr=[1e-3,3e-4],seed=1..2",
        backend="slurm",
        max_running=3,
        options=options,
        env=env,
    )
    assert dry.as_array and dry.array is not None and dry.members == ()
    assert dry.job_ids == tuple(f"{dry.group_id}-{i}" for i in range(4))
    assert runner.sent == [] and client.store.count_jobs() == {}

    made = client.sweep(
        COMMAND,
        "lr=[1e-3,3e-4],seed=1..2",
        backend="slurm",
        max_running=3,
        options=options,
        env=env,
    )

    assert [m.record().submissions[0].object_id for m in made.members] == [
        f"4242_{i}" for i in range(4)
    ]
    (sent,) = runner.sent  # one sbatch for the four members
    shown = dry.array.model_dump_json().replace(dry.group_id, made.group_id)
    _sent_as(sent, Prepared.model_validate_json(shown))


def test_members_that_cannot_share_an_array_show_one_sbatch_each_as_sent_S30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script sweep is one job per member on Slurm: its dry run shows each member's own
    sbatch, and the submit sends exactly those."""
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    client = Client(f"sqlite:///{tmp_path / 'record.db'}", registry=registry)
    script = "#!/bin/sh\necho seed=$DISPATCH_SWEEP_SEED\n"
    dry = client.dry_run_sweep(None, "seed=1..3", backend="slurm", script=script)
    assert not dry.as_array and dry.array is None and len(dry.members) == 3
    assert [one.job_id for one in dry.members] == list(dry.job_ids)
    assert runner.sent == []

    made = client.sweep(None, "seed=1..3", backend="slurm", script=script)

    assert len(runner.sent) == 3
    for index, one in enumerate(dry.members):
        assert one.prepared is not None
        assert not any(w.startswith("--array") for w in one.prepared.words("sbatch"))
        shown = one.prepared.model_dump_json().replace(dry.group_id, made.group_id)
        prepared = Prepared.model_validate_json(shown)
        argv, body, env = runner.sent[index]
        options, arguments = prepared.words("sbatch"), prepared.words("script arguments")
        assert argv == [*options, argv[len(options)], *arguments]
        assert body == prepared.text("batch script").encode()
        assert env == submitter_environment() | prepared.mapping("environment")


def test_cli_sweep_dry_run_prints_the_one_array_and_records_nothing_S30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    words = [
        "submit",
        "--backend",
        "slurm",
        "--sweep",
        "lr=[1e-3,3e-4],seed=1..2",
        "--max-running",
        "2",
        "--dry-run",
        "--",
        *COMMAND,
    ]
    store = f"sqlite:///{tmp_path / 'record.db'}"
    out = CliRunner().invoke(cli, words, obj=Context(store, registry=registry))
    assert out.exit_code == 0, out.output
    text = out.stdout
    group = text.split("group id  ", 1)[1].split()[0]
    assert "dry run: nothing recorded, nothing sent to slurm" in text
    assert f"{group}-3 lr=3e-4,seed=2: python train.py --lr 3e-4 --seed 2\n" in text
    assert "the first submissions of all 4 members: ONE array, at most 2 at once ===" in text
    sbatch = text.split("--- sbatch ---\n", 1)[1].splitlines()[0]
    assert sbatch.startswith(f"sbatch --parsable --job-name=dsp.{group} ")
    assert "--array=0-3%2" in sbatch
    assert 'case "${SLURM_ARRAY_TASK_ID:-}" in' in text
    assert f"  3) set -- tasks {tmp_path}/logs/job-{group}-3/submission-1 python train.py" in text
    assert f"DISPATCH_JOB_ID={group}-0" in text.split("--- environment ---", 1)[1]
    assert "=== plan ===" in text
    assert runner.sent == [] and not (tmp_path / "record.db").exists()

    out = CliRunner().invoke(
        cli, [*words[:-7], "--json", *words[-7:]], obj=Context(store, registry=registry)
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["as_array"] is True and data["submissions"] == []
    assert "--array=0-3%2" in data["array"]["parts"]["sbatch"]
    assert [m["values"] for m in data["members"]][3] == {"lr": "3e-4", "seed": "2"}
    assert runner.sent == []


def test_a_job_files_sweep_dry_runs_as_the_one_array_S30(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    runner = _Recording()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    client = Client(f"sqlite:///{tmp_path / 'record.db'}", registry=registry)
    path = tmp_path / "job.toml"
    path.write_text(
        'backend = "slurm"\ncommand = ["python", "train.py", "--seed", "{seed}"]\n'
        '[sweep]\nseed = "1..4"\nmax_running = 3\n'
    )
    dry = client.dry_run_sweep_file(path)
    assert dry.array is not None and "--array=0-3%3" in dry.array.words("sbatch")
    assert dry.values[3] == {"seed": "4"} and runner.sent == []
    single = tmp_path / "one.toml"
    single.write_text('backend = "slurm"\ncommand = ["true"]\n')
    with pytest.raises(BadInput, match="no \\[sweep\\] table"):
        client.dry_run_sweep_file(single)
