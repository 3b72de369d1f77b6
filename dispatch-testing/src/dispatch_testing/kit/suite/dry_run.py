"""Dry runs: validate and render send nothing."""

from __future__ import annotations

from collections.abc import Callable

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.view import Kit


class DryRunTests:
    def test_dry_run_hooks_send_nothing(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30, S-36: the optional ``dispatch_validate`` accepts a spec the backend runs and
        ``dispatch_render`` shows the submission as text; neither contacts the scheduler
        (``dispatch submit --dry-run`` runs on a machine without one) or creates anything."""
        job = new_job()
        spec = kit.harness.long_spec()
        try:
            before = kit.harness.calls()
        except NotProvokable:
            before = None
        kit.backend.validate(spec)
        rendered = kit.backend.render(job, 1, spec, False)
        if before is not None:
            assert kit.harness.calls() == before, "validate or render contacted the scheduler"
        if hasattr(kit.backend.plugin, "dispatch_render"):
            assert rendered is not None and rendered.strip(), "dispatch_render rendered nothing"
        else:
            assert rendered is None
        assert kit.objects(job) == (), "a dry run created an object"
