"""The test infrastructure lives here, not in the product wheel."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from dispatch_slurm_testing import cluster, harness


def test_the_start_script_is_package_data_and_the_checkout_links_to_it() -> None:
    script = cluster.start_script()
    assert script.is_file() and script.parent.name == "dispatch_slurm_testing"
    link = script.parents[3] / "dispatch-slurm" / "scripts" / "start-slurm.sh"
    assert link.resolve() == script.resolve()


def test_the_product_package_holds_no_scenario_driver() -> None:
    for module in ("dispatch_slurm.harness", "dispatch_slurm.provoke"):
        assert importlib.util.find_spec(module) is None, module


def test_an_unknown_kit_mode_is_refused_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_KIT", "everything")
    with pytest.raises(ValueError, match="DISPATCH_SLURM_KIT='everything'"):
        harness.SlurmHarness(live=True)


def test_own_cluster_mode_declares_the_destructive_scenarios_not_provokable() -> None:
    code = (
        "from dispatch_slurm_testing.harness import SlurmHarness, _DESTRUCTIVE\n"
        "h = SlurmHarness(live=True)\n"
        "missing = h.not_provokable()\n"
        "assert set(_DESTRUCTIVE) <= set(missing), missing\n"
        "assert all('own-cluster mode never' in missing[s] for s in _DESTRUCTIVE)\n"
        "print(sorted(missing))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, DISPATCH_SLURM_KIT="own-cluster"),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "node-lost" in done.stdout
