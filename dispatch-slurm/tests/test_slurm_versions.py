"""The parsers and the classification on what every tested Slurm release printed.

``data/<version>/`` holds, per release, one discovery recorded with
``scripts/record-discovery.py`` on that release's live cluster after its live tests ran
(``tick.version`` is what ``sinfo --version`` said; ``tick.squeue``, ``tick.sacct``,
``tick.steps``, ``tick.sacctmgr`` the exact stdout of the discovery's commands), and
``expected.tsv``: per job, what the live tests proved of it on that cluster (phase,
cause kind, exit code). A change to a parser is checked here against every release
without a cluster (S-2, S-3, S-36).
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import CauseKind
from dispatch_slurm.classify import TABLE, Answer, classify
from dispatch_slurm.observe import build_objects
from dispatch_slurm.parse import parse_sacct, parse_squeue
from dispatch_slurm.version import TESTED, parse_version, rules_for

DATA = Path(__file__).parent / "data"
VERSIONS = sorted(p.name for p in DATA.iterdir() if (p / "tick.version").is_file())
_RUN = re.compile(r"-[0-9a-f]{6,8}(?=-|$)")
#: long after every recorded ending: every execution is settled
AT = datetime(2030, 1, 1, tzinfo=UTC)


def _read(version: str, what: str) -> str:
    path = DATA / version / f"tick.{what}"
    return path.read_text() if path.is_file() else ""


def _expected(version: str) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(job, submission) -> (phase, cause kind, exit code)."""
    with (DATA / version / "expected.tsv").open() as handle:
        return {
            (r["job"], int(r["submission"])): (r["phase"], r["cause"], r["exit_code"])
            for r in csv.DictReader(handle, delimiter="\t")
        }


def test_every_tested_release_has_captures() -> None:
    recorded = {parse_version(_read(v, "version")).release for v in VERSIONS}
    assert recorded == set(TESTED), f"releases without captures: {set(TESTED) - recorded}"


@pytest.mark.parametrize("version", VERSIONS)
def test_each_release_s_answers_parse_in_its_own_form_S36(version: str) -> None:
    slurm = parse_version(_read(version, "version"))
    assert str(slurm) == version
    rows = parse_squeue(_read(version, "squeue"), slurm)
    assert rows and all(r.state and r.job_id.isdigit() for r in rows)
    assert parse_sacct(_read(version, "sacct"))


@pytest.mark.parametrize("version", VERSIONS)
def test_each_release_s_recorded_endings_classify_as_its_live_tests_proved_S2_S3(
    version: str,
) -> None:
    slurm = parse_version(_read(version, "version"))
    expected = _expected(version)
    objects = build_objects(
        _read(version, "squeue"),
        _read(version, "sacct"),
        None,
        {job for job, _ in expected},
        AT,
        steps_text=_read(version, "steps"),
        events_text=_read(version, "sacctmgr"),
        version=slurm,
    )
    seen = {
        (o.job_id, o.submission): (
            o.phase.value,
            o.cause.kind.value if o.cause else "-",
            str(o.cause.exit_code) if o.cause and o.cause.exit_code is not None else "-",
        )
        for o in objects
    }
    assert seen == expected


def test_a_scenario_ends_the_same_way_on_every_release() -> None:
    """The live tests name their jobs by scenario and run (``live-<run>-<scenario>``,
    the run a hex word): the same scenario is the same cause kind on every release that
    recorded it."""
    by_scenario: dict[str, dict[str, str]] = {}
    for version in VERSIONS:
        for (job, submission), (_, cause, _) in _expected(version).items():
            scenario = f"{_RUN.sub('', job)}#{submission}"
            by_scenario.setdefault(scenario, {})[version] = cause
    differing = {s: v for s, v in by_scenario.items() if len(set(v.values())) > 1}
    assert differing == {}


def versioned_row_hits() -> set[int]:
    """The table rows the recorded answers of every release reach (each row that holds
    for some releases only is proven on one of those)."""
    hits: set[int] = set()
    for version in VERSIONS:
        slurm = parse_version(_read(version, "version"))
        rules = rules_for(slurm)
        for row in parse_squeue(_read(version, "squeue"), slurm):
            answer = Answer(
                source="squeue",
                state=row.state,
                reason=row.reason,
                exit=row.exit,
                derived=row.derived,
                restarts=row.restarts,
                version=rules,
            )
            hits.add(classify(answer).row or -1)
        for srow in parse_sacct(_read(version, "sacct")):
            answer = Answer(
                source="sacct",
                state=srow.state,
                exit=srow.exit,
                derived=srow.derived,
                cancelled_by=srow.cancelled_by,
                version=rules,
            )
            hits.add(classify(answer).row or -1)
    return hits


def test_every_versioned_row_is_reached_by_an_answer_of_a_release_it_holds_for() -> None:
    from dispatch_slurm.classify import Versions

    versioned = [i for i, r in enumerate(TABLE) if r.versions != Versions()]
    missing = [i for i in versioned if i not in versioned_row_hits()]
    assert missing == [], [TABLE[i].why for i in missing]


def test_node_fail_s_exit_1_is_never_the_script_s_exit_code() -> None:
    for version in VERSIONS:
        rules = rules_for(parse_version(_read(version, "version")))
        answer = Answer(source="sacct", state="NODE_FAIL", version=rules)
        cause = classify(answer).cause
        assert cause is not None and cause.kind is CauseKind.NODE_LOST
        assert cause.exit_code is None
