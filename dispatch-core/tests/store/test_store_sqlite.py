"""What only the embedded SQLite store promises: a private file, WAL, clear refusals."""

from __future__ import annotations

import os
import sqlite3
import stat
from datetime import UTC, datetime

import pytest
from dispatch.model.errors import BadInput, DecodeError, Unreachable
from dispatch.model.events import JobCreated
from dispatch.store import default_store_path, open_store
from dispatch.store.sqlite import SQLiteStore


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_store_file_is_private_0600_in_0700_directories(tmp_path, ev):
    """The record holds commands, environments and scheduler output: owner only."""
    path = tmp_path / "a" / "b" / "record.db"
    old = os.umask(0o022)
    try:
        with SQLiteStore(path) as store:
            store.append("job-a", 0, ev.record("job-a", 2))
            assert mode(path) == 0o600
            wal = path.with_name("record.db-wal")
            assert wal.exists() and mode(wal) == 0o600
    finally:
        os.umask(old)
    assert mode(tmp_path / "a") == 0o700
    assert mode(tmp_path / "a" / "b") == 0o700


def test_store_uses_wal_and_a_busy_timeout(tmp_path):
    path = tmp_path / "record.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_default_path_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_store_path() == tmp_path / "state" / "dispatch" / "record.db"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".local" / "state" / "dispatch" / "record.db"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_store_path() == tmp_path / "home" / ".local" / "state" / "dispatch" / "record.db"


def test_open_store_without_url_uses_env_then_default_S36(monkeypatch, tmp_path, ev):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DISPATCH_STORE", raising=False)
    with open_store() as store:
        store.append("job-a", 0, ev.record("job-a", 1))
    default = tmp_path / "xdg" / "dispatch" / "record.db"
    assert default.exists() and mode(default) == 0o600
    assert mode(default.parent) == 0o700
    monkeypatch.setenv("DISPATCH_STORE", f"sqlite://{tmp_path / 'env.db'}")
    with open_store() as store:
        assert store.jobs() == []
    assert (tmp_path / "env.db").exists()


def test_a_file_that_is_not_a_store_is_refused_and_left_alone_S36(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(BadInput, match=r"notes\.txt.*is this file a dispatch record store"):
        SQLiteStore(path)
    assert path.read_text() == "these are my notes, not a database\n" * 100


def test_a_path_that_cannot_be_created_is_unreachable_S5(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(Unreachable, match=r"cannot open the record store .*file/sub/record\.db"):
        SQLiteStore(blocker / "sub" / "record.db")


def test_store_written_by_a_newer_build_is_refused_S6(tmp_path):
    path = tmp_path / "record.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE dispatch_schema SET version = 99")
    db.close()
    with pytest.raises(DecodeError, match=r"schema version 99.*newer dispatch"):
        SQLiteStore(path)


def test_a_writer_holding_the_lock_past_the_busy_timeout_is_unreachable_S5(tmp_path, ev):
    """A store locked by another process is retryable (S-5), and the retry then succeeds."""
    path = tmp_path / "record.db"
    with SQLiteStore(path, busy_timeout=0.2) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Unreachable, match="database is locked"):
                store.append("job-a", 0, ev.record("job-a", 1))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.append("job-a", 0, ev.record("job-a", 1)) == 1


def test_created_at_is_compared_in_utc_whatever_the_offset(tmp_path, ev):
    """Jobs created with different UTC offsets list in true time order."""
    from datetime import timedelta, timezone

    east = timezone(timedelta(hours=9))
    with SQLiteStore(tmp_path / "record.db") as store:
        early = ev.created("job-early", at=datetime(2026, 3, 1, 20, 0, tzinfo=east))
        late = ev.created("job-late", at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
        store.append("job-late", 0, [late])
        store.append("job-early", 0, [early])
        assert isinstance(early, JobCreated)
        assert [s.job_id for s in store.jobs()] == ["job-late", "job-early"]
        assert store.active_jobs() == ["job-early", "job-late"]
