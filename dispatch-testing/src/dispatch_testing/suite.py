"""The conformance kit's tests, as one class an adapter's test module can mix in.

Two ways to run it against a backend:

- ``dispatch-conformance NAME`` (or ``pytest --dispatch-backend NAME``): the harness comes
  from the entry point ``dispatch.harnesses: NAME``;
- fsspec style, in your own tests::

      from dispatch_testing.suite import BackendConformance
      from dispatch_mysched.harness import MySchedHarness

      class TestMySched(BackendConformance):
          harness_class = MySchedHarness

Tests state the capability or scenario they need, never a backend's name. A capability the
backend declares is tested; one it does not declare is tested to be refused cleanly (a
``DispatchError`` at submit, nothing created). A scenario is parametrised in when the
declarations make it required (:func:`dispatch_testing.harness.required_scenarios`) or the
harness claims it. Overriding a test is allowed only as a strict xfail with a reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from dispatch import (
    Capability,
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    Execution,
    JobSpec,
    ObjectView,
    Phase,
    Provenance,
    Resources,
    SubmitRefused,
    Unreachable,
)
from dispatch.model.errors import DispatchError

from dispatch_testing.harness import (
    EXPECTED,
    MULTI_NODE_SCENARIOS,
    Harness,
    NotProvokable,
    Provoked,
    Scenario,
)
from dispatch_testing.kit import Kit
from dispatch_testing.plugin import kit_for

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="kit", detail="kit stop")


def _alive(objects: tuple[ObjectView, ...]) -> bool:
    return any(o.alive for o in objects)


def _object(objects: tuple[ObjectView, ...], object_id: str) -> ObjectView | None:
    return next((o for o in objects if o.object_id == object_id), None)


def _with_resources(spec: JobSpec, **changes: Any) -> JobSpec:
    resources = Resources.model_validate({**spec.resources.model_dump(), **changes})
    return spec.model_copy(update={"resources": resources})


def _spec_needing(spec: JobSpec, capability: Capability) -> JobSpec:
    if capability is Capability.TIME_LIMIT:
        return _with_resources(spec, time_limit=timedelta(hours=1))
    if capability is Capability.MULTI_NODE:
        return _with_resources(spec, nodes=2)
    if capability is Capability.GPUS:
        return _with_resources(spec, gpus_per_node=1)
    if capability is Capability.EXCLUDE_NODES:
        return spec.model_copy(update={"exclude_nodes": frozenset({"kit-node-to-avoid"})})
    return spec


#: The kit's script: Python, which sh cannot run (sh stops at its syntax error, exit 2).
SCRIPT = """{shebang}
# The dispatch kit's script: JobSpec.script is this text, run by its own #! line.
import sys
print("dispatch kit: the script ran under", sys.executable.rsplit("/", 1)[-1])
sys.exit(0)
"""
#: S-41: what every task of a multi-node job sees
CONTRACT = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    "NNODES",
    "LOCAL_WORLD_SIZE",
)


def _not_provokable(kit: Kit, exc: NotProvokable) -> None:
    pytest.xfail(f"not provokable on {kit.name} ({kit.harness.tier}): {exc}")


class BackendConformance:
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

    # -- declarations --------------------------------------------------------------------

    def test_declarations_are_well_formed(self, kit: Kit) -> None:
        """S-25, S-30, S-39: the backend describes itself consistently, without asking the
        scheduler, and its declarations survive encode/decode (S-6)."""
        d = kit.declarations
        assert d.name == kit.name
        assert d.node_loss_window > timedelta(0), "node_loss_window must be positive"
        for kind, window in d.pending_windows.items():
            assert window > timedelta(0), f"pending window for {kind.value} must be positive"
            assert kind in d.reports, f"a pending window for {kind.value!r}, not in reports"
        assert CauseKind.UNKNOWN in d.reports, (
            "every adapter can meet an answer it cannot map (S-4): reports must list 'unknown'"
        )
        assert CauseKind.DUPLICATE not in d.reports, (
            "'duplicate' is dispatch's own cause for a second object it stops; a backend "
            "never reports it"
        )
        if Capability.TIME_LIMIT in d.capabilities:
            assert CauseKind.TIME_LIMIT in d.reports, "time-limit capability without its cause"
        assert Declarations.model_validate_json(d.model_dump_json()) == d
        try:
            before = kit.harness.calls()
        except NotProvokable:
            before = None
        again = kit.backend.plugin.dispatch_declare()  # type: ignore[attr-defined]
        assert again == d, "dispatch_declare answers differently on a second call"
        if before is not None:
            assert kit.harness.calls() == before, "dispatch_declare contacted the scheduler"

    def test_registered_by_its_entry_point(self, kit: Kit) -> None:
        """S-31: the backend is found through the ``dispatch.backends`` entry point alone,
        loads from it with no arguments, and declares the same vocabulary."""
        from dispatch import Registry

        registry = Registry.from_entry_points()
        assert kit.name in registry.names(), (
            f"no 'dispatch.backends' entry point is named {kit.name!r}: "
            f"installed: {registry.names()}, broken: {registry.broken}"
        )
        loaded = registry.get(kit.name).declarations
        mine = kit.declarations
        assert (loaded.reports, loaded.capabilities, loaded.native_actions) == (
            mine.reports,
            mine.capabilities,
            mine.native_actions,
        ), "the entry point's declarations differ from the harness's backend"

    # -- submit and discover -------------------------------------------------------------

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
            _not_provokable(kit, exc)
        assert one >= 1, "discovery made no scheduler call: is calls() counting?"
        assert many <= one, (
            f"discovering {len(jobs)} jobs took {many} scheduler calls, one job took {one}: "
            "discovery must be one listing filtered by tag (S-32)"
        )

    # -- capabilities --------------------------------------------------------------------

    def test_capability(self, kit: Kit, capability: Capability, new_job: Callable[[], str]) -> None:
        """S-28, S-30, S-41, S-43, S-46: a declared capability works; an undeclared one is
        refused with ``SubmitRefused`` at submit and creates nothing (never silently
        ignored), or for ``logs`` is not implemented at all."""
        job = new_job()
        declared = capability in kit.declarations.capabilities
        gated = capability is Capability.GATING
        if capability is Capability.LOGS:
            self._check_logs(kit, job, new_job) if declared else self._check_no_logs(kit)
            return
        spec = _spec_needing(kit.harness.long_spec(), capability)
        if not declared:
            with pytest.raises(DispatchError) as refused:
                kit.backend.submit(job, 1, spec, gated)
            raised = type(refused.value).__name__
            if refused.value.__cause__ is not None:  # the core's wrapping of a stray error
                raised = f"{type(refused.value.__cause__).__name__} ({raised})"
            assert isinstance(refused.value, SubmitRefused), (
                f"a submit asking for the undeclared capability {capability.value!r} raised "
                f"{raised}; the hook spec names SubmitRefused, which the core records as a "
                "failed submission (any other error is a fault in the backend)"
            )
            assert str(refused.value).strip(), "the refusal must say what is not supported"
            assert kit.objects(job) == (), "a refused submit created an object"
            return
        if capability is Capability.MULTI_NODE:
            self._check_contract(kit, job)
            return
        if capability is Capability.EXCLUDE_NODES:
            self._check_exclusion(kit, job)
            return
        object_id = kit.backend.submit(job, 1, spec, gated)
        if not gated:
            kit.wait_for(job, _alive, "listed alive")
            return
        self._check_gate(kit, job, object_id)

    def _check_no_logs(self, kit: Kit) -> None:
        assert not hasattr(kit.backend.plugin, "dispatch_logs"), (
            "the backend implements dispatch_logs but does not declare the logs capability"
        )

    def _check_logs(self, kit: Kit, job: str, new_job: Callable[[], str]) -> None:
        """S-46: what each submission printed, that submission's only; resumable."""
        words = {n: f"kit-logs-{uuid.uuid4().hex[:8]}-submission-{n}" for n in (1, 2)}
        try:  # a tier whose nodes run no programs (KWOK) cannot make a job print
            specs = {n: kit.harness.printing_spec(w) for n, w in words.items()}
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        ids = {n: kit.backend.submit(job, n, specs[n], False) for n in words}
        kit.wait_for(
            job,
            lambda objs: {o.submission for o in objs if not o.alive} >= {1, 2},
            "both submissions ended",
        )
        for n, word in words.items():
            chunks = list(kit.backend.logs(job, n, ids[n]))
            assert all(isinstance(c, bytes) for c in chunks), "dispatch_logs yields bytes"
            text = b"".join(chunks)
            assert word.encode() in text, f"submission {n} printed {word!r}; its logs: {text!r}"
            other = words[3 - n].encode()
            assert other not in text, f"the logs of submission {n} hold submission {3 - n}'s"
            at = text.index(word.encode())
            rest = b"".join(kit.backend.logs(job, n, ids[n], offset=at))
            assert rest == text[at:], f"logs from offset {at} are not the rest: {rest!r}"

    def _check_contract(self, kit: Kit, job: str) -> None:
        """S-41: every rank sees one MASTER_ADDR/PORT, its own RANK, and the same sizes."""
        spec = kit.harness.contract_spec()
        nodes, per = spec.resources.nodes, spec.resources.tasks_per_node
        assert nodes >= 2, "Harness.contract_spec must ask for at least two nodes"
        object_id = kit.backend.submit(job, 1, spec, False)
        objects = kit.wait_for(job, lambda objs: bool(objs) and not _alive(objs), "ended")
        obj = _object(objects, object_id)
        assert obj is not None and obj.cause is not None and obj.cause.kind is CauseKind.NONE, (
            f"the job printing its environment did not succeed: {obj and obj.cause}"
        )
        ran_on = obj.executions[-1].nodes if obj.executions else ()
        assert len(ran_on) in (0, nodes), f"asked for {nodes} nodes, ran on {ran_on}"
        world = nodes * per
        try:
            envs = kit.harness.task_environments(kit.backend, job, object_id, world)
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        assert len(envs) == world, f"{len(envs)} environments for {world} ranks"
        for rank, env in enumerate(envs):
            missing = [k for k in CONTRACT if not env.get(k)]
            assert not missing, f"rank {rank} does not see {missing} (S-41)"
            assert env["RANK"] == str(rank), f"rank {rank}'s task says RANK={env['RANK']}"
            sizes = (env["WORLD_SIZE"], env["NNODES"], env["LOCAL_WORLD_SIZE"])
            assert sizes == (str(world), str(nodes), str(per)), (
                f"rank {rank}: WORLD_SIZE, NNODES, LOCAL_WORLD_SIZE = {sizes}, "
                f"expected {world}, {nodes}, {per}"
            )
            ranks = (env["NODE_RANK"], env["LOCAL_RANK"])
            assert ranks == (str(rank // per), str(rank % per)), (
                f"rank {rank}: NODE_RANK, LOCAL_RANK = {ranks}, expected "
                f"{rank // per}, {rank % per}"
            )
        for key in ("MASTER_ADDR", "MASTER_PORT"):
            values = {env[key] for env in envs}
            assert len(values) == 1, f"the ranks disagree on {key}: {sorted(values)} (S-41)"
        port = envs[0]["MASTER_PORT"]
        assert port.isdigit() and 0 < int(port) < 65536, f"MASTER_PORT={port!r}"

    def _check_exclusion(self, kit: Kit, job: str) -> None:
        """S-43: after a node-lost ending, a submission excluding the lost node keeps off
        it, although the node is back and would otherwise be chosen again."""
        multi = Capability.MULTI_NODE in kit.declarations.capabilities
        scenario = Scenario.NODE_LOST_OF_N if multi else Scenario.NODE_LOST
        reasons = kit.harness.not_provokable()
        if scenario in reasons:
            _not_provokable(kit, NotProvokable(reasons[scenario]))
        if scenario not in kit.harness.scenarios():
            pytest.fail(
                f"{kit.name} declares exclude-nodes; the kit checks it after a "
                f"{scenario.value!r} ending, which its harness neither provokes nor explains",
                pytrace=False,
            )
        try:
            provoked = kit.harness.provoke(scenario, kit.backend, job)
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        first = provoked.object_id

        def lost(objs: tuple[ObjectView, ...]) -> bool:
            obj = _object(objs, first) if first else None
            return (
                obj is not None and obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST
            )

        objects = kit.wait_for(job, lost, "showing node-lost", timeout=provoked.timeout)
        obj = _object(objects, first or "")
        assert obj is not None and obj.cause is not None
        avoid = frozenset(obj.cause.nodes)
        assert avoid, (
            "a node-lost cause must name the lost node in Cause.nodes (S-42): there is "
            "nothing for exclude-nodes to keep off"
        )
        if obj.alive:
            kit.backend.stop(obj.object_id, STOP)
            kit.wait_for(job, lambda objs: not _alive(objs), "the first object ended")
        kit.harness.restore_nodes(avoid)
        spec = kit.harness.multi_node_spec() if multi else kit.harness.long_spec()
        second = kit.backend.submit(job, 2, spec.model_copy(update={"exclude_nodes": avoid}), False)

        def running(objs: tuple[ObjectView, ...]) -> bool:
            mine = _object(objs, second)
            return mine is not None and mine.phase is Phase.RUNNING and bool(mine.executions)

        objects = kit.wait_for(job, running, "submission 2 running")
        again = _object(objects, second)
        assert again is not None
        nodes = set(again.executions[-1].nodes)
        assert nodes, "a running object must list its nodes (Execution.nodes)"
        assert not nodes & avoid, (
            f"submission 2 excluded {sorted(avoid)} and runs on {sorted(nodes)} (S-43)"
        )

    def _check_gate(self, kit: Kit, job: str, object_id: str) -> None:
        """Gated: shows gated and never starts until opened; then released, then runs."""
        objects = kit.wait_for(job, lambda objs: bool(objs), "listed")
        for _ in range(3):
            obj = _object(objects, object_id)
            assert obj is not None and obj.phase is Phase.GATED, (
                f"a gated object must show phase gated until its gate opens: {obj}"
            )
            assert all(e.started_at is None for e in obj.executions), "a gated object started"
            kit.harness.wait(kit.harness.poll_interval)
            objects = kit.objects(job)
        kit.backend.open_gate(object_id)
        kit.backend.open_gate(object_id)  # idempotent
        kit.wait_for(
            job,
            lambda objs: any(o.phase is Phase.RUNNING for o in objs),
            "running after its gate opened",
            wrong=lambda objs: "ended instead of running" if not _alive(objs) else None,
        )

    # -- dry runs ------------------------------------------------------------------------

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

    # -- stop ----------------------------------------------------------------------------

    def test_stop_is_idempotent(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30: stop ends the object; stopping it again, and again once ended, is not an
        error. What stays listed ends as cancelled."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        kit.wait_for(job, lambda objs: any(o.phase is Phase.RUNNING for o in objs), "running")
        kit.backend.stop(object_id, STOP)
        kit.backend.stop(object_id, STOP)
        objects = kit.wait_for(job, lambda objs: not _alive(objs), "ended after stop")
        obj = _object(objects, object_id)
        if obj is not None:
            assert obj.cause is not None and obj.cause.kind is CauseKind.CANCELLED, (
                f"a stopped object ends cancelled, not {obj.cause}"
            )
        kit.backend.stop(object_id, STOP)

    def test_stopping_an_ended_object_keeps_its_ending(
        self, kit: Kit, new_job: Callable[[], str]
    ) -> None:
        """S-30: stopping an object that already ended is not an error and does not
        rewrite how it ended."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.quick_spec(), False)
        objects = kit.wait_for(job, lambda objs: bool(objs) and not _alive(objs), "ended")
        before = _object(objects, object_id)
        assert before is not None and before.cause is not None
        kit.backend.stop(object_id, STOP)
        after = _object(kit.objects(job), object_id)
        if after is not None:
            assert after.cause is not None and after.cause.kind is before.cause.kind, (
                f"stop rewrote an ended object's cause: {before.cause} -> {after.cause}"
            )

    # -- unreachable ---------------------------------------------------------------------

    def test_unreachable_raises_never_a_state(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-5: every call that needs an unreachable scheduler raises Unreachable; none
        answers with a state, an empty listing or a silent success."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        kit.wait_for(job, _alive, "listed alive")
        try:
            with kit.harness.unreachable():
                calls: dict[str, Callable[[], object]] = {
                    "discover": lambda: kit.backend.discover([job]),
                    "submit": lambda: kit.backend.submit(job, 2, kit.harness.long_spec(), False),
                    "stop": lambda: kit.backend.stop(object_id, STOP),
                }
                if Capability.GATING in kit.declarations.capabilities:
                    calls["open_gate"] = lambda: kit.backend.open_gate(object_id)
                if Capability.LOGS in kit.declarations.capabilities:
                    calls["logs"] = lambda: list(kit.backend.logs(job, 1, object_id))
                answered = {}
                for what, call in calls.items():
                    try:
                        answered[what] = call()
                    except Unreachable:
                        continue
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        assert not answered, (
            f"with the scheduler unreachable these calls answered instead of raising "
            f"Unreachable: {answered}"
        )
        assert _object(kit.objects(job), object_id) is not None, (
            "reachable again, the object is back"
        )

    # -- endings -------------------------------------------------------------------------

    def test_scenario(self, kit: Kit, scenario: Scenario, new_job: Callable[[], str]) -> None:
        """S-2, S-3, S-4, S-26, S-38: each ending the backend declares is provoked and
        classified right: kind, provenance, exit code, verbatim detail."""
        reasons = kit.harness.not_provokable()
        if scenario in reasons:
            _not_provokable(kit, NotProvokable(reasons[scenario]))
        if scenario not in kit.harness.scenarios():
            pytest.fail(
                f"{kit.name} declares what makes {scenario.value!r} required, but its harness "
                "neither provokes it (scenarios()) nor says why not (not_provokable())",
                pytrace=False,
            )
        job = new_job()
        try:
            provoked = kit.harness.provoke(scenario, kit.backend, job)
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        if provoked.refused is not None:
            assert scenario is Scenario.LAUNCH_FAILED, f"{scenario.value}: submit was refused"
            assert provoked.refused.detail.strip(), "a refusal needs the scheduler's words"
            assert not _alive(kit.objects(job)), "a refused submit left a live object"
            return
        expected = EXPECTED[scenario]
        object_id = provoked.object_id

        def mine(objs: tuple[ObjectView, ...]) -> ObjectView | None:
            return _object(objs, object_id) if object_id else (objs[0] if objs else None)

        def done(objs: tuple[ObjectView, ...]) -> bool:
            obj = mine(objs)
            if obj is None or obj.phase not in expected.phases:
                return False
            if scenario is Scenario.NATIVE_RECOVERY:
                return len(obj.executions) >= 2 and obj.executions[0].cause is not None
            return obj.cause is not None and obj.cause.kind is expected.kind

        def wrong(objs: tuple[ObjectView, ...]) -> str | None:
            obj = mine(objs)
            if obj is None or obj.alive or expected.kind is None:
                return None
            got = obj.cause.kind.value if obj.cause else "no cause"
            if Phase.ENDED not in expected.phases:
                return f"{scenario.value}: expected a live {expected.kind.value}, it ended {got}"
            if got != expected.kind.value:
                return f"{scenario.value}: misclassified as {got}, expected {expected.kind.value}"
            return None

        objects = kit.wait_for(
            job, done, f"showing {scenario.value}", timeout=provoked.timeout, wrong=wrong
        )
        obj = mine(objects)
        assert obj is not None
        if scenario is Scenario.NATIVE_RECOVERY:
            self._check_native(kit, obj, provoked)
        else:
            self._check_cause(obj, scenario, provoked)
        assert ObjectView.model_validate_json(obj.model_dump_json()) == obj

    def _check_cause(self, obj: ObjectView, scenario: Scenario, provoked: Provoked) -> None:
        cause = obj.cause
        assert cause is not None
        expected = EXPECTED[scenario]
        assert cause.provenance in expected.provenances, (
            f"{scenario.value}: provenance {cause.provenance.value}, expected one of "
            f"{sorted(p.value for p in expected.provenances)}"
        )
        if cause.kind is CauseKind.NON_ZERO_EXIT:
            assert provoked.exit_code, "the harness must say which non-zero exit it provoked"
            assert cause.exit_code == provoked.exit_code, (
                f"exit code {cause.exit_code}, the job exited {provoked.exit_code}"
            )
        if cause.kind is CauseKind.NONE:
            assert cause.exit_code in (0, None), f"success with exit code {cause.exit_code}"
        if provoked.detail:
            assert provoked.detail in cause.detail, (
                f"{scenario.value}: detail must keep the scheduler's words verbatim: "
                f"{provoked.detail!r} not in {cause.detail!r}"
            )
        if scenario is Scenario.UNMAPPABLE:
            assert provoked.raw, "the harness must return the raw answer it injected"
            assert provoked.raw in cause.detail, (
                f"unknown must carry the scheduler's answer verbatim: {provoked.raw!r} not in "
                f"{cause.detail!r}"
            )
        if scenario in MULTI_NODE_SCENARIOS:
            ran_on = obj.executions[-1].nodes if obj.executions else ()
            assert len(ran_on) >= 2, (
                f"{scenario.value}: the object ran on {ran_on}; a multi-node scenario needs a "
                "job of at least two nodes listing them (Execution.nodes)"
            )
            assert provoked.nodes, (
                f"{scenario.value}: the harness must say which node it made fail (Provoked.nodes)"
            )
        if provoked.nodes:
            assert set(cause.nodes) == set(provoked.nodes), (
                f"{scenario.value}: the cause blames nodes {list(cause.nodes)}, the harness "
                f"made {list(provoked.nodes)} fail: Cause.nodes names exactly the node lost "
                "or whose rank failed, never the ones killed in its wake (S-42)"
            )
        if provoked.rank is not None:
            assert cause.rank == provoked.rank, (
                f"{scenario.value}: the cause names rank {cause.rank}, rank {provoked.rank} "
                "failed (S-42)"
            )
        if obj.phase is Phase.ENDED and obj.executions and scenario is not Scenario.UNMAPPABLE:
            last = obj.executions[-1].cause
            assert last is not None and last.kind is cause.kind, (
                f"the last execution ended {last}, the object says {cause.kind.value}"
            )

    def _check_native(self, kit: Kit, obj: ObjectView, provoked: Provoked) -> None:
        assert kit.declarations.native_actions, "native recovery on a backend declaring none"
        first = obj.executions[0].cause
        assert first is not None and first.kind is provoked.native_cause, (
            f"the first execution ended {first}, provoked {provoked.native_cause}"
        )
        assert obj.executions[1].index > obj.executions[0].index

    # -- scripts -------------------------------------------------------------------------

    def test_script_runs_by_its_own_interpreter(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30: ``JobSpec.script`` is the script file's text, run by its own ``#!`` line
        (here Python), never fed to sh: sh stops at the first Python line (exit 2)."""
        script = SCRIPT.format(shebang=kit.harness.python_shebang)
        try:
            spec = kit.harness.script_spec(script)
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        assert spec.script == script, "Harness.script_spec must submit the script as given"
        job = new_job()
        object_id = kit.backend.submit(job, 1, spec, False)
        objects = kit.wait_for(job, lambda objs: bool(objs) and not _alive(objs), "ended")
        obj = _object(objects, object_id)
        assert obj is not None and obj.cause is not None
        assert obj.cause.kind is CauseKind.NONE, (
            f"the Python script ended {obj.cause.kind.value} (exit {obj.cause.exit_code}, "
            f"{obj.cause.detail!r}): a script must run by its own #! line "
            f"({kit.harness.python_shebang}), not through sh, which fails it with exit 2"
        )

    # -- encoding ------------------------------------------------------------------------

    def test_everything_reported_round_trips(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-6: every model the adapter reports encodes to names and decodes to itself."""
        quick, long = new_job(), new_job()
        kit.backend.submit(quick, 1, kit.harness.quick_spec(), False)
        kit.backend.submit(long, 1, kit.harness.long_spec(), False)
        kit.wait_for(quick, lambda objs: bool(objs) and not _alive(objs), "ended")
        discovery = kit.discover([quick, long])
        assert Discovery.model_validate_json(discovery.model_dump_json()) == discovery
        for obj in discovery.objects:
            assert ObjectView.model_validate_json(obj.model_dump_json()) == obj
            for execution in obj.executions:
                assert Execution.model_validate_json(execution.model_dump_json()) == execution
            if obj.cause is not None:
                assert Cause.model_validate_json(obj.cause.model_dump_json()) == obj.cause
                assert f'"{obj.cause.kind.value}"' in obj.cause.model_dump_json()

    # -- end to end ----------------------------------------------------------------------

    def test_supervisor_applies_the_policy_end_to_end(
        self, kit: Kit, new_job: Callable[[], str], tmp_path: Any
    ) -> None:
        """S-12, S-13, S-14, S-16: the core supervisor on this backend, with a policy that
        resubmits on ``preempted`` (budget 1) and holds on ``non-zero-exit``: a preemption
        (when the backend can report one) is resubmitted and spends only its own budget;
        the next submission's non-zero exit puts the job on a recovery hold."""
        from dispatch import Action, RecoveryPolicy, Registry, Rule, State
        from dispatch.job_records import create_job, load_job, status_of
        from dispatch.store import open_store
        from dispatch.supervisor import Supervisor

        from dispatch_testing.provoking import ProvokingPlugin

        reasons, provokable = kit.harness.not_provokable(), kit.harness.scenarios()
        wanted = [Scenario.EXIT_NONZERO]
        if Scenario.PREEMPTED in provokable and Scenario.PREEMPTED not in reasons:
            # test_scenario[preempted] already fails a declared preemption nobody provokes
            wanted.insert(0, Scenario.PREEMPTED)
        if Scenario.EXIT_NONZERO in reasons:
            _not_provokable(kit, NotProvokable(reasons[Scenario.EXIT_NONZERO]))
        if Scenario.EXIT_NONZERO not in provokable:
            pytest.fail("the harness cannot provoke exit-nonzero", pytrace=False)
        script = dict(enumerate(wanted, start=1))
        plugin = ProvokingPlugin(kit.harness, kit.backend, script)
        registry = Registry.from_plugins({kit.name: plugin})
        store = open_store(f"sqlite:///{tmp_path}/record.db")
        policy = RecoveryPolicy(
            rules=(
                Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=1),
                Rule(on=(CauseKind.NON_ZERO_EXIT,), action=Action.HOLD),
            )
        )
        job_id = new_job()
        create_job(
            store,
            registry,
            backend=kit.name,
            spec=kit.harness.long_spec(),
            policy=policy,
            job_id=job_id,
            now=kit.now(),
        )
        supervisor = Supervisor(store, registry, owner="dispatch-kit", clock=kit.now)
        waited, limit = 0.0, kit.harness.timeout * (len(wanted) + 1)
        first_submit: float | None = None
        try:
            while True:
                supervisor.tick(kit.now())
                job = load_job(store, job_id)
                if job.hold is not None or job.outcome is not None:
                    break
                if plugin.provoked and first_submit is None:
                    first_submit = waited
                if (
                    first_submit is not None
                    and waited - first_submit >= kit.harness.listing_grace
                    and not kit.objects(job_id)
                ):
                    kit.fail_unlisted([job_id], waited - first_submit)
                if waited > limit:
                    pytest.fail(f"after {waited:.0f}s the job is neither held nor ended: {job}")
                kit.harness.wait(kit.harness.poll_interval)
                waited += kit.harness.poll_interval
        except NotProvokable as exc:
            _not_provokable(kit, exc)
        assert job.outcome is None, f"the job ended {job.outcome} instead of being held"
        assert job.hold is not None and job.hold.rule == 1, f"held by {job.hold}"
        assert job.hold.cause.kind is CauseKind.NON_ZERO_EXIT
        assert job.hold.cause.exit_code == plugin.provoked[len(wanted)].exit_code
        assert [s.number for s in job.submissions] == list(range(1, len(wanted) + 1))
        preempted = 1 if Scenario.PREEMPTED in wanted else 0
        assert job.spent.get(0, 0) == preempted, f"budgets spent: {job.spent}"
        if Capability.GATING not in kit.declarations.capabilities:
            assert plugin.gate_calls == [], (
                f"dispatch opened gates {plugin.gate_calls} of a backend without gating: "
                "such a backend may leave dispatch_open_gate out"
            )
        status = status_of(store, registry, job_id, now=kit.now())
        assert status.state is State.HELD
        assert status.cause is not None and status.cause.kind is CauseKind.NON_ZERO_EXIT
