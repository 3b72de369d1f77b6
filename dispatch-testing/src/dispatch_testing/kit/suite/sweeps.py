"""A sweep through the core supervisor: one group of jobs, each member on its own; one
scheduler object for the group's first submissions when the backend declares ``arrays``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from dispatch import ArrayMember, Backend, Capability, JobSpec, hookimpl

from dispatch_testing.kit.harness import NotProvokable, Scenario
from dispatch_testing.kit.suite.support import not_provokable
from dispatch_testing.kit.view import Kit
from dispatch_testing.provoking import ProvokingPlugin

#: members of the kit's sweep, and how many may run at once
MEMBERS = 4
MAX_RUNNING = 2


class _SweepPlugin(ProvokingPlugin):
    """The backend as the supervisor sees it: each single submission 1 made by the
    harness's ``success`` scenario (as the end-to-end test does), and an array (with
    ``arrays``) sent as it is, the quick job for every member; both counted."""

    def __init__(self, kit: Kit, real: Backend, provoke: bool) -> None:
        super().__init__(kit.harness, real, {1: Scenario.SUCCESS} if provoke else {})
        self.singles: list[tuple[str, int]] = []
        self.arrays: list[list[str]] = []

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        self.singles.append((job_id, submission))
        return super().dispatch_submit(job_id, submission, spec, gated)

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        self.arrays.append([m.job_id for m in members])
        return self.real.submit_array(group_id, members, max_running)


class SweepTests:
    def test_a_sweep_is_one_group_each_member_submitted_and_ended_on_its_own(
        self, kit: Kit, tmp_path: Any
    ) -> None:
        """S-12, S-19: a sweep of four quick members, at most two at once, through the
        core supervisor. With ``arrays`` declared the members' first submissions are one
        ``dispatch_submit_array`` call returning one object per member; without it, one
        submit per member, the supervisor's slots keeping two at most. Either way
        discovery shows each member's object under the member's job id, and every member
        succeeds with its one submission."""
        from dispatch import RecoveryPolicy, Registry, State
        from dispatch.job_records import create_group, load_job
        from dispatch.store import open_store
        from dispatch.supervisor import Supervisor
        from dispatch.sweep import new_group_id

        arrays = Capability.ARRAYS in kit.declarations.capabilities
        reasons = kit.harness.not_provokable()
        provoke = not arrays and Scenario.SUCCESS in kit.harness.scenarios()
        if provoke and Scenario.SUCCESS in reasons:
            not_provokable(kit, NotProvokable(reasons[Scenario.SUCCESS]))
        plugin = _SweepPlugin(kit, kit.backend, provoke)
        registry = Registry.from_plugins({kit.name: plugin})
        store = open_store(f"sqlite:///{tmp_path}/record.db")
        group_id = new_group_id()
        quick = kit.harness.quick_spec()
        specs = [
            quick.model_copy(
                update={"env": {**quick.env, "DISPATCH_SWEEP_INDEX": str(i)}, "name": f"kit-{i}"}
            )
            for i in range(MEMBERS)
        ]
        ids = create_group(
            store,
            registry,
            backend=kit.name,
            specs=specs,
            policy=RecoveryPolicy(rules=()),
            group_id=group_id,
            values=[{"i": str(i)} for i in range(MEMBERS)],
            max_running=MAX_RUNNING,
            now=kit.now(),
        )
        supervisor = Supervisor(store, registry, owner="dispatch-kit", clock=kit.now)
        ended: Callable[[], bool] = lambda: all(  # noqa: E731
            load_job(store, j).outcome is not None for j in ids
        )
        waited, limit = 0.0, kit.harness.timeout * 3
        try:
            while True:
                supervisor.tick(kit.now())
                if ended():
                    break
                if waited > limit:
                    jobs = [load_job(store, j) for j in ids]
                    pytest.fail(f"after {waited:.0f}s the sweep has not ended: {jobs}")
                kit.harness.wait(kit.harness.poll_interval)
                waited += kit.harness.poll_interval
        except NotProvokable as exc:
            not_provokable(kit, exc)
        finally:
            if not ended():
                kit.stop_all(ids)
        jobs = [load_job(store, j) for j in ids]
        objects = [j.submissions[0].object_id if j.submissions else None for j in jobs]
        for job in jobs:
            assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job
            assert len(job.submissions) == 1, f"{job.job_id}: {job.submissions}"
        assert len(set(objects)) == MEMBERS, f"members share an object: {objects}"
        if arrays:
            assert plugin.arrays == [ids], (
                f"a backend declaring arrays got {plugin.arrays} arrays for the sweep {ids}"
            )
            assert plugin.singles == [], f"submitted one by one as well: {plugin.singles}"
        else:
            assert plugin.arrays == [], "dispatch_submit_array called without arrays"
            assert sorted(plugin.singles) == sorted((j, 1) for j in ids)
        seen = {o.job_id: o.object_id for o in kit.discover(ids).objects if o.submission == 1}
        assert seen == dict(zip(ids, objects, strict=True)), (
            f"discovery shows {seen}, the record {objects}"
        )

    def test_a_sweeps_dry_run_builds_its_one_array_and_sends_nothing(self, kit: Kit) -> None:
        """S-30: a backend that declares ``arrays`` and shows the array it sends
        (``dispatch_prepare_array``, optional) builds one object named by the group for
        the sweep's members and sends nothing: discovery finds no object under any
        member. A backend without ``arrays`` is never asked (the core checks the
        declaration first)."""
        from dispatch.sweep import member_id, new_group_id

        if Capability.ARRAYS not in kit.declarations.capabilities:
            assert not kit.backend.prepares_arrays, "prepares arrays without declaring arrays"
            return
        if not kit.backend.prepares_arrays:
            return  # optional: the dry run shows the members' specs instead
        group_id = new_group_id()
        quick = kit.harness.quick_spec()
        members = [
            ArrayMember(
                job_id=member_id(group_id, i),
                index=i,
                spec=quick.model_copy(
                    update={"env": {**quick.env, "DISPATCH_SWEEP_INDEX": str(i)}}
                ),
            )
            for i in range(MEMBERS)
        ]
        prepared = kit.backend.prepare_array(group_id, members, MAX_RUNNING)
        assert prepared is not None, "the kit's quick members could not share one array"
        assert prepared.job_id == group_id, f"the array is named {prepared.job_id!r}"
        found = kit.discover([m.job_id for m in members]).objects
        assert not found, f"a dry run sent something: {found}"


def check_arrays(kit: Kit, record: Any, declared: bool) -> None:
    """S-30, S-36: recording a sweep asks a backend without ``arrays`` nothing (its
    members go one submit each, :class:`SweepTests`), and a backend with it only whether
    its scheduler takes such an array (``dispatch_check_array``), which a two-member
    sweep must pass."""
    from dispatch import RecoveryPolicy, Registry
    from dispatch.job_records import create_group
    from dispatch.store import open_store
    from dispatch.sweep import new_group_id

    from dispatch_testing.kit.suite.refusals import Watching

    watching = Watching(kit.backend)
    registry = Registry.from_plugins({kit.name: watching})
    store = open_store(f"sqlite:///{record}")
    quick = kit.harness.quick_spec()
    ids = create_group(
        store,
        registry,
        backend=kit.name,
        specs=[quick, quick],
        policy=RecoveryPolicy(rules=()),
        group_id=new_group_id(),
        values=[{"i": "0"}, {"i": "1"}],
        max_running=1,
        now=kit.now(),
    )
    assert len(ids) == 2 and len(store.jobs()) == 2
    asked = [("check_array", (2, 1))] if declared else []
    assert watching.calls == asked, (
        f"recording a sweep asked the backend {watching.calls}, expected {asked}"
    )
