"""The conformance kit (dispatch-testing) run against the local backend, with the harness
dispatch-testing ships for it (``dispatch-conformance local`` runs the same): each ending
the local backend declares is provoked with real processes.

Every kit test runs; the harness says what it cannot do (count scheduler calls: there is
no remote scheduler) and the kit reports that as xfailed with the reason.
"""

from __future__ import annotations

from dispatch_testing.kit import BackendConformance
from dispatch_testing.kit.local_harness import LocalHarness


class TestLocalConformance(BackendConformance):
    """S-2, S-4, S-5, S-6, S-28, S-30, S-31, S-32: the kit's whole suite on ``local``."""

    harness_class = LocalHarness
