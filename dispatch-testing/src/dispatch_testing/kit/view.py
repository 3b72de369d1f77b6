"""The kit's view of one backend under test: its harness, the loaded backend, and the checks
every discovery must pass whichever test made it; :func:`kit_for` gives each test the one
view of its run.

Every discovery a kit test takes goes through :meth:`Kit.discover`, which checks what no
adapter may ever report: objects of jobs nobody asked about, cause kinds the backend did
not declare, an ended object without a cause, a scheduler cause without its words, a
report that does not survive encode/decode (S-6, S-19, S-32).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib.metadata import entry_points
from typing import Any

import pytest
from dispatch import (
    Backend,
    Capability,
    CauseKind,
    Declarations,
    Discovery,
    ObjectView,
    Phase,
    Provenance,
    Registry,
)
from dispatch.core.cause import root_cause
from dispatch.model.errors import DispatchError

from dispatch_testing.kit.harness import (
    GROUP,
    Harness,
    NotProvokable,
    Scenario,
    required_scenarios,
)

#: the one Kit per harness class (or per ``--dispatch-backend``) of a pytest run
KITS = pytest.StashKey[dict[Any, "Kit"]]()


class KitError(Exception):
    """The kit could not be set up for this backend (no harness, a broken plugin)."""


class Kit:
    def __init__(self, harness: Harness, backend: Backend | None, problem: str = "") -> None:
        self.harness = harness
        self._backend = backend
        self.problem = problem
        self.notes: list[str] = []

    @classmethod
    def start(cls, key: type[Harness] | str, live: bool) -> Kit:
        if isinstance(key, str):
            harness_class = _harness_class(key)
            name = key
        else:
            harness_class, name = key, key.name
        harness = harness_class(live=live)
        harness.name = name or harness.name
        if not harness.name:
            raise KitError(f"{harness_class.__qualname__}.name is empty: set the backend's name")
        try:
            plugin = harness.plugin()
        except NotProvokable as exc:
            raise pytest.UsageError(
                f"the harness of {harness.name!r} has no {harness.tier} tier: {exc}"
            ) from exc
        try:
            backend = Registry.from_plugins({harness.name: plugin}).get(harness.name)
        except DispatchError as exc:
            return cls(harness, None, f"the backend does not load: {exc}")
        return cls(harness, backend)

    # -- setup-time ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.harness.name

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            pytest.fail(self.problem, pytrace=False)
        return self._backend

    @property
    def declarations(self) -> Declarations:
        return self.backend.declarations

    def scenarios_to_test(self) -> list[Scenario]:
        """Required by the declarations, plus any other the harness claims (a claimed
        scenario whose kind is not declared then fails the undeclared-kind check)."""
        if self._backend is None:
            return list(Scenario)
        wanted = set(required_scenarios(self.declarations)) | set(self.harness.scenarios())
        return [s for s in Scenario if s in wanted]

    def capabilities_to_test(self) -> list[tuple[Capability, str]]:
        if self._backend is None:
            return [(c, "unloaded") for c in Capability]
        caps = self.declarations.capabilities
        return [(c, "declared" if c in caps else "refused") for c in Capability]

    def summary(self) -> str:
        if self._backend is None:
            return f"dispatch kit: {self.name}: {self.problem}"
        d = self.declarations
        caps = ", ".join(sorted(c.value for c in d.capabilities)) or "none"
        lines = [
            f"dispatch kit: backend {self.name!r} ({self.harness.tier} tier); "
            f"capabilities declared: {caps}; the others were tested to be refused",
            *self.notes,
        ]
        return "\n".join(lines)

    def close(self) -> None:
        self.harness.close()

    # -- run-time helpers ----------------------------------------------------------------

    def job_id(self) -> str:
        return f"kit-{uuid.uuid4().hex[:12]}"

    def now(self) -> datetime:
        return self.harness.now()

    def discover(self, job_ids: Sequence[str]) -> Discovery:
        discovery = self.backend.discover(job_ids)
        check_discovery(discovery, self.declarations, job_ids)
        return discovery

    def objects(self, job_id: str) -> tuple[ObjectView, ...]:
        return self.discover([job_id]).of_job(job_id)

    def wait_for(
        self,
        job_id: str,
        done: Callable[[tuple[ObjectView, ...]], bool],
        what: str,
        timeout: float | None = None,
        wrong: Callable[[tuple[ObjectView, ...]], str | None] | None = None,
    ) -> tuple[ObjectView, ...]:
        """Poll discovery (waiting through the harness) until ``done`` holds; fail at once
        when ``wrong`` names a problem or nothing is listed for the job after
        ``Harness.listing_grace`` (a plainly broken discovery), else after ``timeout``
        harness-seconds (the bound for a slow scheduler)."""
        limit = self.harness.timeout if timeout is None else timeout
        waited = 0.0
        while True:
            objects = self.objects(job_id)
            if done(objects):
                return objects
            if wrong is not None:
                problem = wrong(objects)
                if problem:
                    pytest.fail(f"{self.name}: {problem}\nobjects: {_show(objects)}", pytrace=False)
            if not objects and waited >= min(self.harness.listing_grace, limit):
                self.fail_unlisted([job_id], waited)
            if waited >= limit:
                pytest.fail(
                    f"{self.name}: after {waited:.0f}s still not {what}\nobjects: {_show(objects)}",
                    pytrace=False,
                )
            self.harness.wait(self.harness.poll_interval)
            waited += self.harness.poll_interval

    def fail_unlisted(self, job_ids: Sequence[str], waited: float) -> None:
        pytest.fail(
            f"{self.name}: nothing listed for {', '.join(job_ids)} {waited:.0f}s after it was "
            f"submitted (Harness.listing_grace = {self.harness.listing_grace:g}s): discovery "
            "must find an object by the tags submit put on it as soon as the scheduler "
            "accepted it (S-30, S-34); the kit does not wait out its timeout "
            f"({self.harness.timeout:g}s) for that",
            pytrace=False,
        )

    def stop_all(self, job_ids: Sequence[str]) -> None:
        """Best-effort cleanup after a test; the kit's own stop checks are in the tests."""
        from dispatch import Cause

        try:  # unchecked: the test that made these jobs has already judged the discovery
            for obj in self.backend.discover(job_ids).objects:
                if obj.alive:
                    self.backend.stop(
                        obj.object_id,
                        Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="kit"),
                    )
        except DispatchError:
            pass


