"""``open_store(url)``: which URLs name which store, and how a bad one is refused (S-36)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from dispatch.model.errors import BadInput
from dispatch.store import ACCEPTED_FORMS, default_store_url, open_store, sqlite_path
from dispatch.store.postgres import PostgresStore
from dispatch.store.sqlite import SQLiteStore


def test_sqlite_absolute_url_opens_that_file_S36(tmp_path, ev):
    path = tmp_path / "abs.db"
    with open_store(f"sqlite://{path}") as store:
        assert isinstance(store, SQLiteStore)
        store.append("job-a", 0, ev.record("job-a", 1))
    with SQLiteStore(path) as again:
        assert [s.job_id for s in again.jobs()] == ["job-a"]


def test_sqlite_relative_url_is_relative_to_the_working_directory_S36(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:rel/record.db") as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / "rel" / "record.db").exists()


def test_default_url_is_a_sqlite_url_of_the_default_path(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    url = default_store_url()
    assert url == f"sqlite://{tmp_path}/dispatch/record.db"
    assert sqlite_path(url) == tmp_path / "dispatch" / "record.db"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_open_a_postgres_store_S33(postgres_dsn, scheme, ev):
    import psycopg
    from psycopg import sql

    schema = f"dispatch_open_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        url = postgres_dsn.replace("postgresql://", f"{scheme}://", 1)
        url += f"?options=-csearch_path%3D{schema}"
        with open_store(url) as store:
            assert isinstance(store, PostgresStore)
            assert "dispatch:dispatch@" not in store.location
            store.append("job-a", 0, ev.record("job-a", 1))
            assert [s.job_id for s in store.jobs()] == ["job-a"]
        with psycopg.connect(postgres_dsn) as conn:
            rows = conn.execute(
                sql.SQL("SELECT job_id FROM {}.dispatch_jobs").format(sql.Identifier(schema))
            ).fetchall()
        assert rows == [("job-a",)]
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://root:hunter2@db/records", "unknown scheme 'mysql'"),
        ("/var/lib/dispatch/record.db", "no scheme"),
        ("record.db", "no scheme"),
        ("sqlite://host/record.db", "no host"),
        ("sqlite:", "no database file"),
        ("sqlite:///", "no database file"),
        ("sqlite:///tmp/dir/", "no database file"),
        ("sqlite:///tmp/x.db?mode=ro", "no query"),
        ("", "empty"),
    ],
)
def test_bad_url_is_refused_naming_it_and_the_accepted_forms_S36(url, why, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as refused:
        open_store(url)
    message = str(refused.value)
    assert why in message
    for form in ACCEPTED_FORMS:
        assert form in message
    assert "hunter2" not in message
    if url:
        assert url.replace("hunter2", "***") in message
    assert list(tmp_path.iterdir()) == []


def test_bad_env_url_is_refused_like_a_given_one_S36(monkeypatch):
    monkeypatch.setenv("DISPATCH_STORE", "redis://localhost/0")
    with pytest.raises(BadInput, match=r"'redis://localhost/0'.*unknown scheme 'redis'"):
        open_store()


def test_relative_and_absolute_sqlite_paths_parse():
    assert sqlite_path("sqlite:///srv/dispatch/record.db") == Path("/srv/dispatch/record.db")
    assert sqlite_path("sqlite:////srv/dispatch/record.db") == Path("/srv/dispatch/record.db")
    assert sqlite_path("sqlite:state/record.db") == Path("state/record.db")
