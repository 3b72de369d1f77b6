"""The module ``dispatch-conformance NAME`` runs: the kit's suite, its harness chosen by
``--dispatch-backend NAME``."""

from dispatch_testing.kit.suite import BackendConformance


class TestConformance(BackendConformance):
    """Every kit test, against the backend named on the command line."""
