"""The conformance kit's tests, as one class an adapter's test module can mix in.

Two ways to run it against a backend:

- ``dispatch-conformance NAME`` (or ``pytest --dispatch-backend NAME``): the harness comes
  from the entry point ``dispatch.harnesses: NAME``;
- fsspec style, in your own tests::

      from dispatch_testing.kit import BackendConformance
      from dispatch_mysched.harness import MySchedHarness

      class TestMySched(BackendConformance):
          harness_class = MySchedHarness

Tests state the capability or scenario they need, never a backend's name. A capability the
backend declares is tested; a job asking for one it does not declare is submitted through
the core, which must refuse it before any hook is called (``refusals``): the adapter is
never handed what it did not declare. A scenario is parametrised in when the
declarations make it required (:func:`dispatch_testing.kit.harness.required_scenarios`) or
the harness claims it. Overriding a test is allowed only as a strict xfail with a reason.

One module per area, each a class of tests that :class:`BackendConformance` combines:
``declarations``, ``discovery`` (submit and tagging, many jobs, round trips),
``capabilities`` (with ``refusals``, ``logs``, ``launch_contract``, ``exclusion`` and
the gate in ``stop``), ``dry_run``, ``stop``, ``unreachable``, ``endings`` (each scenario's cause),
``scripts``, ``supervised`` (the core supervisor end to end) and ``sweeps`` (a group of
jobs, one array with ``arrays``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar

import pytest

from dispatch_testing.kit.harness import Harness
from dispatch_testing.kit.suite.capabilities import CapabilityTests
from dispatch_testing.kit.suite.declarations import DeclarationTests
from dispatch_testing.kit.suite.discovery import DiscoveryTests
from dispatch_testing.kit.suite.dry_run import DryRunTests
from dispatch_testing.kit.suite.endings import EndingTests
from dispatch_testing.kit.suite.scripts import ScriptTests
from dispatch_testing.kit.suite.stop import StopTests
from dispatch_testing.kit.suite.supervised import SupervisedTests
from dispatch_testing.kit.suite.sweeps import SweepTests
from dispatch_testing.kit.suite.unreachable import UnreachableTests
from dispatch_testing.kit.view import Kit, kit_for


# pytest collects a base class's tests before its subclasses', the last base first: the
# kit runs declarations first and the end-to-end test last
class BackendConformance(
    SweepTests,
    SupervisedTests,
    ScriptTests,
    EndingTests,
    UnreachableTests,
    StopTests,
    DryRunTests,
    CapabilityTests,
    DiscoveryTests,
    DeclarationTests,
):
    """Mix in and set ``harness_class`` (or run with ``--dispatch-backend``)."""

    __dispatch_kit__: ClassVar[bool] = True
    harness_class: ClassVar[type[Harness] | None] = None

    @pytest.fixture
    def kit(self, request: pytest.FixtureRequest) -> Kit:
        return kit_for(request.config, type(self))

    @pytest.fixture
    def new_job(self, kit: Kit) -> Iterator[Callable[[], str]]:
        made: list[str] = []

        def make() -> str:
            made.append(kit.job_id())
            return made[-1]

        yield make
        if made and kit.problem == "":
            kit.stop_all(made)


__all__ = ["BackendConformance"]