def kit_for(config: pytest.Config, cls: type) -> Kit:
    """The one :class:`Kit` per harness class (or per ``--dispatch-backend``) of this run."""
    key = getattr(cls, "harness_class", None) or config.getoption("dispatch_backend")
    if key is None:
        raise pytest.UsageError(
            f"{cls.__qualname__} runs the dispatch kit but sets no harness_class and "
            "--dispatch-backend was not given"
        )
    return kit_of(config, key)


def kit_of(config: pytest.Config, key: type[Harness] | str) -> Kit:
    """The run's Kit for ``key`` (a harness class or a registered name), started once."""
    kits = config.stash.setdefault(KITS, {})
    if key not in kits:
        kits[key] = Kit.start(key, live=bool(config.getoption("dispatch_live")))
    return kits[key]


def _harness_class(name: str) -> type[Harness]:
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        known = ", ".join(sorted({ep.name for ep in entry_points(group=GROUP)})) or "none"
        raise pytest.UsageError(
            f"no conformance harness is registered for the backend {name!r} "
            f"(entry-point group {GROUP!r}; installed harnesses: {known})"
        )
    if len(found) > 1:
        dists = ", ".join(ep.dist.metadata["Name"] if ep.dist else "?" for ep in found)
        raise pytest.UsageError(f"two harnesses are registered as {name!r}: {dists}")
    try:
        loaded: Any = found[0].load()
    except Exception as exc:  # a third party's import error is reported, not a crash
        dist = found[0].dist.metadata["Name"] if found[0].dist else "an unknown distribution"
        raise pytest.UsageError(
            f"the harness {name!r} from {dist} ({found[0].value}) failed to load: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Harness)):
        raise pytest.UsageError(f"harness {name!r} is {loaded!r}, not a Harness subclass")
    return loaded


def _show(objects: Sequence[ObjectView]) -> str:
    if not objects:
        return "none"
    return "; ".join(
        f"{o.object_id} sub {o.submission} {o.phase.value} ({o.scheduler_state})"
        + (
            f" cause {o.cause.kind.value}/{o.cause.provenance.value} "
            f"exit={o.cause.exit_code} detail={o.cause.detail!r}"
            if o.cause
            else ""
        )
        for o in objects
    )


def check_discovery(discovery: Discovery, declarations: Declarations, asked: Sequence[str]) -> None:
    """What every discovery must satisfy, whatever the test (S-4, S-6, S-19, S-32)."""
    assert discovery.backend == declarations.name, (
        f"discovery says backend {discovery.backend!r}, the declarations {declarations.name!r}"
    )
    assert discovery.at.tzinfo is not None, "discovery.at must be timezone-aware"
    allowed = set(declarations.reports) | {CauseKind.NONE, CauseKind.UNKNOWN}
    wanted = set(asked)
    for obj in discovery.objects:
        where = f"object {obj.object_id} (job {obj.job_id}, submission {obj.submission})"
        assert obj.job_id in wanted, f"{where} was not asked about"
        causes = [
            obj.cause,
            *(e.cause for e in obj.executions),
            *(c for e in obj.executions for c in e.node_causes),
        ]
        for cause in causes:
            if cause is None:
                continue
            assert cause.kind in allowed, (
                f"{where} reports {cause.kind.value!r}, which the backend does not declare "
                f"in reports"
            )
            if cause.provenance is Provenance.SCHEDULER:
                assert cause.detail.strip(), (
                    f"{where}: a scheduler cause {cause.kind.value!r} needs the scheduler's "
                    "own words in detail, verbatim"
                )
        if obj.phase is Phase.ENDED:
            assert obj.cause is not None, f"{where} ended without a cause"
        if obj.phase is Phase.RUNNING and obj.cause is not None:
            assert obj.cause.kind in (CauseKind.NODE_LOST, CauseKind.UNKNOWN), (
                f"{where} runs with cause {obj.cause.kind.value!r}; only node-lost (S-26) or "
                "an unmappable answer may"
            )
        ran_on = {n for e in obj.executions for n in e.nodes}
        for cause in causes:
            if cause is not None and cause.nodes and ran_on:
                assert set(cause.nodes) <= ran_on, (
                    f"{where}: a {cause.kind.value!r} cause blames nodes "
                    f"{sorted(set(cause.nodes) - ran_on)} the object never ran on (S-42)"
                )
        for e in obj.executions:
            if e.node_causes and e.cause is not None:
                root = root_cause(e.node_causes)
                assert root is not None and e.cause.kind is root.kind, (
                    f"{where}: execution {e.index} ended {e.cause.kind.value!r} but the "
                    f"root cause of its tasks' endings is {root.kind.value if root else None!r}: "
                    "the earliest failure is the cause, never a rank killed in its wake "
                    "(dispatch.core.cause.root_cause, S-42)"
                )
        indexes = [e.index for e in obj.executions]
        assert indexes == sorted(set(indexes)), f"{where}: execution indexes {indexes}"
    decoded = Discovery.model_validate_json(discovery.model_dump_json())
    assert decoded == discovery, "the discovery does not survive encode/decode (S-6)"
