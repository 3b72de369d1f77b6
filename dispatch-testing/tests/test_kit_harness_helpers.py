"""The harness's ready-made jobs do what they say when a real shell runs them."""

from __future__ import annotations

import os
import subprocess

from dispatch_testing.kit.harness import Harness


def test_kit_rank_failure_spec_fails_only_the_named_rank() -> None:
    """S-42: the failing rank exits with its code at once; another rank's command sleeps
    (checked by parsing only, so the test never waits for it)."""
    spec = Harness().rank_failure_spec(3, 5)
    assert spec.resources.nodes >= 2
    failing = subprocess.run(
        list(spec.command), env={**os.environ, "RANK": "3"}, timeout=30, check=False
    )
    assert failing.returncode == 5
    script = spec.command[-1].replace("exec sleep 3600", "exit 0")
    other = subprocess.run(["sh", "-c", script], env={**os.environ, "RANK": "1"}, timeout=30)
    assert other.returncode == 0
