"""Fixtures: ``receiver`` (a real HTTP server on loopback) and the CLI tests' ``sh``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli.cli_shell import sh
from notify.notify_receiver import Receiver

__all__ = ["receiver", "sh"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.hold.set()
    r.server.shutdown()
    r.server.server_close()
