"""Submit and tagging, discovery of many jobs, and reports that round-trip."""

from __future__ import annotations

from collections.abc import Callable

from dispatch import Cause, Discovery, Execution, ObjectView

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.suite.support import alive, not_provokable
from dispatch_testing.kit.view import Kit


class DiscoveryTests:
    def test_submit_is_tagged_and_discoverable(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30, S-34: an object is found by job id and submission number from the
        scheduler's own listing, not from the id submit returned."""
        job, other = new_job(), new_job()
        spec = kit.harness.long_spec()
        first = kit.backend.submit(job, 1, spec, False)
        second = kit.backend.submit(job, 2, spec, False)
        kit.backend.submit(other, 1, spec, False)
        assert first != second, "two submissions got the same object id"
        objects = kit.wait_for(
            job,
            lambda objs: {o.submission for o in objs} >= {1, 2},
            "listing both submissions",
        )
        by_number = {o.submission: o.object_id for o in objects}
        assert by_number == {1: first, 2: second}
        assert all(o.job_id == job for o in objects)

    def test_discovery_of_many_jobs_in_one_call(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-32: one discovery shows every asked job's objects; unknown ids are absent,
        not errors."""
        count = min(6, kit.declarations.max_discovery_batch or 6)
        jobs = [new_job() for _ in range(count)]
        for job in jobs:
            kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        unknown = [new_job() for _ in range(3)]
        asked = (jobs + unknown)[: kit.declarations.max_discovery_batch or None]
        expected = set(jobs) & set(asked)
        waited = 0.0
        while True:
            found = kit.discover(asked).by_job()
            assert not set(found) & set(unknown), "ids never submitted have objects"
            if set(found) == expected:
                break
            if not found and waited >= kit.harness.listing_grace:
                kit.fail_unlisted(jobs, waited)
            assert waited < kit.harness.timeout, (
                f"asked {len(asked)} ids, {count} submitted; after {waited:.0f}s found "
                f"objects for {sorted(found)} only"
            )
            kit.harness.wait(kit.harness.poll_interval)
            waited += kit.harness.poll_interval

    def test_discovery_costs_constant_calls(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-32: discovering N jobs costs the scheduler calls discovering one does.

        A backend may ask a little more when some object is in a given state (Slurm asks
        sinfo while a job runs), and the jobs start while we measure. So the N-job call
        comes first, and is compared with the dearest of the one-job calls after it.
        """
        batch = kit.declarations.max_discovery_batch or 12
        jobs = [new_job() for _ in range(min(12, batch))]
        for job in jobs:
            kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        try:
            start = kit.harness.calls()
            kit.discover(jobs)
            many = kit.harness.calls() - start
            one = 0
            for job in jobs:
                start = kit.harness.calls()
                kit.discover([job])
                one = max(one, kit.harness.calls() - start)
        except NotProvokable as exc:
            not_provokable(kit, exc)
        assert one >= 1, "discovery made no scheduler call: is calls() counting?"
        assert many <= one, (
            f"discovering {len(jobs)} jobs took {many} scheduler calls, one job took {one}: "
            "discovery must be one listing filtered by tag (S-32)"
        )

    def test_everything_reported_round_trips(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-6: every model the adapter reports encodes to names and decodes to itself."""
        quick, long = new_job(), new_job()
        kit.backend.submit(quick, 1, kit.harness.quick_spec(), False)
        kit.backend.submit(long, 1, kit.harness.long_spec(), False)
        kit.wait_for(quick, lambda objs: bool(objs) and not alive(objs), "ended")
        discovery = kit.discover([quick, long])
        assert Discovery.model_validate_json(discovery.model_dump_json()) == discovery
        for obj in discovery.objects:
            assert ObjectView.model_validate_json(obj.model_dump_json()) == obj
            for execution in obj.executions:
                assert Execution.model_validate_json(execution.model_dump_json()) == execution
            if obj.cause is not None:
                assert Cause.model_validate_json(obj.cause.model_dump_json()) == obj.cause
                assert f'"{obj.cause.kind.value}"' in obj.cause.model_dump_json()
