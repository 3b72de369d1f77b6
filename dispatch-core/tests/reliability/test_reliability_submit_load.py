"""Concurrent ``dispatch submit --no-start`` against one record, SQLite and PostgreSQL
(S-33): the short run of ``benchmarks/submit_load.py`` (the full one is 2,000 submits from
50 processes). Every acknowledged submit is recorded once; none is lost, none twice, none
fails. Times are printed by the campaign, never asserted (they measure the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_concurrent_submits_lose_and_duplicate_nothing_S33() -> None:
    script = str(ROOT / "benchmarks" / "submit_load.py")
    done = subprocess.run(
        [sys.executable, script, "--submits", "40", "--processes", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["store"] for r in rows] == ["sqlite", "postgres"]
    for row in rows:
        assert row["tried"] == 40 and row["survived"] == 40, row
        assert row["broke"] == row["lost"] == row["duplicated"] == row["failed"] == 0, row
        assert row["recorded"] == 40, row
