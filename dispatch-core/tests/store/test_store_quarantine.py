"""One undecodable row quarantines its job only (S-48), on both stores.

Bad rows are planted with the driver (raw SQL), as a newer build or a damaged disk would
leave them; the store must go on serving every other job, name the bad one with job, seq
and field, and change nothing.
"""

from __future__ import annotations

import json

import pytest
from dispatch.model.errors import DecodeError
from dispatch.store import Feed, Quarantined, UndecodableRow

AT = "2026-03-01T12:00:02+00:00"


def snapshot(harness):
    return (
        harness.raw("SELECT job_id, seq, type, body FROM dispatch_events ORDER BY job_id, seq"),
        harness.raw("SELECT job_id, version, outcome FROM dispatch_jobs ORDER BY job_id"),
    )


def plant(harness, job_id, seq, body, kind="hold-placed"):
    harness.raw(
        "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
        (job_id, seq, kind, AT, body),
    )
    harness.raw("UPDATE dispatch_jobs SET version = ? WHERE job_id = ?", (seq, job_id))


def bad_bodies(ev):
    def mutated(change):
        body = json.loads(ev.hold("job-a", 2).model_dump_json())
        change(body)
        return json.dumps(body)

    outcome = json.loads(ev.outcome("job-a", 2).model_dump_json())
    outcome["state"] = "exploded"
    return {
        "bad-json": ('{"type": "hold-pl', "body"),
        "unknown-type": (mutated(lambda b: b.update(type="hold-teleported")), "type"),
        "unknown-kind": (mutated(lambda b: b["cause"].update(kind="sunspots")), "kind"),
        "unknown-state": (json.dumps(outcome), "state"),
        "extra-field": (mutated(lambda b: b.update(priority=7)), "priority"),
        "seq-mismatch": (mutated(lambda b: b.update(seq=9)), "seq"),
        "other-job": (mutated(lambda b: b.update(job_id="job-z")), "job_id"),
        "not-an-object": ("[1, 2, 3]", ""),
    }


CASES = [
    "bad-json",
    "unknown-type",
    "unknown-kind",
    "unknown-state",
    "extra-field",
    "seq-mismatch",
    "other-job",
    "not-an-object",
]


@pytest.mark.parametrize("case", CASES)
def test_feed_quarantines_the_bad_job_and_serves_the_others_S48(harness, store, ev, case):
    body, field = bad_bodies(ev)[case]
    store.append("job-a", 0, ev.record("job-a", 1))
    store.append("job-b", 0, ev.record("job-b", 2))
    plant(harness, "job-a", 2, body)
    store.append("job-c", 0, ev.record("job-c", 1))
    before = snapshot(harness)

    feed = store.read_feed(0)

    assert isinstance(feed, Feed)
    assert [(e.job_id, e.seq) for e in feed.events] == [("job-b", 1), ("job-b", 2), ("job-c", 1)]
    assert [(q.job_id, q.seq) for q in feed.quarantined] == [("job-a", 2)]
    (bad,) = feed.quarantined
    assert isinstance(bad, Quarantined)
    assert field in bad.field
    assert "'job-a'" in bad.message and "seq 2" in bad.message
    assert store.read_feed(feed.position) == Feed(events=[], position=feed.position, quarantined=[])
    assert snapshot(harness) == before


@pytest.mark.parametrize("case", CASES)
def test_per_job_read_of_the_bad_job_names_job_seq_and_field_S48(harness, store, ev, case):
    body, field = bad_bodies(ev)[case]
    store.append("job-a", 0, ev.record("job-a", 1))
    store.append("job-b", 0, ev.record("job-b", 2))
    plant(harness, "job-a", 2, body)
    with pytest.raises(UndecodableRow) as refused:
        store.read("job-a")
    error = refused.value
    assert isinstance(error, DecodeError)
    assert (error.job_id, error.seq) == ("job-a", 2)
    assert field in error.field
    assert "'job-a'" in str(error) and "seq 2" in str(error) and "other jobs" in str(error)
    assert error.quarantined() == Quarantined("job-a", 2, error.field, str(error))
    assert store.read("job-b") == ev.record("job-b", 2)
    assert store.read_many(["job-b"]) == {"job-b": ev.record("job-b", 2)}


def test_events_of_a_bad_job_before_its_bad_row_are_held_back_too_S48(harness, store, ev):
    """A reader must not fold half a job: none of its events in the page are given."""
    store.append("job-a", 0, ev.record("job-a", 2))
    plant(harness, "job-a", 3, '{"broken": ')
    store.append("job-b", 0, ev.record("job-b", 1))
    feed = store.read_feed(0)
    assert {e.job_id for e in feed.events} == {"job-b"}
    assert [q.job_id for q in feed.quarantined] == ["job-a"]


def test_feed_pages_keep_the_position_past_a_bad_row_S48(harness, store, ev):
    store.append("job-a", 0, ev.record("job-a", 1))
    plant(harness, "job-a", 2, "not json")
    store.append("job-b", 0, ev.record("job-b", 1))
    first = store.read_feed(0, limit=2)
    assert first.events == [] and [q.job_id for q in first.quarantined] == ["job-a"]
    second = store.read_feed(first.position, limit=2)
    assert [(e.job_id, e.seq) for e in second.events] == [("job-b", 1)]
    assert second.quarantined == []


