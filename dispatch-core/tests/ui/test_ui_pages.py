"""``dispatch ui`` over HTTP: the list (newest first, filters, pages), a job's page (its
timeline, words, rules, budget, commands), read-only (GET only), escaped HTML with a
Content-Security-Policy, loopback or a token, and bounded reads of a 100,000-job record."""

from __future__ import annotations

import html
import re
import sqlite3
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from core_bench import T0
from dispatch import Action, CauseKind, Client, JobSpec, Provenance, RecoveryPolicy, State
from dispatch.core.cause import Cause
from dispatch.model.errors import BadInput
from dispatch.model.events import JobCreated, OutcomeCommitted
from dispatch.store.base import Batch, Feed, RecordStore
from dispatch.store.sqlite import SQLiteStore
from dispatch.ui import views
from dispatch.ui.server import CSP, UI, make_server
from dispatch_testing.simulated.scheduler import exit_with, runs_forever
from ui.ui_record import (
    IMG_NAME,
    LOG_LINE,
    REASON,
    SCRIPT_NAME,
    Record,
    fetch,
    make_record,
    serving,
)


def ids_in(body: str) -> list[str]:
    return re.findall(r'<tr[^>]* data-job="([^"]+)"', body)


def test_the_list_shows_every_job_newest_first_with_its_columns(record: Record) -> None:
    with serving(record.client, clock=record.sched.now) as base:
        status, headers, body = fetch(base + "/")
    assert status == 200 and headers["Content-Security-Policy"] == CSP
    names = ["recovered", "held", "running", SCRIPT_NAME, IMG_NAME]
    assert ids_in(body) == [record.jobs[n] for n in reversed(names)]
    recovered = re.search(rf'<tr data-job="{record.jobs["recovered"]}".*?</tr>', body)
    assert recovered is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", recovered.group(0))
    # job, name, backend, scheduler id, state, cause, attempt n/N, budget left, nodes, age
    shown = ["recovered", "simulated", "sim-7", "succeeded", "none", "3/3", "1", "2"]
    assert cells[1:-1] == shown
    assert re.fullmatch(r"\d+s", cells[-1])


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("state=held", ["held", IMG_NAME]),
        ("state=running", ["running"]),
        ("state=succeeded", ["recovered", SCRIPT_NAME]),
        ("cause=non-zero-exit", ["held", IMG_NAME]),
        ("cause=none", ["recovered", SCRIPT_NAME]),
        ("backend=simulated&state=active", ["held", "running", IMG_NAME]),
        ("backend=slurm", []),
    ],
)
def test_the_list_filters_by_state_cause_and_backend(
    record: Record, query: str, names: list[str]
) -> None:
    with serving(record.client, clock=record.sched.now) as base:
        status, _, body = fetch(f"{base}/?{query}")
    assert status == 200
    assert set(ids_in(body)) == {record.jobs[n] for n in names}


def test_a_filter_the_list_cannot_take_is_a_400_naming_it(record: Record) -> None:
    with serving(record.client) as base:
        for query, words in [("state=bogus", "state must be one of"), ("page=x", "page must")]:
            status, headers, body = fetch(f"{base}/?{query}")
            assert status == 400 and words in body and headers["Content-Security-Policy"] == CSP


