"""The Slurm version: read, cached for a short while, and the rules each release gets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.classify import TABLE, Answer, Versions, classify
from dispatch_slurm.parse import ExitStatus, ParseError, parse_squeue
from dispatch_slurm.runner import FORMAT_VARIABLES, Result, Runner
from dispatch_slurm.version import (
    TESTED,
    VersionCache,
    parse_version,
    release,
    rules_for,
    untested_warning,
)


@pytest.mark.parametrize(
    "printed,expected",
    [
        ("slurm-wlm 22.05.8\n", "22.05.8"),
        ("slurm 24.11.7\n", "24.11.7"),
        ("slurm 25.11.7", "25.11.7"),
        ("slurm 26.05.3", "26.05.3"),
        ("slurm 23.11.10", "23.11.10"),
    ],
)
def test_sinfo_version_as_each_release_prints_it(printed: str, expected: str) -> None:
    assert str(parse_version(printed)) == expected


@pytest.mark.parametrize("printed", ["", "sinfo: error: x", "slurm x.y", "23.11.1"])
def test_anything_else_is_not_a_version(printed: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm version"):
        parse_version(printed)


def test_a_tested_release_gets_its_own_rules_and_no_warning() -> None:
    for version in ("22.05.8", "24.11.7", "25.11.7", "26.05.3", "24.11.1"):
        parsed = parse_version(f"slurm {version}")
        assert rules_for(parsed) == parsed.release
        assert untested_warning(parsed) is None


@pytest.mark.parametrize(
    "version,rules",
    [
        ("23.02.7", "22.05"),  # one release after 22.05, three before 24.11
        ("23.11.4", "22.05"),  # a tie between 22.05 and 24.11: the older
        ("24.05.4", "24.11"),
        ("25.05.2", "24.11"),  # a tie between 24.11 and 25.11: the older
        ("26.11.1", "26.05"),
        ("21.08.8", "22.05"),
        ("30.11.1", "26.05"),  # far beyond the list: by date, the newest
    ],
)
def test_an_untested_release_gets_the_nearest_tested_rules_and_a_warning(
    version: str, rules: str
) -> None:
    parsed = parse_version(f"slurm {version}")
    assert rules_for(parsed) == release(rules)
    warning = untested_warning(parsed)
    assert warning is not None
    assert f"Slurm {version} is not a tested version" in warning
    assert f"rules of {rules}" in warning


def test_the_version_is_read_once_per_lifetime() -> None:
    now = [0.0]
    reads: list[int] = []

    def read():
        reads.append(1)
        return parse_version(f"slurm 24.11.{len(reads)}")

    cache = VersionCache(read, lifetime=60, clock=lambda: now[0])
    assert str(cache.get()) == "24.11.1"
    now[0] = 59.9
    assert str(cache.get()) == "24.11.1" and len(reads) == 1
    now[0] = 60.0
    assert str(cache.get()) == "24.11.2" and len(reads) == 2


class _Fake(Runner):
    def __init__(self, answers: Mapping[str, Result]) -> None:
        super().__init__()
        self.answers = answers

    def run(self, argv: Sequence[str], **_: object) -> Result:
        self.calls += 1
        return self.answers[" ".join(argv[:2])]


def test_dispatch_backends_warns_of_an_untested_version_and_never_refuses_it() -> None:
    fake = _Fake({"sinfo --version": Result(("sinfo",), 0, "slurm 23.11.4\n", "")})
    declared = SlurmBackend(fake).dispatch_declare()
    assert "WARNING: Slurm 23.11.4 is not a tested version" in declared.description
    assert "rules of 22.05" in declared.description


def test_dispatch_backends_names_a_tested_version_without_a_warning() -> None:
    fake = _Fake({"sinfo --version": Result(("sinfo",), 0, "slurm 26.05.3\n", "")})
    declared = SlurmBackend(fake).dispatch_declare()
    assert "Slurm 26.05.3 here" in declared.description and "WARNING" not in declared.description


def test_declaring_works_where_slurm_cannot_be_asked() -> None:
    fake = _Fake({"sinfo --version": Result(("sinfo",), 1, "", "sinfo: not found")})
    declared = SlurmBackend(fake).dispatch_declare()
    assert declared.name == "slurm" and "WARNING" not in declared.description


def test_every_call_runs_without_the_variables_that_change_formats(monkeypatch) -> None:
    for variable in FORMAT_VARIABLES:
        monkeypatch.setenv(variable, "%i")
    monkeypatch.setenv("DISPATCH_KEEP_ME", "1")
    shown = Runner().run(["sh", "-c", "env"])
    names = {line.split("=", 1)[0] for line in shown.stdout.splitlines()}
    assert names.isdisjoint(FORMAT_VARIABLES) and "DISPATCH_KEEP_ME" in names
    replaced = Runner().run(["sh", "-c", "env"], env={"SQUEUE_SORT": "x"}, inherit_env=False)
    assert "SQUEUE_SORT" not in replaced.stdout


_LINE = (
    "7|dsp.j|{state}|{exit}|{derived}|0|2026-12-01T10:00:00|2026-12-01T10:00:01|"
    "2026-12-01T10:00:02|node1|low|dispatch;job=j;submission=1;gate=open|NonZeroExitCode|"
)


def test_squeue_exit_codes_are_read_in_the_form_of_the_version() -> None:
    old = _LINE.format(state="FAILED", exit="35072", derived="0")
    new = _LINE.format(state="FAILED", exit="137:0", derived="0:0")
    assert parse_squeue(old, release("22.05"))[0].exit == ExitStatus(137, 0)
    assert parse_squeue(new, release("24.11"))[0].exit == ExitStatus(137, 0)
    # the other release's form is refused, never guessed
    with pytest.raises(ParseError, match="bad exit"):
        parse_squeue(new, release("22.05"))
    with pytest.raises(ParseError, match="bad exit"):
        parse_squeue(old, release("26.05"))


def test_a_state_is_its_first_word_and_an_unknown_one_is_unknown_with_slurm_s_words() -> None:
    (row,) = parse_squeue(
        _LINE.format(state="RESV_DEL_HOLD x", exit="0:0", derived="0:0"), release("26.05")
    )
    assert row.state == "RESV_DEL_HOLD"
    cause = classify(Answer(source="squeue", state=row.state, reason=row.reason)).cause
    assert cause is not None and cause.kind.value == "unknown"
    assert "State=RESV_DEL_HOLD" in cause.detail


def test_version_ranges_of_the_table() -> None:
    assert Versions(since=release("25.11")).holds(parse_version("slurm 26.05.3"))
    assert not Versions(since=release("25.11")).holds(parse_version("slurm 24.11.7"))
    assert Versions(before=release("24.11")).holds(parse_version("slurm-wlm 22.05.8"))
    assert not Versions(before=release("24.11")).holds(parse_version("slurm 24.11.0"))
    # every answer falls in exactly one of the rows a versioned meaning is split into
    versioned = [r for r in TABLE if r.versions != Versions()]
    assert versioned
    for tested in TESTED:
        for states in {r.states for r in versioned}:
            holding = [r for r in versioned if r.states == states and r.versions.holds(tested)]
            assert len({(r.reasons, r.when) for r in holding}) == len(holding)


def test_an_untested_release_is_parsed_in_its_own_form_and_classified_by_the_nearest() -> None:
    """23.11 prints squeue exit codes as exit:signal (since 23.02) and gets 22.05's
    classification rules (sacct still subtracts 128 until 25.11)."""
    from datetime import UTC, datetime

    from dispatch_slurm.observe import build_objects

    line = _LINE.format(state="FAILED", exit="3:0", derived="0:0").replace("|j|", "|dsp.j|")
    (obj,) = build_objects(
        line, "", None, {"j"}, datetime.now(UTC), version=parse_version("slurm 23.11.4")
    )
    assert obj.cause is not None and obj.cause.exit_code == 3
    assert obj.cause.kind.value == "non-zero-exit"