def test_binary_body_is_quarantined_in_sqlite_S48(tmp_path, ev):
    """Only SQLite can hold a non-UTF-8 body (PostgreSQL's text column refuses one)."""
    import sqlite3

    from dispatch.store.sqlite import SQLiteStore

    path = tmp_path / "record.db"
    with SQLiteStore(path) as store:
        store.append("job-a", 0, ev.record("job-a", 1))
        store.append("job-b", 0, ev.record("job-b", 1))
        db = sqlite3.connect(path)
        with db:
            db.execute(
                "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
                ("job-a", 2, "hold-placed", AT, b"\xff\xfe{\x00garbage"),
            )
        db.close()
        feed = store.read_feed(0)
        assert [e.job_id for e in feed.events] == ["job-b"]
        assert [(q.job_id, q.seq, q.field) for q in feed.quarantined] == [("job-a", 2, "body")]
        with pytest.raises(
            UndecodableRow, match=r"job 'job-a', event seq 2: the body is not UTF-8"
        ):
            store.read("job-a")


def test_a_bad_outcome_in_the_jobs_table_quarantines_that_job_in_the_list_S48(harness, store, ev):
    store.append("job-a", 0, ev.record("job-a", 1))
    store.append("job-b", 0, [*ev.record("job-b", 1), ev.outcome("job-b", 2)])
    store.append("job-c", 0, ev.record("job-c", 1))
    harness.raw("UPDATE dispatch_jobs SET outcome = 'exploded' WHERE job_id = 'job-a'")
    before = snapshot(harness)
    listed = {s.job_id: s for s in store.jobs()}
    assert set(listed) == {"job-a", "job-b", "job-c"}
    bad = listed["job-a"].quarantined
    assert bad is not None and (bad.job_id, bad.seq, bad.field) == ("job-a", None, "outcome")
    assert "'exploded'" in bad.message and listed["job-a"].outcome is None
    assert listed["job-b"].quarantined is None and listed["job-b"].outcome.value == "succeeded"
    assert listed["job-c"].quarantined is None
    assert [s.job_id for s in store.jobs(state="succeeded")] == ["job-b"]
    assert snapshot(harness) == before


def test_a_bad_created_at_in_sqlite_quarantines_that_job_in_the_list_S48(tmp_path, ev):
    import sqlite3

    from dispatch.store.sqlite import SQLiteStore

    path = tmp_path / "record.db"
    with SQLiteStore(path) as store:
        store.append("job-a", 0, ev.record("job-a", 1))
        store.append("job-b", 0, ev.record("job-b", 1))
        db = sqlite3.connect(path)
        with db:
            db.execute("UPDATE dispatch_jobs SET created_at = 'yesterday' WHERE job_id = 'job-a'")
        db.close()
        listed = {s.job_id: s for s in store.jobs()}
        assert listed["job-a"].quarantined is not None
        assert listed["job-a"].quarantined.field == "created_at"
        assert listed["job-b"].quarantined is None


# --- per-job reads read one job only -----------------------------------------------------


def test_feed_of_one_job_never_meets_another_jobs_bad_row_S48(harness, store, ev):
    store.append("job-a", 0, ev.record("job-a", 1))
    plant(harness, "job-a", 2, "not json")
    store.append("job-b", 0, ev.record("job-b", 3))
    feed = store.read_feed(0, job_ids=["job-b"])
    assert [(e.job_id, e.seq) for e in feed.events] == [("job-b", 1), ("job-b", 2), ("job-b", 3)]
    assert feed.quarantined == []
    store.append("job-b", 3, [ev.hold("job-b", 4)])
    more = store.read_feed(feed.position, job_ids=["job-b"])
    assert [(e.job_id, e.seq) for e in more.events] == [("job-b", 4)]
    assert store.read_feed(0, job_ids=[]).events == []


def test_one_job_feed_uses_the_job_index_in_sqlite(tmp_path, ev):
    """The per-job feed query is answered from the (job_id, seq) index, not a scan of every
    event after the position."""
    import sqlite3

    from dispatch.store.sqlite import SQLiteStore

    path = tmp_path / "record.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT position, job_id, seq, body FROM dispatch_events WHERE "
        "job_id IN (SELECT value FROM json_each(?)) AND +position > ? ORDER BY position LIMIT ?",
        ('["job-a"]', 0, -1),
    ).fetchall()
    db.close()
    details = " | ".join(row[-1] for row in plan)
    assert "USING INDEX sqlite_autoindex_dispatch_events_1 (job_id=?)" in details, details
    assert "SCAN dispatch_events" not in details, details
    db = sqlite3.connect(path)
    one = db.execute(
        "EXPLAIN QUERY PLAN SELECT position, job_id, seq, body FROM dispatch_events WHERE "
        "job_id = ? AND +position > ? ORDER BY position",
        ("job-a", 0),
    ).fetchall()
    db.close()
    details = " | ".join(row[-1] for row in one)
    assert "USING INDEX sqlite_autoindex_dispatch_events_1 (job_id=?)" in details, details


@pytest.mark.parametrize("harness", ["postgres"], indirect=True)
def test_one_job_feed_uses_the_job_index_in_postgres(harness, store, ev):
    from dispatch.store import Batch

    store.append_many([Batch(f"job-{n:05d}", 0, ev.record(f"job-{n:05d}", 1)) for n in range(3000)])
    harness.raw("ANALYZE dispatch_events")
    plan = harness.raw(
        "EXPLAIN SELECT position, job_id, seq, body FROM dispatch_events WHERE job_id = ANY(?) "
        "AND +position > ? ORDER BY position LIMIT ?",
        (["job-00042"], 0, None),
    )
    text = "\n".join(row[0] for row in plan)
    assert "Index Scan using dispatch_events_pkey" in text, text
    assert "Seq Scan on dispatch_events" not in text, text
    one = harness.raw(
        "EXPLAIN SELECT position, job_id, seq, body FROM dispatch_events WHERE job_id = ? "
        "AND +position > ? ORDER BY position",
        ("job-00042", 0),
    )
    text = "\n".join(row[0] for row in one)
    assert "Index Scan using dispatch_events_pkey" in text, text
