"""The other way to run the kit: mixed into the adapter's own test-suite (fsspec style).

``dispatch-conformance example`` runs the same tests from the entry points alone.
"""

from dispatch_example.harness import ExampleHarness
from dispatch_testing.kit import BackendConformance


class TestExampleConformance(BackendConformance):
    harness_class = ExampleHarness
