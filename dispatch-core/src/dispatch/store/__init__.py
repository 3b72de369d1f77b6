"""Record stores (S-33, S-35): where each job's append-only record lives.

``open_store(url)`` is the one way in. The URL comes from the caller, else the
``DISPATCH_STORE`` environment variable, else the embedded SQLite default under the XDG
state directory, so a single user needs no setup and a team points every host at one
PostgreSQL database with one variable. The PostgreSQL driver (psycopg) is imported only
when a ``postgresql://`` URL is opened.
"""

from __future__ import annotations

import os
from pathlib import Path

from dispatch.model.errors import BadInput
from dispatch.store.base import (
    JOB_FILTERS,
    Batch,
    Feed,
    JobSummary,
    Lease,
    LeaseConflict,
    Quarantined,
    RecordStore,
    UndecodableRow,
    VersionConflict,
)
from dispatch.store.permissions import InsecureState
from dispatch.store.redact import redact_text, secrets_in

ENV_VAR = "DISPATCH_STORE"

ACCEPTED_FORMS = (
    "sqlite:///absolute/path.db",
    "sqlite:relative/path.db",
    "postgresql://user:password@host:port/database (or postgres://…)",
)


def default_store_path() -> Path:
    """``$XDG_STATE_HOME/dispatch/record.db``; XDG says to ignore a relative XDG_STATE_HOME."""
    state_home = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
    return base / "dispatch" / "record.db"


def default_store_url() -> str:
    return f"sqlite://{default_store_path()}"


def redact(url: str) -> str:
    """The URL without its password (every form of it), for messages and logs."""
    return redact_text(url, secrets_in(url))


def _bad_url(url: str, why: str) -> BadInput:
    forms = "\n".join(f"  {form}" for form in ACCEPTED_FORMS)
    return BadInput(f"record store URL {redact(url)!r}: {why}; accepted forms:\n{forms}")


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:`` URL names: three slashes for an absolute path, none for a
    relative one (resolved against the working directory). SQLAlchemy's four slashes for an
    absolute path are accepted too."""
    rest = url[len("sqlite:") :]
    if rest.startswith("//"):
        if not rest.startswith("///"):
            raise _bad_url(url, "a sqlite URL has no host; use three slashes for an absolute path")
        path = "/" + rest.lstrip("/")
    else:
        path = rest
    if "?" in path or "#" in path:
        raise _bad_url(url, "a sqlite URL takes no query or fragment")
    if not path or path == "/" or path.endswith("/"):
        raise _bad_url(url, "no database file named")
    return Path(path)


def open_store(url: str | None = None) -> RecordStore:
    """Open the record store ``url`` names (see ``ACCEPTED_FORMS``); BadInput for any other."""
    if url is None:
        url = os.environ.get(ENV_VAR) or default_store_url()
    if not isinstance(url, str) or not url.strip():
        raise _bad_url(str(url), "empty")
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        from dispatch.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        from dispatch.store.postgres import PostgresStore

        return PostgresStore(url)
    if not scheme:
        raise _bad_url(url, "no scheme")
    raise _bad_url(url, f"unknown scheme {scheme!r}")


__all__ = [
    "ACCEPTED_FORMS",
    "ENV_VAR",
    "JOB_FILTERS",
    "Batch",
    "Feed",
    "InsecureState",
    "JobSummary",
    "Lease",
    "LeaseConflict",
    "Quarantined",
    "RecordStore",
    "UndecodableRow",
    "VersionConflict",
    "default_store_path",
    "default_store_url",
    "open_store",
    "redact",
    "redact_text",
]
