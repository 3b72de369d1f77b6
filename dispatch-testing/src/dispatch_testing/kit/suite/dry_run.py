"""Dry runs: validating and preparing a submission sends nothing."""

from __future__ import annotations

from collections.abc import Callable

from dispatch_testing.kit.view import Kit


class DryRunTests:
    def test_dry_run_hooks_send_nothing(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30, S-36: the optional ``dispatch_validate`` and ``dispatch_check`` accept a
        spec the backend runs, and an adapter with ``dispatch_prepare`` builds the
        ``Prepared`` its ``dispatch_send`` would send (what ``dispatch submit --dry-run``
        prints); none creates anything. Checking and preparing may read the scheduler (a
        queue's existence, a TrainJob's runtime) but never write to it."""
        job = new_job()
        spec = kit.harness.long_spec()
        kit.backend.validate(spec)
        kit.backend.check(spec)
        if kit.backend.prepares:
            prepared = kit.backend.prepare(job, 1, spec, False)
            assert prepared.parts, "dispatch_prepare prepared nothing"
        else:
            kit.backend.render(job, 1, spec, False)  # the deprecated text, if any
        assert kit.objects(job) == (), "a dry run created an object"