def test_pages_of_the_list_follow_each_other_newest_first(
    record: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    with serving(record.client, clock=record.sched.now) as base:
        pages = [ids_in(fetch(f"{base}/?page={n}")[2]) for n in (1, 2, 3)]
        last = fetch(f"{base}/?page=3")[2]
    assert [len(p) for p in pages] == [2, 2, 1]
    newest_first = list(reversed(record.jobs.values()))
    assert [j for p in pages for j in p] == newest_first
    assert "older</a>" not in last and "newer</a>" in last


def test_a_job_page_draws_one_mark_per_execution_coloured_by_its_cause(record: Record) -> None:
    job_id = record.jobs["recovered"]
    with serving(record.client, clock=record.sched.now) as base:
        status, _, body = fetch(f"{base}/jobs/{job_id}")
    assert status == 200
    executions = re.findall(
        r'<g class="execution" data-attempt="(\d)" data-cause="([a-z-]+)"', body
    )
    assert executions == [("1", "preempted"), ("2", "preempted"), ("3", "none")]
    fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', body)
    assert fills == [views.COLOURS["preempted"]] * 2 + [views.COLOURS["none"]]
    rows = re.findall(r'<tr data-attempt="\d">(.*?)</tr>', body)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    # the scheduler's words verbatim (escaped), the rule matched, the action, budget left
    assert cells[0][6] == "<code>Preempted by a higher priority job</code>"
    assert cells[1][6] == "<code>" + html.escape(REASON) + "</code>"
    assert [c[9] for c in cells] == ["rule 1: on [preempted] resubmit budget=3"] * 2 + [""]
    assert [(c[10], c[11]) for c in cells] == [("resubmit", "2"), ("resubmit", "1"), ("", "")]
    assert cells[2][4] == "none" and cells[2][7] == "0"  # exit code of the success
    assert "<code>/scratch/ckpt/recovered</code>" in body and "yes: attempts 2 to 3" in body
    commands = re.search(r'<pre id="commands">(.*?)</pre>', body, re.S)
    assert commands is not None and f"dispatch status {job_id}" in commands.group(1)
    assert f'href="/jobs/{job_id}/logs"' in body


def test_a_held_job_shows_its_hold_and_the_commands_that_release_it(record: Record) -> None:
    job_id = record.jobs["held"]
    with serving(record.client, clock=record.sched.now) as base:
        body = fetch(f"{base}/jobs/{job_id}")[2]
    assert re.findall(r'<g class="mark" data-mark="([a-z]+)"', body) == ["hold"]
    assert '<li data-mark="hold">' in body and "held for a person" in body
    for command in ("resubmit", "give-up", "cancel"):
        assert f"dispatch {command} {job_id}" in body
    row = re.search(r'<tr data-attempt="1">(.*?)</tr>', body)
    assert row is not None and "rule 1: on [non-zero-exit] hold" in row.group(1)


def test_the_log_tail_comes_through_the_logs_hook(record: Record) -> None:
    with serving(record.client) as base:
        status, _, body = fetch(f"{base}/jobs/{record.jobs[SCRIPT_NAME]}/logs")
    assert status == 200 and "<h2>submission 1</h2>" in body
    assert html.escape(LOG_LINE) in body and LOG_LINE not in body


def test_an_unknown_job_is_a_404(record: Record) -> None:
    with serving(record.client) as base:
        status, headers, body = fetch(base + "/jobs/jnothere")
    assert status == 404 and "no job" in body and headers["Content-Security-Policy"] == CSP


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_the_view_is_read_only_every_method_but_get_is_405(record: Record, method: str) -> None:
    before = {s.job_id: s.version for s in record.store.jobs()}
    with serving(record.client) as base:
        for path in ("/", f"/jobs/{record.jobs['held']}", "/metrics"):
            status, headers, _ = fetch(base + path, method=method)
            assert (status, headers["Allow"]) == (405, "GET, HEAD")
    assert {s.job_id: s.version for s in record.store.jobs()} == before


def test_html_in_names_and_scheduler_words_is_text_in_every_page(record: Record) -> None:
    with serving(record.client, clock=record.sched.now) as base:
        pages = [fetch(base + "/")[2], fetch(base + "/summary")[2]]
        pages += [fetch(f"{base}/jobs/{j}")[2] for j in record.jobs.values()]
    text = "".join(pages)
    for raw in (SCRIPT_NAME, IMG_NAME, REASON, "<img", "<b onmouseover", "onerror=alert(1)>"):
        assert raw not in text
    assert html.escape(SCRIPT_NAME) in text and html.escape(IMG_NAME) in text
    # the only script any page loads is the server's own file
    assert set(re.findall(r"<script[^>]*>", text)) == {'<script src="/static/ui.js" defer>'}


def test_binding_beyond_loopback_needs_a_token(record: Record) -> None:
    with pytest.raises(BadInput, match="--token"):
        make_server(UI(record.client), "0.0.0.0", 0)
    with serving(record.client, token="s3cret") as base:
        assert fetch(base + "/")[0] == 401
        assert fetch(base + "/", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert fetch(base + "/", headers={"Authorization": "Bearer s3cret"})[0] == 200
        status, headers, _ = fetch(base + "/?token=s3cret")
        assert status == 200 and "HttpOnly" in headers["Set-Cookie"]
        assert fetch(base + "/", headers={"Cookie": "dispatch_token=s3cret"})[0] == 200


class Counting:
    """The store, counting the calls that read it and the jobs read_feed was asked for."""

    READS = ("read", "read_many", "read_since", "read_feed", "jobs", "active_jobs", "beats")

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.calls: list[str] = []
        self.asked: set[str] = set()

    def read_feed(
        self, position: int = 0, limit: int | None = None, *, job_ids: Iterable[str] | None = None
    ) -> Feed:
        self.calls.append("read_feed")
        if job_ids is None:
            raise AssertionError("a page read the whole feed")
        wanted = list(job_ids)
        self.asked.update(wanted)
        return self.store.read_feed(position, limit, job_ids=wanted)

    def __getattr__(self, name: str) -> Any:
        if name in self.READS:
            self.calls.append(name)
        return getattr(self.store, name)


def big_record(path: Path, jobs: int) -> SQLiteStore:
    from dispatch.core.policy import Plan

    store = SQLiteStore(path)
    plan = Plan.bind(RecoveryPolicy(), Record(store).registry.get("simulated").declarations)
    spec = JobSpec(name="train", command=("python", "train.py"))
    done = Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, detail="exit 0")
    for start in range(0, jobs, 5000):
        batches = []
        for n in range(start, min(start + 5000, jobs)):
            job_id = f"j{n:012d}"
            at = T0 + timedelta(seconds=n)
            batches.append(
                Batch(
                    job_id,
                    0,
                    [
                        JobCreated(
                            job_id=job_id,
                            seq=1,
                            at=at,
                            name=f"train-{n}",
                            backend="local",
                            spec=spec,
                            plan=plan,
                        ),
                        OutcomeCommitted(
                            job_id=job_id, seq=2, at=at, state=State.SUCCEEDED, cause=done
                        ),
                    ],
                )
            )
        store.append_many(batches)
    return store


def test_a_page_of_a_100000_job_record_reads_a_bounded_number_of_times(tmp_path: Path) -> None:
    store = big_record(tmp_path / "big.db", 100_000)
    counting = Counting(store)
    client = Client(counting, registry=Record(store).registry)  # type: ignore[arg-type]
    ui = UI(client, clock=lambda: T0 + timedelta(days=2))
    for path, most, jobs in [("/", 4, 50), ("/?page=3", 4, 150), ("/jobs/j000000099999", 4, 1)]:
        counting.calls.clear()
        counting.asked.clear()
        status, _, body = ui.answer(path)
        assert status == 200, body[:500]
        assert len(counting.calls) <= most, counting.calls
        assert len(counting.asked) <= jobs
    status, _, body = ui.answer("/?page=3")
    assert ids_in(body.decode())[0] == f"j{100_000 - 101:012d}"
    store.close()


def test_a_row_that_does_not_decode_is_named_and_the_other_jobs_still_show(
    record: Record, tmp_path: Path
) -> None:
    bad = record.jobs["held"]
    with sqlite3.connect(tmp_path / "record.db") as db:  # a row this build cannot read
        db.execute(
            'UPDATE dispatch_events SET body = \'{"type": "from-the-future"}\' '
            "WHERE job_id = ? AND seq = 2",
            (bad,),
        )
    with serving(record.client, clock=record.sched.now) as base:
        listed = fetch(base + "/")[2]
        page = fetch(f"{base}/jobs/{bad}")
        summary = fetch(base + "/summary")[2]
        metrics = fetch(base + "/metrics")[2]
    row = re.search(rf'<tr class="quarantined" data-job="{bad}">(.*?)</tr>', listed)
    assert row is not None and 'class="error"' in row.group(1)
    assert len(ids_in(listed)) == 5  # the four others as usual, and this one named
    assert page[0] == 200 and '<p class="error">' in page[2] and bad in page[2]
    assert bad in summary and "Jobs the record cannot read" in summary
    assert "dispatch_jobs_quarantined 1.0" in metrics


def test_the_pages_read_a_sqlite_or_a_postgresql_record_alike(store: RecordStore) -> None:
    r = make_record(store)
    with serving(r.client, clock=r.sched.now) as base:
        listed = fetch(base + "/")[2]
        page = fetch(f"{base}/jobs/{r.jobs['recovered']}")[2]
        summary = fetch(base + "/summary")
        metrics = fetch(base + "/metrics")[2]
    assert ids_in(listed) == list(reversed(r.jobs.values()))
    assert re.findall(r'<g class="execution" data-attempt="\d" data-cause="([a-z-]+)"', page) == [
        "preempted",
        "preempted",
        "none",
    ]
    assert summary[0] == 200 and '<p id="lost">0h 0m 24s</p>' in summary[2]
    assert 'dispatch_preemptions_total{backend="simulated"} 2.0' in metrics


def test_without_a_token_only_a_loopback_host_name_is_answered(record: Record) -> None:
    with serving(record.client) as base:
        port = base.rsplit(":", 1)[1]
        for host, status in [
            (f"127.0.0.1:{port}", 200),
            (f"localhost:{port}", 200),
            (f"[::1]:{port}", 200),
            (f"rebound.example:{port}", 403),  # a name pointed at 127.0.0.1 by another site
            ("", 403),
        ]:
            assert fetch(base + "/", headers={"Host": host})[0] == status, host


def test_a_token_that_is_not_ascii_is_refused_not_an_error(record: Record) -> None:
    with serving(record.client, token="s3cret") as base:
        assert fetch(base + "/?token=%C3%A9t%C3%A9")[0] == 401
        assert fetch(base + "/", headers={"Cookie": "dispatch_token=\u00e9"})[0] == 401


def test_a_lost_node_is_kept_off_and_an_escalation_is_marked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "own.db")
    r = Record(store)
    lost = r.job("lost", ([CauseKind.NODE_LOST], Action.RESUBMIT, 2))
    escalated = r.job("escalated", ([CauseKind.NON_ZERO_EXIT], Action.ESCALATE, None))
    r.sched.plan(lost, 1, runs_forever())
    r.sched.plan(lost, 2, runs_forever())
    r.sched.plan(escalated, 1, exit_with(4, after=1))
    r.settle()
    node = r.sched.lose_node(r.live_object(lost))
    r.settle()
    with serving(r.client, clock=r.sched.now) as base:
        lost_page = fetch(f"{base}/jobs/{lost}")[2]
        escalated_page = fetch(f"{base}/jobs/{escalated}")[2]
    rows = re.findall(r'<tr data-attempt="\d">(.*?)</tr>', lost_page)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert cells[0][4] == "node-lost" and node in cells[0][8]  # the ending names the node
    assert cells[1][12] == node  # the next submission was asked to keep off it
    assert f"<tr><th>excluded nodes</th><td>{node}</td></tr>" in lost_page
    marks = re.findall(r'<g class="mark" data-mark="([a-z]+)"', escalated_page)
    assert marks == ["escalation", "outcome"]
    assert '<li data-mark="escalation">' in escalated_page
    store.close()
