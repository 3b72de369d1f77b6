"""The runner: argument lists only, a timeout on every call, Unreachable at the boundary (S-5)."""

from __future__ import annotations

import re

import pytest
from dispatch import Unreachable
from dispatch_slurm.runner import Runner


def test_a_command_past_its_timeout_is_unreachable_S5() -> None:
    with pytest.raises(Unreachable, match=r"did not answer within 0\.2 s"):
        Runner(timeout=0.2).run(["sleep", "5"])


def test_a_missing_command_is_unreachable_S5() -> None:
    with pytest.raises(Unreachable, match="not installed"):
        Runner().run(["sbatch-does-not-exist-here"])


def test_a_shell_string_is_refused() -> None:
    with pytest.raises(TypeError, match="argument list"):
        Runner().run("squeue -h")  # type: ignore[arg-type]


def test_a_plain_failure_is_a_result_not_an_error_and_every_call_counts() -> None:
    runner = Runner()
    result = runner.run(["sh", "-c", "echo refused >&2; exit 1"])
    assert (result.ok, result.returncode, result.words()) == (False, 1, "refused")
    assert runner.calls == 1 and runner.calls_by_command == {"sh": 1}


@pytest.mark.parametrize(
    "words",
    [
        "sbatch: error: Batch job submission failed: Connection reset by peer",
        "slurm_load_jobs error: Socket timed out on send/recv operation",
        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
    ],
)
def test_a_controller_stopped_or_frozen_mid_call_is_unreachable_not_a_refusal_S5(
    words: str,
) -> None:
    """A submit cut off by slurmctld stopping is no refusal (which would end the job as
    launch-failed, and a resubmit rule would recover it): the supervisor asks again."""
    with pytest.raises(Unreachable, match=re.escape(words)):
        Runner().run(["sh", "-c", f"echo '{words}' >&2; exit 1"])
