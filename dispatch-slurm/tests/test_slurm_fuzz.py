"""Every Slurm parser on mutated real answers: a value or the documented error, never an
undocumented exception, a hang or a memory blow-up (S-4, S-36).

The seeds are what a real Slurm 22.05 printed (``data/recorded/``, ``data/multinode/``);
hypothesis mutates one field, splices arbitrary text into a line, or cuts it. Time per
input is bounded by hypothesis's ``deadline``, memory by a tracemalloc peak.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import BadInput, Cause, CauseKind, LogSelection, Provenance
from dispatch_slurm.attribute import attribute, attribution_queries, parse_attribution
from dispatch_slurm.logs import read_logs
from dispatch_slurm.observe import build_objects
from dispatch_slurm.parse import (
    MAX_HOSTS,
    ParseError,
    expand_hostlist,
    parse_events,
    parse_exit_pair,
    parse_sacct,
    parse_sinfo_nodes,
    parse_squeue,
    parse_steps,
    parse_time,
    parse_wait_status,
)
from dispatch_slurm.tags import job_id_from_name, parse_comment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parent / "data"
AT = datetime(2026, 12, 1, tzinfo=UTC)
#: per input: at most this much memory allocated at once
MAX_BYTES = 32 * 1024 * 1024
FUZZ = settings(
    max_examples=300, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow]
)


def _lines(*names: str) -> list[str]:
    lines = []
    for name in names:
        for path in sorted(DATA.glob(name)):
            lines += [line for line in path.read_text().splitlines() if line.strip()]
    assert lines, f"no seed captures match {names}"
    return lines


SQUEUE = _lines("recorded/*.squeue", "multinode/*.squeue")
SACCT = _lines("recorded/*.sacct", "multinode/*.sacct")
SINFO = _lines("recorded/*.sinfo", "multinode/*.sinfo")
STEPS = _lines("multinode/*.steps")
EVENTS = _lines("multinode/*.sacctmgr")

#: text that broke parsers before: non-ASCII digits, negative counts, huge ranges
NASTY = st.sampled_from(
    [
        "²",
        "-1",
        "n[x-1]",
        "n[1-100000000]",
        "9" * 5000,
        "",
        "|",
        "[",
        "]",
        "by",
        "None assigned",
        "(null)",
        "\x00",
        "１",
        "٣:0",
        "0:²",
        "2026-13-45T99:99:99",
        "9999-12-31T23:59:59",
        "1" * 40,
        "%ZZ",
    ]
)
TEXT = st.one_of(NASTY, st.text(max_size=40))


def _mutate(line: str, data: st.DataObject) -> str:
    fields = line.split("|")
    how = data.draw(st.sampled_from(["field", "splice", "cut", "join"]))
    if how == "field":
        i = data.draw(st.integers(0, len(fields) - 1))
        fields[i] = data.draw(TEXT)
        return "|".join(fields)
    if how == "splice":
        i = data.draw(st.integers(0, len(line)))
        return line[:i] + data.draw(TEXT) + line[i:]
    if how == "cut":
        return line[: data.draw(st.integers(0, len(line)))]
    return line + "|" + data.draw(TEXT)


def _bounded(call: Callable[[], object]) -> object:
    """Run one parse; only the documented error may escape; memory stays bounded."""
    tracemalloc.start()
    try:
        return call()
    except BadInput:
        return None  # ParseError and friends: the documented error, with what and where
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < MAX_BYTES, f"{peak} bytes for one input"


@pytest.mark.parametrize("text", ["²:0", "0:²", "١:0", "1:0:0", "-1:0", "99999999999:0"])
def test_exit_pairs_that_are_not_ascii_numbers_are_the_documented_error_S36(text: str) -> None:
    with pytest.raises(ParseError, match="bad exit code"):
        parse_exit_pair(text)


def test_hostlists_from_issue_15_are_the_documented_error_and_bounded_S36() -> None:
    with pytest.raises(ParseError, match="bad range 'x-1'"):
        expand_hostlist("n[x-1]")
    tracemalloc.start()
    try:
        with pytest.raises(ParseError, match=f"more than {MAX_HOSTS} hosts"):
            expand_hostlist.__wrapped__("n[1-100000000]")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_BYTES
    assert expand_hostlist("node[1-2,4]") == ("node1", "node2", "node4")


def test_a_job_id_of_unicode_digits_or_a_negative_restart_count_is_unknown_verbatim_S4() -> None:
    row = SQUEUE[0].split("|")
    restarts = "|".join([*row[:5], "-1", *row[6:]])
    objects = build_objects(restarts, "", None, {job_id_from_name(row[1])}, AT)
    assert [o.cause.kind for o in objects] == [CauseKind.UNKNOWN]
    assert "-1" in objects[0].cause.detail
    sacct = SACCT[0].split("|")
    weird = "|".join(["²", *sacct[1:]])
    objects = build_objects("", weird, None, {job_id_from_name(sacct[1])}, AT)
    assert all(o.object_id == "²" for o in objects)  # kept verbatim, no ValueError


@FUZZ
@given(st.data())
def test_squeue_lines_parse_or_raise_the_documented_error_S36(data) -> None:
    line = _mutate(data.draw(st.sampled_from(SQUEUE)), data)
    _bounded(lambda: parse_squeue(line))
    name = line.split("|")[1] if "|" in line else ""
    _bounded(lambda: build_objects(line, "", None, {job_id_from_name(name) or "x"}, AT))


@FUZZ
@given(st.data())
def test_sacct_lines_parse_or_raise_the_documented_error_S36(data) -> None:
    line = _mutate(data.draw(st.sampled_from(SACCT)), data)
    _bounded(lambda: parse_sacct(line))
    name = line.split("|")[1] if "|" in line else ""
    wanted = {job_id_from_name(name) or "x"}
    _bounded(lambda: build_objects("", line, None, wanted, AT))
    _bounded(lambda: attribution_queries("", line, wanted))


@FUZZ
@given(st.data())
def test_step_and_event_answers_never_break_attribution_S42(data) -> None:
    steps = "\n".join(_mutate(line, data) if data.draw(st.booleans()) else line for line in STEPS)
    events = "\n".join(_mutate(line, data) if data.draw(st.booleans()) else line for line in EVENTS)
    _bounded(lambda: parse_steps(steps))
    _bounded(lambda: parse_events(events))
    found = parse_attribution(steps, events)  # per line: never raises
    for object_id, incarnation in found.steps:
        cause = Cause(
            kind=data.draw(st.sampled_from(list(CauseKind))), provenance=Provenance.SCHEDULER
        )
        attribute(cause, object_id, incarnation, ("node1", "node2"), None, None, found)


@FUZZ
@given(st.data())
def test_sinfo_times_counts_and_tags_parse_or_raise_the_documented_error_S36(data) -> None:
    line = _mutate(data.draw(st.sampled_from(SINFO)), data)
    _bounded(lambda: parse_sinfo_nodes(line))
    text = data.draw(TEXT)
    _bounded(lambda: parse_time(text))
    _bounded(lambda: parse_exit_pair(text))
    _bounded(lambda: parse_wait_status(text))
    _bounded(lambda: expand_hostlist.__wrapped__(text))
    _bounded(lambda: parse_comment.__wrapped__(f"dispatch;job={text};submission={text}"))
    _bounded(lambda: job_id_from_name.__wrapped__(f"dsp.{text}"))


@FUZZ
@given(
    layout=st.text(max_size=200),
    rank=st.one_of(st.none(), st.integers(-3, 10**12)),
    node=st.one_of(st.none(), st.text(max_size=10)),
)
def test_a_damaged_log_layout_is_read_or_refused_clearly_S46(
    tmp_path_factory, layout, rank, node
) -> None:
    directory = tmp_path_factory.mktemp("logs")
    (directory / "layout").write_text(layout)
    _bounded(lambda: b"".join(read_logs(directory, LogSelection(node=node, rank=rank))))
