"""One way to select live tests: every test of a ``test_*_live_*.py`` file carries the marker
``live(server=...)``, naming a server its fixtures start (or fail loudly trying), and no
other test does. The test command selects with ``-m``; a file that forgot the marker would
run, or be left out, by accident, so collection refuses it."""

from __future__ import annotations

from fnmatch import fnmatch

import pytest

SERVERS = ("slurm", "kubeflow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = [problem for item in items if (problem := live_marker_problem(item))]
    if wrong:
        raise pytest.UsageError("live marker:\n  " + "\n  ".join(sorted(set(wrong))))


def live_marker_problem(item: pytest.Item) -> str | None:
    """What is wrong with ``item``'s live marker, or None."""
    marker = item.get_closest_marker("live")
    in_live_file = fnmatch(item.path.name, "test_*_live_*.py")
    if marker is None:
        return (
            f"{item.path.name}: a live file's tests need live(server=...)" if in_live_file else None
        )
    if not in_live_file:
        return f"{item.nodeid}: marked live outside a test_*_live_*.py file"
    if marker.kwargs.get("server") not in SERVERS:
        return f"{item.path.name}: live(server=...) must name one of {', '.join(SERVERS)}"
    return None
