"""A plain install of dispatch-testing adds no production backend: the simulated
backend's entry point exists only while a test registers it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
from dispatch import Registry
import dispatch_testing.simulated as sim
names = lambda: "simulated" in Registry.from_entry_points().names()
print(names())
with sim.registered():
    print(names(), Registry.from_entry_points().get("simulated").declarations.name)
print(names())
from dispatch_testing.simulated.harness import SimulatedHarness
harness = SimulatedHarness()
print(names())
harness.close()
print(names())
"""


def test_sim_backend_is_registered_only_when_asked() -> None:
    """S-31: a fresh interpreter lists no 'simulated' backend until a test asks for it;
    while registered it loads through its entry point alone; then it is gone again."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == ["False", "True simulated", "False", "True", "False"]
