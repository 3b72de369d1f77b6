"""How long the kit takes to fail an adapter whose discovery lists nothing.

The adapter is examples/dispatch-example with one bug: its discovery filters by a key its
submit never writes, so every object it submits stays unlisted. The kit runs on its real
(wall-clock) harness twice: with ``listing_grace`` equal to the timeout (how the kit
behaved before: every wait ran out its full timeout) and with the harness's grace.

    python dispatch-testing/benchmarks/kit_fail_fast.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = """
from dispatch import Discovery, hookimpl
from dispatch_example.backend import NAME, ExampleBackend, _now
from dispatch_example.harness import ExampleHarness
from dispatch_testing.kit import BackendConformance


class Unlisted(ExampleBackend):
    @hookimpl
    def dispatch_discover(self, job_ids):
        table, wanted = self._load(), set(job_ids)
        rows = [(i, r) for i, r in table.items() if r.get("job_id") in wanted]
        return Discovery(backend=NAME, at=_now(), objects=tuple(self._view(i, r) for i, r in rows))


class UnlistedHarness(ExampleHarness):
    listing_grace = {grace}

    def __init__(self, live=False):
        super().__init__(live)
        self.backend = Unlisted(self.dir / "queue" / "scheduler.json")


class TestUnlisted(BackendConformance):
    harness_class = UnlistedHarness
"""


def run(grace: str) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as where:
        Path(where, "test_unlisted.py").write_text(MODULE.format(grace=grace))
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_unlisted.py"],
            cwd=where,
            capture_output=True,
            text=True,
        )
        summary = done.stdout.strip().splitlines()[-1]
        return time.perf_counter() - start, summary


def main() -> None:
    for label, grace in (("before (grace = timeout, 20 s)", "20.0"), ("after (grace 2 s)", "2.0")):
        seconds, summary = run(grace)
        print(f"{label:34} {seconds:7.1f} s   {summary}")


if __name__ == "__main__":
    main()
