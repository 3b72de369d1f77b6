"""Parsers of Slurm's text output, tags and the sbatch argument list (S-30, S-36)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from dispatch import BadInput, JobSpec, Resources
from dispatch_slurm.backend import declarations, sbatch_argv
from dispatch_slurm.parse import (
    ExitStatus,
    ParseError,
    expand_hostlist,
    parse_exit_pair,
    parse_sacct,
    parse_squeue,
    parse_wait_status,
)
from dispatch_slurm.runner import unreachable_words
from dispatch_slurm.tags import Tag, job_id_from_name, job_name, parse_comment

CAPTURES = Path(__file__).parent / "data" / "captures"


def test_squeue_exit_code_is_a_raw_wait_status() -> None:
    assert parse_wait_status("35072") == ExitStatus(137, 0)
    assert parse_wait_status("9") == ExitStatus(0, 9)
    assert parse_wait_status("125") == ExitStatus(0, 125)
    assert parse_wait_status("-2") == ExitStatus(0, 0)  # requeued, no status yet
    with pytest.raises(ParseError, match="bad exit status 'x'"):
        parse_wait_status("x")


def test_sacct_exit_pairs_and_cancelled_by() -> None:
    assert parse_exit_pair("9:0") == ExitStatus(9, 0)
    assert parse_exit_pair("") == ExitStatus(0, 0)
    (row,) = parse_sacct(
        "9|dsp.a|CANCELLED by 0|0:0|0:0|2026-11-29T22:34:52|"
        "2026-11-29T22:34:52|2026-11-29T22:34:52|None assigned|low|c\n"
    )
    assert (row.state, row.cancelled_by, row.nodes) == ("CANCELLED", 0, "")
    with pytest.raises(ParseError, match=r"sacct.*expected 11"):
        parse_sacct("1|2|3\n")


def test_squeue_rows_keep_the_free_text_reason_last() -> None:
    (row,) = parse_squeue(
        "44|dsp.a|PENDING|0|0|0|2026-11-29T22:39:00|N/A|N/A||low|dispatch;job=a;submission=1;"
        "gate=open|ReqNodeNotAvail, UnavailableNodes:vm|\n"
    )
    assert row.reason == "ReqNodeNotAvail, UnavailableNodes:vm"
    assert row.started is None and row.submitted is not None and row.submitted.tzinfo


def test_hostlists_expand() -> None:
    assert expand_hostlist("vm") == ("vm",)
    assert expand_hostlist("gpu[01-03,7],login") == ("gpu01", "gpu02", "gpu03", "gpu7", "login")
    assert expand_hostlist("") == ()


@pytest.mark.parametrize("job_id", ["simple-1", "with space", "a,b|c;d=e", "ünï", "x%41"])
def test_tags_round_trip_whatever_the_job_id_S30(job_id: str) -> None:
    name = job_name(job_id)
    assert "," not in name and "|" not in name and ";" not in name[4:]
    assert job_id_from_name(name) == job_id
    tag = Tag(job_id=job_id, submission=7, gated=True)
    assert parse_comment(tag.comment()) == tag


def test_comments_dispatch_did_not_write_are_not_tags() -> None:
    assert parse_comment("sup:success") is None
    assert parse_comment("dispatch;job=a;submission=zero") is None
    assert job_id_from_name("t-success") is None


def _spec(**kw) -> JobSpec:
    return JobSpec(command=("python", "train.py", "--lr", "0.1; rm -rf /"), **kw)


def test_sbatch_argv_is_a_list_with_every_resource_and_option_S30() -> None:
    spec = _spec(
        resources=Resources(
            nodes=2,
            tasks_per_node=4,
            cpus_per_task=8,
            gpus_per_node=2,
            memory_mb=4096,
            time_limit=timedelta(minutes=90, seconds=1),
        ),
        options={
            "partition": "gpu",
            "account": "ml",
            "qos": "high",
            "constraint": "a100",
            "requeue": "yes",
            "sbatch_args": "--exclusive --mail-type=NONE",
        },
        workdir="/scratch/run",
    )
    argv = sbatch_argv("job-1", 3, spec, True, "/tmp/s.sh")
    assert argv[:4] == [
        "sbatch",
        "--parsable",
        "--job-name=dsp.job-1",
        "--comment=dispatch;job=job-1;submission=3;gate=held",
    ]
    for expected in (
        "--requeue",
        "--hold",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--cpus-per-task=8",
        "--gpus-per-node=2",
        "--mem=4096M",
        "--time=91",
        "--partition=gpu",
        "--account=ml",
        "--qos=high",
        "--constraint=a100",
        "--chdir=/scratch/run",
        "--exclusive",
        "--mail-type=NONE",
    ):
        assert expected in argv
    assert argv[-7:-5] == ["/tmp/s.sh", "tasks"]
    assert argv[-5].endswith("/job-job-1/submission-3")  # the submission's log directory
    assert argv[-4:] == ["python", "train.py", "--lr", "0.1; rm -rf /"]


def test_sbatch_argv_defaults_to_no_requeue_S9() -> None:
    assert "--no-requeue" in sbatch_argv("j", 1, _spec(), False, "/tmp/s.sh")


def test_a_requeue_rule_the_plan_leaves_to_slurm_becomes_sbatch_requeue_S9() -> None:
    from dispatch import Action

    native = _spec().model_copy(update={"native_actions": frozenset({Action.REQUEUE})})
    assert "--requeue" in sbatch_argv("j", 1, native, False, "/tmp/s.sh")
    opted_out = native.model_copy(update={"options": {"requeue": "no"}})
    assert "--no-requeue" in sbatch_argv("j", 1, opted_out, False, "/tmp/s.sh")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"colour": "red"}, "unknown slurm option"),
        ({"requeue": "maybe"}, "expected yes or no"),
        ({"sbatch_args": "--job-name=x"}, "may not set --job-name"),
        ({"sbatch_args": "-H"}, "may not set -H"),
        ({"sbatch_args": "--comment 'x"}, "sbatch_args"),
    ],
)
def test_bad_options_are_refused_with_what_and_where_S36(options, message) -> None:
    with pytest.raises(BadInput, match=message):
        sbatch_argv("j", 1, _spec(options=options), False, "/tmp/s.sh")


def test_declared_options_are_the_ones_sbatch_argv_accepts() -> None:
    spec = _spec(options={k: "yes" if k == "requeue" else "x" for k in declarations().options})
    assert sbatch_argv("j", 1, spec, False, "/tmp/s.sh")


def test_the_unreachable_words_slurm_prints_are_recognised_S5() -> None:
    ctld = (CAPTURES / "unreachable-slurmctld-down.txt").read_text()
    dbd = (CAPTURES / "unreachable-slurmdbd-down.txt").read_text()
    assert unreachable_words(ctld) and unreachable_words(dbd)
    refused = (CAPTURES / "submit-time-rejections.txt").read_text()
    assert not unreachable_words(refused)  # a refusal is not an outage
