from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
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
