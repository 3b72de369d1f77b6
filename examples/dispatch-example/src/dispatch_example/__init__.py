"""dispatch-example: a tiny third-party dispatch backend and its conformance harness."""
