"""The model of a job's endings: ``--warn SIG@DURATION``, ``--checkpoint-dir``,
``--progress-window`` on the spec, through the CLI and the Python API (S-44, S-45, S-47)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from dispatch.core.progress import stall, words
from dispatch.core.warning import EndWarning
from dispatch.model.errors import BadInput
from dispatch.model.spec import JobSpec
from dispatch.warning_text import endings, parse_warning


@pytest.mark.parametrize(
    ("text", "signal", "seconds"),
    [("USR1@90", "USR1", 90), ("SIGUSR2@2m", "USR2", 120), ("term@0:01:30", "TERM", 90)],
)
def test_a_warning_is_a_catchable_signal_and_a_time_before_the_end_S45(
    text: str, signal: str, seconds: int
) -> None:
    warning = parse_warning(text)
    assert warning == EndWarning(signal=signal, before=timedelta(seconds=seconds))
    assert warning.describe() == f"SIG{signal} {seconds}s before the end"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("USR1", "give SIGNAL@DURATION"),
        ("@90", "give SIGNAL@DURATION"),
        ("KILL@90", "'KILL' is not a signal a job can be warned with"),
        ("STOP@1m", "'STOP' is not a signal"),
        ("USR1@0", "more than 0"),
        ("USR1@soon", "give seconds"),
        ("USR1@19h", "at most 65535 s"),
    ],
)
def test_a_bad_warning_is_refused_naming_the_option_and_value_S36(text: str, says: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_warning(text)
    assert says in str(caught.value) and f"--warn {text!r}" in str(caught.value)


def test_the_spec_keeps_the_warning_checkpoint_dir_and_window_through_the_record_S44(
    tmp_path: Path,
) -> None:
    fields = endings(warn="USR1@90s", checkpoint_dir=tmp_path / "ck", progress_window="20m")
    spec = JobSpec(command=("train",), **fields)  # type: ignore[arg-type]
    again = JobSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert again.warn == EndWarning(signal="USR1", before=timedelta(seconds=90))
    assert again.checkpoint_dir == str(tmp_path / "ck")
    assert again.progress_window == timedelta(minutes=20)
    assert again.heartbeat == str(tmp_path / "ck" / ".dispatch-heartbeat")


def test_a_spec_without_them_reads_as_before_and_an_old_record_still_decodes() -> None:
    old = '{"name": "job", "command": ["true"]}'
    spec = JobSpec.model_validate_json(old)
    assert (spec.warn, spec.checkpoint_dir, spec.progress_window, spec.heartbeat) == (None,) * 4


def test_a_window_without_checkpoint_dir_gets_a_heartbeat_of_its_own(tmp_path: Path) -> None:
    one = endings(progress_window="5m")["heartbeat"]
    two = endings(progress_window="5m")["heartbeat"]
    assert one != two and str(one).endswith(".heartbeat")


def test_a_checkpoint_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="exists and is not a directory"):
        endings(checkpoint_dir=tmp_path / "f")


def test_the_cli_records_the_options_on_the_spec_S44_S45_S47(tmp_path: Path) -> None:
    sh = Shell(tmp_path)
    out = sh.run(
        "submit",
        "--dry-run",
        "--json",
        "--warn",
        "USR1@90s",
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--progress-window",
        "20m",
        "--",
        "python",
        "train.py",
    )
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)["spec"]
    assert spec["warn"] == {"signal": "USR1", "before": "PT1M30S"}
    assert spec["checkpoint_dir"] == str(tmp_path / "ck")
    assert spec["progress_window"] == "PT20M"
    assert sh.recorded() == []


def test_the_cli_refuses_a_bad_warning_and_records_nothing_S36(tmp_path: Path) -> None:
    sh = Shell(tmp_path)
    out = sh.run("submit", "--warn", "KILL@90", "--", "true")
    assert out.returncode == 2
    assert "--warn 'KILL@90'" in out.stderr and "not a signal" in out.stderr
    assert sh.recorded() == []


def test_stall_is_due_once_per_silence_with_the_last_progress_time_S47() -> None:
    start = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    window = timedelta(minutes=20)
    beat = start + timedelta(minutes=5)
    assert (
        stall(
            "j1", window=window, started=start, last_progress=beat, now=beat + timedelta(minutes=19)
        )
        is None
    )
    due = stall(
        "j1", window=window, started=start, last_progress=beat, now=beat + timedelta(minutes=20)
    )
    assert due is not None and due.since == beat and due.progressed
    assert "no progress for 20 min" in due.message() and "last progress 2026-12-01 08:05:00" in (
        due.message()
    )
    assert (
        stall(
            "j1",
            window=window,
            started=start,
            last_progress=beat,
            now=beat + timedelta(hours=1),
            raised_for=due.since,
        )
        is None
    )
    later = beat + timedelta(minutes=30)
    again = stall(
        "j1",
        window=window,
        started=start,
        last_progress=later,
        now=later + timedelta(minutes=21),
        raised_for=due.since,
    )
    assert again is not None and again.since == later


def test_a_heartbeat_older_than_the_execution_counts_as_none_S47() -> None:
    start = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    due = stall(
        "j1",
        window=timedelta(minutes=1),
        started=start,
        last_progress=start - timedelta(hours=2),
        now=start + timedelta(minutes=2),
    )
    assert due is not None and due.since == start and not due.progressed
    assert "no heartbeat since it started at 2026-12-01 08:00:00" in due.message()
    assert words(timedelta(seconds=3900)) == "1 h 5 min" and words(timedelta(hours=2)) == "2 h"


def test_a_warning_as_long_as_the_time_limit_is_refused_S36(tmp_path: Path) -> None:
    sh = Shell(tmp_path)
    out = sh.run("submit", "--time", "60", "--warn", "USR1@90", "--", "true")
    assert out.returncode == 2, out.stderr
    assert "warn USR1@90s: the warning must come less than the time limit (0:01:00)" in out.stderr
    assert sh.recorded() == []
    ok = sh.run("submit", "--dry-run", "--time", "2m", "--warn", "USR1@90", "--", "true")
    assert ok.returncode == 0, ok.stderr
