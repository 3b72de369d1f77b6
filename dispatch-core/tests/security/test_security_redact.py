"""The PostgreSQL password is never printed (S-51): not in a refused URL, not in
a driver's error that quotes the URL, not in a chained traceback, not from the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from dispatch.model.errors import BadInput, DispatchError, Unreachable
from dispatch.store import open_store, redact, redact_text
from dispatch.store.postgres import PostgresStore

SECRET = "hunter2x"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def everything_printed(exc: BaseException) -> str:
    """The message and the whole traceback a logger would print, causes included."""
    return str(exc) + "".join(traceback.format_exception(exc))


@pytest.mark.parametrize(
    "url",
    [
        f"dispatch:{SECRET}@db.example/records",
        f"host=db.example user=dispatch password={SECRET} dbname=records",
        f"host=db.example password='{SECRET} with spaces' dbname=records",
        f"//dispatch:{SECRET}@db.example/records",
        f"mysql://root:{SECRET}@db/records",
        f"redis://db/0?password={SECRET}",
    ],
)
def test_a_refused_store_url_never_shows_its_password_S51(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as refused:
        open_store(url)
    assert SECRET not in everything_printed(refused.value)
    assert "***" in str(refused.value)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://dispatch@127.0.0.1:{port}/dispatch_test?password={secret}",
        "postgresql://dispatch:{secret}@127.0.0.1:{port}/dispatch_test",
        "postgresql://dispatch@127.0.0.1:{port}/dispatch_test?sslmode=disable&password={secret}",
    ],
)
def test_an_unreachable_server_never_shows_the_password_S51(dsn):
    dsn = dsn.format(port=free_port(), secret=SECRET)
    with pytest.raises(Unreachable) as unreachable:
        PostgresStore(dsn, connect_timeout=3)
    assert SECRET not in everything_printed(unreachable.value)
    assert "127.0.0.1" in str(unreachable.value)


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://dispatch:{SECRET} spaced@127.0.0.1:5432/dispatch_test",
        f"postgresql://dispatch:{SECRET}@127.0.0.1:5432/dispatch_test?bogus=1",
        f"host=127.0.0.1 password={SECRET} badkeyword",
        f"postgresql://dispatch:{SECRET}@127.0.0.1:notaport/dispatch_test",
    ],
)
def test_a_dsn_the_driver_cannot_parse_never_shows_the_password_S51(dsn):
    """psycopg quotes the offending part of the URL, the password included."""
    with pytest.raises(DispatchError) as refused:
        PostgresStore(dsn, connect_timeout=3)
    assert SECRET not in everything_printed(refused.value)


def test_a_wrong_password_is_unreachable_without_echoing_it_S51(postgres_dsn):
    from urllib.parse import urlsplit

    parts = urlsplit(postgres_dsn)
    dsn = postgres_dsn.replace(f":{parts.password}@", f":{SECRET}@", 1)
    with pytest.raises(DispatchError) as refused:
        PostgresStore(dsn, connect_timeout=5)
    assert SECRET not in everything_printed(refused.value)
    assert "password authentication failed" in str(refused.value)


def test_the_store_location_never_holds_the_password_S51(postgres_dsn):
    from urllib.parse import urlsplit

    parts = urlsplit(postgres_dsn)
    password = parts.password
    assert password
    with PostgresStore(postgres_dsn) as store:
        # (the test server's password is also its user's name, which stays readable)
        assert f":{password}@" not in store.location + repr(store)
        assert f"{parts.username}:***@" in store.location
        assert parts.path in store.location
    query_form = postgres_dsn.replace(f":{password}@", "@", 1) + f"?password={password}"
    with PostgresStore(query_form) as store:
        assert f"password={password}" not in store.location
        assert "password=***" in store.location


def test_redact_masks_every_form():
    assert redact(f"postgresql://u:{SECRET}@h:5/d") == "postgresql://u:***@h:5/d"
    assert redact(f"postgresql://u@h/d?password={SECRET}&sslmode=require") == (
        "postgresql://u@h/d?password=***&sslmode=require"
    )
    assert SECRET not in redact(f"postgresql://u:{SECRET}@@h/d")
    assert SECRET not in redact(f"host=h password='{SECRET} x' user=u")
    message = f'unexpected spaces found in "{SECRET} x"'
    assert redact_text(message, [f"{SECRET} x"]) == 'unexpected spaces found in "***"'
    assert redact("sqlite:///home/ana/record.db") == "sqlite:///home/ana/record.db"


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_never_prints_the_password_S51(as_json, tmp_path):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    dispatch = Path(sys.executable).parent / "dispatch"
    for store in (
        f"postgresql://dispatch:{SECRET}@127.0.0.1:{free_port()}/dispatch_test",
        f"postgresql://dispatch@127.0.0.1:{free_port()}/x?password={SECRET}",
        f"dispatch:{SECRET}@127.0.0.1/x",
        f"postgresql://dispatch:{SECRET} x@127.0.0.1/x",
    ):
        env["DISPATCH_STORE"] = store
        args = [str(dispatch), "list"] + (["--json"] if as_json else [])
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode in (2, 3), (store, done.stdout, done.stderr)
        assert SECRET not in done.stdout + done.stderr, (store, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
