from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from dispatch.store.sqlite import SQLiteStore
from ui.ui_record import Record, make_record


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Record]:
    """A SQLite record made by a supervisor on the simulated scheduler (ui_record)."""
    store = SQLiteStore(tmp_path / "record.db")
    try:
        yield make_record(store)
    finally:
        store.close()


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    """The installed dispatch, run as a user does, with a private state directory."""
    return Shell(tmp_path)
