"""The record-store contract (S-33, S-35, S-36), run unchanged against every store.

The ``harness`` fixture (conftest.py) gives a real SQLite file or a fresh schema on a real
PostgreSQL server; nothing here knows which, except the raw SQL the undecodable-row tests
write with the driver to plant a row no dispatch build would write.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from dispatch.model.enums import State
from dispatch.model.errors import BadInput, DecodeError, RecordConflict, UnknownJob
from dispatch.store import Batch, Lease, LeaseConflict, VersionConflict

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)


def snapshot(harness):
    """Everything the store holds, as the driver sees it: to prove nothing changed."""
    return (
        harness.raw("SELECT job_id, seq, type, body FROM dispatch_events ORDER BY job_id, seq"),
        harness.raw("SELECT job_id, version, outcome FROM dispatch_jobs ORDER BY job_id"),
        harness.raw("SELECT job_id, owner, token FROM dispatch_leases ORDER BY job_id"),
    )


class TestRecordStoreContract:
    # --- append and read (S-33) -------------------------------------------------------

    def test_append_then_read_round_trip_S33(self, store, ev):
        events = ev.record("job-a", 3)
        assert store.append("job-a", 0, events) == 3
        assert store.read("job-a") == events
        assert store.read("job-a", after=1) == events[1:]
        assert store.read("job-a", after=3) == []
        more = [ev.object_created("job-a", 4), ev.hold("job-a", 5)]
        assert store.append("job-a", 3, more) == 5
        assert store.read("job-a") == events + more

    def test_round_trip_keeps_every_field_S6(self, store, ev):
        """What comes back is equal field by field, causes and plan included."""
        created = ev.created("job-a", name="bert", backend="slurm")
        hold = ev.hold("job-a", 2)
        store.append("job-a", 0, [created, hold])
        back = store.read("job-a")
        assert [e.model_dump() for e in back] == [created.model_dump(), hold.model_dump()]
        assert back[0].plan == created.plan

    def test_stale_expected_version_is_a_conflict_and_changes_nothing_S33(self, harness, store, ev):
        store.append("job-a", 0, ev.record("job-a", 2))
        before = snapshot(harness)
        with pytest.raises(VersionConflict) as stale:
            store.append("job-a", 1, [ev.requested("job-a", 2, submission=9)])
        assert isinstance(stale.value, RecordConflict)
        assert (stale.value.expected, stale.value.actual) == (1, 2)
        assert "'job-a'" in str(stale.value) and "version 2" in str(stale.value)
        with pytest.raises(VersionConflict):
            store.append("job-a", 0, [ev.created("job-a", name="again")])
        with pytest.raises(VersionConflict):
            store.append("job-a", 5, [ev.requested("job-a", 6)])
        assert snapshot(harness) == before
        assert store.append("job-a", 2, [ev.requested("job-a", 3)]) == 3

    def test_append_to_a_job_with_no_record_at_a_later_version_conflicts_S33(self, store, ev):
        with pytest.raises(VersionConflict) as missing:
            store.append("job-x", 2, [ev.requested("job-x", 3)])
        assert missing.value.actual == 0
        with pytest.raises(UnknownJob):
            store.read("job-x")

    @pytest.mark.parametrize(
        "case",
        [
            "gap",
            "repeat",
            "wrong-start",
            "first-not-created",
            "created-twice",
            "other-job",
            "empty",
            "negative-version",
            "not-an-event",
            "lease-of-other-job",
        ],
    )
    def test_bad_batch_is_refused_and_changes_nothing_S33_S36(self, harness, store, ev, case):
        """A batch whose seqs do not run expected_version+1, +2, … (or is otherwise not a
        continuation of the record) is bad input: refused with what and where, nothing kept."""
        store.append("job-a", 0, ev.record("job-a", 2))
        before = snapshot(harness)
        expected, events, lease = {
            "gap": (2, [ev.requested("job-a", 3), ev.requested("job-a", 5)], None),
            "repeat": (2, [ev.requested("job-a", 3), ev.requested("job-a", 3)], None),
            "wrong-start": (2, [ev.requested("job-a", 2)], None),
            "first-not-created": (0, [ev.requested("job-b", 1)], None),
            "created-twice": (2, [ev.requested("job-a", 3), ev.created("job-a")], None),
            "other-job": (2, [ev.requested("job-a", 3), ev.requested("job-b", 4)], None),
            "empty": (2, [], None),
            "negative-version": (-1, [ev.requested("job-a", 0 + 1)], None),
            "not-an-event": (2, [ev.requested("job-a", 3), {"type": "hold-placed"}], None),
            "lease-of-other-job": (
                2,
                [ev.requested("job-a", 3)],
                Lease("job-b", "sup", 1, T0 + TTL),
            ),
        }[case]
        job = "job-b" if case == "first-not-created" else "job-a"
        with pytest.raises(BadInput) as refused:
            store.append(job, expected, events, lease=lease)
        assert f"job {job!r}" in str(refused.value)
        assert snapshot(harness) == before

    @pytest.mark.parametrize("job_id", ["", "job\x00a"])
    def test_unstorable_job_id_is_refused_everywhere_S36(self, harness, store, ev, job_id):
        """An id one store would keep and the other refuse is refused by both, up front."""
        created = ev.created("job-a").model_copy(update={"job_id": job_id})
        with pytest.raises(BadInput, match="job id must be a non-empty string"):
            store.append(job_id, 0, [created])
        with pytest.raises(BadInput, match="job id"):
            store.read(job_id)
        with pytest.raises(BadInput, match="job id"):
            store.acquire_leases([job_id], "sup", TTL, T0)
        assert snapshot(harness) == ([], [], [])

    def test_first_event_must_be_job_created_names_position_S36(self, store, ev):
        with pytest.raises(BadInput, match=r"event 1 of 1 \(submission-requested\).*job-created"):
            store.append("job-b", 0, [ev.requested("job-b", 1)])
        with pytest.raises(UnknownJob):
            store.read("job-b")

    def test_bad_event_in_the_middle_of_a_batch_leaves_nothing_S33_S36(self, harness, store, ev):
        events = ev.record("job-a", 4)
        events[2] = ev.requested("job-a", 7)
        with pytest.raises(BadInput, match=r"event 3 of 4 .*seq 7, expected 3"):
            store.append("job-a", 0, events)
        assert snapshot(harness) == ([], [], [])
        with pytest.raises(UnknownJob):
            store.read("job-a")

    # --- append_many ------------------------------------------------------------------

    def test_append_many_keeps_the_others_when_one_conflicts_S33(self, harness, store, ev):
        for job in ("job-a", "job-b", "job-c"):
            store.append(job, 0, ev.record(job, 2))
        result = store.append_many(
            [
                Batch("job-a", 2, [ev.requested("job-a", 3), ev.object_created("job-a", 4)]),
                Batch("job-b", 1, [ev.requested("job-b", 2, submission=5)]),
                Batch("job-c", 2, [ev.outcome("job-c", 3)]),
                Batch("job-d", 0, ev.record("job-d", 1)),
            ]
        )
        assert result["job-a"] == 4 and result["job-c"] == 3 and result["job-d"] == 1
        assert isinstance(result["job-b"], VersionConflict)
        assert len(store.read("job-a")) == 4
        assert [e.seq for e in store.read("job-b")] == [1, 2]
        assert store.read("job-b")[1].submission == 1
        assert store.read("job-c")[-1].type == "outcome-committed"
        assert store.read("job-d") == ev.record("job-d", 1)

    def test_key_refusal_midway_leaves_that_job_untouched_and_keeps_the_others_S33(
        self, harness, store, ev
    ):
        """Atomic in the database itself: a job whose version check passes but whose
        second event hits the (job_id, seq) key (a row planted behind the store's back)
        keeps none of its batch, and the other jobs of the call are still written."""
        for job in ("job-a", "job-b"):
            store.append(job, 0, ev.record(job, 1))
        planted = ev.hold("job-a", 3)
        harness.raw(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            ("job-a", 3, planted.type, "2026-03-01T12:00:03+00:00", planted.model_dump_json()),
        )
        result = store.append_many(
            [
                Batch("job-a", 1, [ev.requested("job-a", 2), ev.object_created("job-a", 3)]),
                Batch("job-b", 1, [ev.requested("job-b", 2)]),
            ]
        )
        assert isinstance(result["job-a"], RecordConflict)
        assert "(job_id, seq)" in str(result["job-a"]) and "'job-a'" in str(result["job-a"])
        assert result["job-b"] == 2
        seqs = harness.raw("SELECT seq FROM dispatch_events WHERE job_id = 'job-a' ORDER BY seq")
        assert seqs == [(1,), (3,)]
        assert harness.raw("SELECT version FROM dispatch_jobs WHERE job_id = 'job-a'") == [(1,)]
        assert [e.seq for e in store.read("job-b")] == [1, 2]
        with pytest.raises(RecordConflict):
            store.append("job-a", 1, [ev.requested("job-a", 2), ev.object_created("job-a", 3)])

    def test_append_many_with_bad_input_anywhere_writes_nothing_S36(self, harness, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        before = snapshot(harness)
        with pytest.raises(BadInput, match="job 'job-b'"):
            store.append_many(
                [
                    Batch("job-a", 1, [ev.requested("job-a", 2)]),
                    Batch("job-b", 0, [ev.created("job-b"), ev.requested("job-b", 3)]),
                ]
            )
        with pytest.raises(BadInput, match="twice"):
            store.append_many(
                [
                    Batch("job-a", 1, [ev.requested("job-a", 2)]),
                    Batch("job-a", 2, [ev.requested("job-a", 3)]),
                ]
            )
        assert snapshot(harness) == before

    def test_append_many_of_many_jobs_in_one_call_S33_S32(self, store, ev):
        """A tick's worth of jobs goes in one call, and reads back in one call."""
        jobs = [f"job-{n:04d}" for n in range(300)]
        result = store.append_many([Batch(j, 0, ev.record(j, 2)) for j in jobs])
        assert result == {j: 2 for j in jobs}
        result = store.append_many([Batch(j, 2, [ev.requested(j, 3, submission=2)]) for j in jobs])
        assert result == {j: 3 for j in jobs}
        records = store.read_many(jobs)
        assert sorted(records) == jobs
        assert all([e.seq for e in records[j]] == [1, 2, 3] for j in jobs)

    # --- concurrent writers (S-33) ----------------------------------------------------

    def test_two_threads_at_one_version_exactly_one_wins_S33(self, harness, store, ev):
        """Two stores (two connections) append at the same version at the same moment."""
        jobs = [f"job-{n}" for n in range(15)]
        for job in jobs:
            store.append(job, 0, ev.record(job, 1))
        writers = [harness.open(), harness.open()]
        outcomes: dict[tuple[int, str], object] = {}
        barrier = threading.Barrier(2)

        def write(index: int) -> None:
            for job in jobs:
                barrier.wait(timeout=60)
                try:
                    outcomes[index, job] = writers[index].append(
                        job, 1, [ev.requested(job, 2, submission=index + 1)]
                    )
                except RecordConflict as exc:
                    outcomes[index, job] = exc

        threads = [threading.Thread(target=write, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        for writer in writers:
            writer.close()
        for job in jobs:
            results = [outcomes[0, job], outcomes[1, job]]
            wins = [i for i, r in enumerate(results) if r == 2]
            assert len(wins) == 1, (job, results)
            assert isinstance(results[1 - wins[0]], RecordConflict)
            record = store.read(job)
            assert [e.seq for e in record] == [1, 2]
            assert record[1].submission == wins[0] + 1

    def test_two_processes_at_one_version_exactly_one_wins_S33(self, harness, store, ev):
        jobs = [f"job-{n}" for n in range(20)]
        for job in jobs:
            store.append(job, 0, ev.record(job, 1))
        code = (
            "import json, sys\n"
            "from datetime import datetime, UTC\n"
            "from dispatch.model.errors import RecordConflict\n"
            "from dispatch.model.events import SubmissionRequested\n"
            f"{harness.child_open()}\n"
            "me = int(sys.argv[1]); out = {}\n"
            "for job in json.loads(sys.argv[2]):\n"
            "    e = SubmissionRequested(job_id=job, seq=2, at=datetime.now(UTC), submission=me)\n"
            "    try:\n"
            "        out[job] = store.append(job, 1, [e])\n"
            "    except RecordConflict:\n"
            "        out[job] = 'conflict'\n"
            "print(json.dumps(out))\n"
        )
        children = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(me), json.dumps(jobs)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for me in (1, 2)
        ]
        answers = []
        for child in children:
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
            answers.append(json.loads(out))
        for job in jobs:
            pair = [answers[0][job], answers[1][job]]
            assert sorted(pair, key=str) == [2, "conflict"], (job, pair)
            winner = 1 if pair[0] == 2 else 2
            assert store.read(job)[1].submission == winner

    # --- undecodable rows (S-6, S-36) ---------------------------------------------------

    @pytest.mark.parametrize(
        ("mutate", "field", "value"),
        [
            (lambda d: d["cause"].update(kind="meteor-strike"), "cause.kind", "meteor-strike"),
            (lambda d: d.update(type="job-paused"), "type", "job-paused"),
            (lambda d: d.update(priority=7), "priority", 7),
            (lambda d: d["cause"].update(provenance="oracle"), "cause.provenance", "oracle"),
        ],
        ids=[
            "unknown-cause-kind",
            "unknown-event-type",
            "field-from-newer-build",
            "unknown-provenance",
        ],
    )
    def test_undecodable_row_names_job_seq_and_field_and_changes_nothing_S6_S36(
        self, harness, store, ev, mutate, field, value
    ):
        store.append("job-a", 0, ev.record("job-a", 1))
        store.append("job-b", 0, ev.record("job-b", 2))
        body = json.loads(ev.hold("job-a", 2).model_dump_json())
        mutate(body)
        harness.raw(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            ("job-a", 2, body["type"], "2026-03-01T12:00:02+00:00", json.dumps(body)),
        )
        harness.raw("UPDATE dispatch_jobs SET version = 2 WHERE job_id = 'job-a'")
        before = snapshot(harness)
        for read in (
            lambda: store.read("job-a"),
            lambda: store.read_many(["job-a", "job-b"]),
            lambda: store.read_since(0),
        ):
            with pytest.raises(DecodeError) as refused:
                read()
            message = str(refused.value)
            assert "'job-a'" in message and "seq 2" in message, message
            assert field in message and repr(value) in message, message
            assert refused.value.field.endswith(field) or refused.value.field == field
            assert refused.value.value == value
        assert store.read("job-a", after=2) == []
        assert store.read("job-b") == ev.record("job-b", 2)
        assert snapshot(harness) == before

    def test_malformed_json_row_is_a_decode_error_naming_job_and_seq_S36(self, harness, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        harness.raw(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            ("job-a", 2, "hold-placed", "2026-03-01T12:00:02+00:00", '{"type": "hold-pl'),
        )
        with pytest.raises(DecodeError, match=r"job 'job-a', event seq 2"):
            store.read("job-a")

    def test_row_filed_under_another_job_is_refused_S36(self, harness, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        harness.raw(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            (
                "job-a",
                2,
                "hold-placed",
                "2026-03-01T12:00:02+00:00",
                ev.hold("job-z", 2).model_dump_json(),
            ),
        )
        with pytest.raises(DecodeError, match="job 'job-z'") as refused:
            store.read("job-a")
        assert refused.value.field == "job_id"

    # --- reading ------------------------------------------------------------------------

    def test_read_unknown_job_says_how_to_find_it_S36(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        with pytest.raises(UnknownJob, match=r"job-nope.*dispatch list") as unknown:
            store.read("job-nope")
        assert isinstance(unknown.value, BadInput)
        with pytest.raises(UnknownJob, match="job-nope"):
            store.read_many(["job-a", "job-nope"])
        with pytest.raises(BadInput, match="after"):
            store.read("job-a", after=-1)

    def test_read_since_is_a_feed_in_append_order_S33(self, harness, store, ev):
        other = harness.open()
        store.append("job-a", 0, ev.record("job-a", 1))
        other.append("job-b", 0, ev.record("job-b", 2))
        store.append("job-a", 1, [ev.requested("job-a", 2)])
        events, position = store.read_since(0)
        assert [(e.job_id, e.seq) for e in events] == [
            ("job-a", 1),
            ("job-b", 1),
            ("job-b", 2),
            ("job-a", 2),
        ]
        assert store.read_since(position) == ([], position)
        other.append("job-b", 2, [ev.outcome("job-b", 3)])
        store.append_many(
            [
                Batch("job-a", 2, [ev.object_created("job-a", 3)]),
                Batch("job-c", 0, ev.record("job-c", 1)),
            ]
        )
        new, later = store.read_since(position)
        assert [(e.job_id, e.seq) for e in new] == [("job-b", 3), ("job-a", 3), ("job-c", 1)]
        assert later > position
        other.close()

    def test_read_since_misses_nothing_while_writers_append_concurrently_S33(
        self, harness, store, ev
    ):
        """A reader following the feed while two writers append sees every event exactly
        once: no position is passed before an event with a smaller one commits."""
        writers = [harness.open(), harness.open()]
        reader = harness.open()
        done = threading.Event()
        seen: list[tuple[str, int]] = []

        def write(index: int) -> None:
            job = f"job-{index}"
            writers[index].append(job, 0, ev.record(job, 1))
            for seq in range(2, 61):
                writers[index].append_many(
                    [
                        Batch(job, seq - 1, [ev.requested(job, seq)]),
                        Batch(f"{job}-{seq}", 0, ev.record(f"{job}-{seq}", 1)),
                    ]
                )

        def follow() -> None:
            position = 0
            while True:
                finished = done.is_set()
                events, position = reader.read_since(position)
                seen.extend((e.job_id, e.seq) for e in events)
                if finished:
                    return

        threads = [threading.Thread(target=write, args=(i,)) for i in (0, 1)]
        follower = threading.Thread(target=follow)
        follower.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        done.set()
        follower.join(timeout=300)
        for opened in (*writers, reader):
            opened.close()
        expected = {(f"job-{i}", s) for i in (0, 1) for s in range(1, 61)}
        expected |= {(f"job-{i}-{s}", 1) for i in (0, 1) for s in range(2, 61)}
        assert len(seen) == len(set(seen)) == len(expected)
        assert set(seen) == expected
        for i in (0, 1):
            mine = [s for j, s in seen if j == f"job-{i}"]
            assert mine == sorted(mine)

    def test_read_since_pages_with_limit_without_losing_events_S33(self, store, ev):
        for n in range(7):
            store.append(f"job-{n}", 0, ev.record(f"job-{n}", 2))
        seen, position = [], 0
        while True:
            page, position = store.read_since(position, limit=3)
            if not page:
                break
            assert len(page) <= 3
            seen += page
        assert [(e.job_id, e.seq) for e in seen] == [
            (f"job-{n}", s) for n in range(7) for s in (1, 2)
        ]
        with pytest.raises(BadInput, match="limit"):
            store.read_since(0, limit=0)

    def test_active_jobs_excludes_committed_outcomes(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 2))
        store.append(
            "job-b", 0, ev.record("job-b", 1, backend="slurm", at=T0 + timedelta(minutes=1))
        )
        store.append("job-c", 0, ev.record("job-c", 1, at=T0 + timedelta(minutes=2)))
        store.append("job-c", 1, [ev.outcome("job-c", 2, State.FAILED)])
        assert store.active_jobs() == ["job-a", "job-b"]
        assert store.active_jobs(backend="slurm") == ["job-b"]
        assert store.active_jobs(backend="kubeflow") == []
        store.append("job-a", 2, [ev.outcome("job-a", 3, State.CANCELLED)])
        assert store.active_jobs() == ["job-b"]

    def test_outcome_stays_after_later_events_S18(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        store.append("job-a", 1, [ev.outcome("job-a", 2, State.SUCCEEDED)])
        store.append("job-a", 2, [ev.hold("job-a", 3)])
        [summary] = store.jobs()
        assert summary.outcome is State.SUCCEEDED and summary.version == 3
        assert store.active_jobs() == []

    def test_jobs_lists_summaries_newest_first_with_filters(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1, name="old"))
        store.append(
            "job-b",
            0,
            ev.record("job-b", 3, name="mid", backend="slurm", at=T0 + timedelta(hours=1)),
        )
        store.append("job-c", 0, ev.record("job-c", 1, at=T0 + timedelta(hours=2)))
        store.append("job-c", 1, [ev.outcome("job-c", 2, State.SUCCEEDED)])
        everything = store.jobs()
        assert [s.job_id for s in everything] == ["job-c", "job-b", "job-a"]
        mid = everything[1]
        assert (mid.name, mid.backend, mid.version, mid.outcome) == ("mid", "slurm", 3, None)
        assert mid.created_at == T0 + timedelta(hours=1)
        assert [s.job_id for s in store.jobs("active")] == ["job-b", "job-a"]
        assert [s.job_id for s in store.jobs(State.SUCCEEDED)] == ["job-c"]
        assert store.jobs("failed") == []
        assert [s.job_id for s in store.jobs(limit=2)] == ["job-c", "job-b"]
        with pytest.raises(BadInput, match=r"'running'.*active, cancelled, failed, succeeded"):
            store.jobs("running")

    # --- leases (S-35) ------------------------------------------------------------------

    def test_second_owner_cannot_take_an_unexpired_lease_S35(self, store):
        got = store.acquire_leases(["job-a", "job-b"], "sup-1", TTL, T0)
        assert set(got) == {"job-a", "job-b"}
        assert got["job-a"] == Lease("job-a", "sup-1", 1, T0 + TTL)
        assert store.acquire_leases(["job-a", "job-c"], "sup-2", TTL, T0 + TTL / 2) == {
            "job-c": Lease("job-c", "sup-2", 1, T0 + TTL / 2 + TTL)
        }

    def test_renewal_keeps_the_token_and_extends_S35(self, store):
        store.acquire_leases(["job-a"], "sup-1", TTL, T0)
        renewed = store.acquire_leases(["job-a"], "sup-1", TTL, T0 + timedelta(seconds=20))
        assert renewed["job-a"] == Lease("job-a", "sup-1", 1, T0 + timedelta(seconds=50))
        assert store.acquire_leases(["job-a"], "sup-2", TTL, T0 + timedelta(seconds=40)) == {}

    def test_takeover_after_expiry_bumps_the_token_S35(self, store):
        store.acquire_leases(["job-a"], "sup-1", TTL, T0)
        taken = store.acquire_leases(["job-a"], "sup-2", TTL, T0 + TTL)
        assert taken["job-a"].token == 2 and taken["job-a"].owner == "sup-2"
        back = store.acquire_leases(["job-a"], "sup-1", TTL, T0 + 3 * TTL)
        assert back["job-a"].token == 3

    def test_stale_lease_token_cannot_append_S35(self, harness, store, ev):
        """A supervisor that stalled past its lease is fenced off once another took over."""
        store.append("job-a", 0, ev.record("job-a", 1))
        stalled = store.acquire_leases(["job-a"], "sup-1", TTL, T0)["job-a"]
        assert store.append("job-a", 1, [ev.requested("job-a", 2)], lease=stalled) == 2
        other = harness.open()
        fresh = other.acquire_leases(["job-a"], "sup-2", TTL, T0 + 2 * TTL)["job-a"]
        before = snapshot(harness)
        with pytest.raises(LeaseConflict) as fenced:
            store.append("job-a", 2, [ev.requested("job-a", 3)], lease=stalled)
        assert isinstance(fenced.value, RecordConflict)
        assert "'sup-2' token 2" in str(fenced.value)
        assert snapshot(harness) == before
        assert other.append("job-a", 2, [ev.requested("job-a", 3)], lease=fresh) == 3
        other.close()

    def test_lease_fencing_in_append_many_refuses_only_the_lost_job_S35(self, store, ev):
        for job in ("job-a", "job-b"):
            store.append(job, 0, ev.record(job, 1))
        mine = store.acquire_leases(["job-a", "job-b"], "sup-1", TTL, T0)
        store.acquire_leases(["job-b"], "sup-2", TTL, T0 + TTL)
        result = store.append_many(
            [
                Batch("job-a", 1, [ev.requested("job-a", 2)], mine["job-a"]),
                Batch("job-b", 1, [ev.requested("job-b", 2)], mine["job-b"]),
            ]
        )
        assert result["job-a"] == 2
        assert isinstance(result["job-b"], LeaseConflict)
        assert len(store.read("job-b")) == 1

    def test_append_under_a_lease_the_store_never_granted_is_refused_S35(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        invented = Lease("job-a", "sup-1", 1, T0 + TTL)
        with pytest.raises(LeaseConflict, match="holds no lease"):
            store.append("job-a", 1, [ev.requested("job-a", 2)], lease=invented)

    def test_release_lets_another_take_at_once_with_a_higher_token_S35(self, store, ev):
        store.append("job-a", 0, ev.record("job-a", 1))
        first = store.acquire_leases(["job-a"], "sup-1", TTL, T0)["job-a"]
        store.release_leases(["job-a"], "sup-2")
        assert store.acquire_leases(["job-a"], "sup-2", TTL, T0) == {}
        store.release_leases(["job-a"], "sup-1")
        second = store.acquire_leases(["job-a"], "sup-2", TTL, T0)["job-a"]
        assert second.token == first.token + 1
        with pytest.raises(LeaseConflict):
            store.append("job-a", 1, [ev.requested("job-a", 2)], lease=first)

    def test_two_owners_racing_for_fresh_leases_get_disjoint_sets_S35(self, harness, store):
        jobs = [f"job-{n}" for n in range(50)]
        writers = [harness.open(), harness.open()]
        got: dict[int, dict] = {}
        barrier = threading.Barrier(2)

        def grab(index: int) -> None:
            barrier.wait(timeout=60)
            got[index] = writers[index].acquire_leases(jobs, f"sup-{index}", TTL, T0)

        threads = [threading.Thread(target=grab, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        for writer in writers:
            writer.close()
        assert not set(got[0]) & set(got[1])
        assert set(got[0]) | set(got[1]) == set(jobs)
        held = dict(harness.raw("SELECT job_id, owner FROM dispatch_leases"))
        for index in (0, 1):
            assert all(held[job] == f"sup-{index}" for job in got[index])

    @pytest.mark.parametrize(
        ("owner", "ttl", "now", "match"),
        [
            ("", TTL, T0, "owner"),
            ("sup", timedelta(0), T0, "ttl"),
            ("sup", TTL, T0.replace(tzinfo=None), "timezone-aware"),
        ],
    )
    def test_bad_lease_request_is_refused_and_changes_nothing_S36(
        self, harness, store, owner, ttl, now, match
    ):
        with pytest.raises(BadInput, match=match):
            store.acquire_leases(["job-a"], owner, ttl, now)
        assert snapshot(harness) == ([], [], [])

    # --- lifecycle ----------------------------------------------------------------------

    def test_closed_store_refuses_use_clearly(self, harness, ev):
        with harness.open() as store:
            store.append("job-a", 0, ev.record("job-a", 1))
        with pytest.raises(BadInput, match="closed"):
            store.read("job-a")
        with harness.open() as again:
            assert len(again.read("job-a")) == 1
