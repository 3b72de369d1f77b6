"""The ``simulated`` backend's entry point, present only while a test asks for it.

A plain ``pip install dispatch-testing`` must not add a production backend that forgets
everything when its process exits. Yet the kit proves a backend is found through
its ``dispatch.backends`` entry point alone (S-31), the simulated one included. So the entry
point lives in a small ``*.dist-info`` shipped inside this package, outside ``sys.path``;
:func:`register` puts its directory on ``sys.path``, where ``importlib.metadata`` finds it
like any installed distribution (``dispatch-testing-simulated``). The simulated harness
registers it when the kit builds it, and unregisters it when the kit closes it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: the directory holding ``dispatch_testing_simulated-<version>.dist-info``
DIRECTORY = str(Path(__file__).with_name("registered"))


def register() -> None:
    """Make ``dispatch.backends: simulated`` visible to every entry-point reader."""
    if DIRECTORY not in sys.path:
        sys.path.append(DIRECTORY)


def unregister() -> None:
    while DIRECTORY in sys.path:
        sys.path.remove(DIRECTORY)


def is_registered() -> bool:
    return DIRECTORY in sys.path


@contextmanager
def registered() -> Iterator[None]:
    """``with registered(): ...`` — the entry point exists inside, and only inside if it
    did not before."""
    was = is_registered()
    register()
    try:
        yield
    finally:
        if not was:
            unregister()
