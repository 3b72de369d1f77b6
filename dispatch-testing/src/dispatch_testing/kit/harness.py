"""The harness: how the conformance kit drives *your* scheduler. Implement one per adapter.

The kit's tests are written against capabilities and scenarios, never against a backend's
name. What they cannot do alone — build a job that does something on your scheduler, make
the scheduler preempt it, kill its node, become unreachable, count its calls — the kit asks
of a :class:`Harness` that the adapter's distribution provides and registers under the
entry-point group ``dispatch.harnesses`` with the backend's name::

    # pyproject.toml of dispatch-mysched
    [project.entry-points."dispatch.backends"]
    mysched = "dispatch_mysched.backend:MySchedBackend"
    [project.entry-points."dispatch.harnesses"]
    mysched = "dispatch_mysched.harness:MySchedHarness"

Then ``dispatch-conformance mysched`` (offline tier) or ``dispatch-conformance mysched
--live`` (a real scheduler) runs the whole kit.

Lifecycle: the kit instantiates ``HarnessClass(live=...)`` once per test session, calls
:meth:`Harness.plugin` once to get the backend plugin object it registers with
``dispatch.Registry.from_plugins`` (so the harness may keep a handle on it, e.g. to read a call
counter), and :meth:`Harness.close` at the end. Each test uses fresh job ids
(``kit-<uuid>``), so a harness never has to clean up between tests.

Time: every wait goes through :meth:`Harness.wait`. A real scheduler sleeps; a simulated
one advances its clock, so the offline tier never sleeps.

Not provokable: a harness that cannot produce a scenario *says so*: either statically, in
:meth:`Harness.not_provokable` (scenario -> reason), or at run time by raising
:class:`NotProvokable` from any hook below (e.g. a live cluster with a single partition
cannot preempt). The kit reports such a test as ``xfailed`` with the reason
("not provokable on mysched (live): ..."), never as passed. A scenario the backend's
declarations make *required* (see :func:`required_scenarios`) that is neither in
:meth:`Harness.scenarios` nor in :meth:`Harness.not_provokable` **fails** the kit: a cause
the backend claims it can report may not go untested in silence.

What each scenario must end as is fixed by the kit (:data:`EXPECTED`), not by the harness:
the harness only says *how* to provoke it and, for exit codes and unmappable answers, what
it provoked (:class:`Provoked`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from dispatch import (
    Backend,
    Capability,
    CauseKind,
    JobSpec,
    LogSelection,
    Phase,
    Provenance,
    Resources,
    SubmitRefused,
)
from dispatch.model.declarations import Declarations

GROUP = "dispatch.harnesses"


class NotProvokable(Exception):
    """This harness (in this tier) cannot produce what the kit asked; the message says why.

    The kit turns it into an ``xfail`` carrying the reason, so the report shows it.
    """


class Scenario(StrEnum):
    """An ending (or a waiting state) the kit asks the harness to provoke.

    ``success``                 the job exits 0.
    ``exit-nonzero``            the job exits with a code of the harness's choosing, 1..125.
    ``signal``                  the job is killed by a signal it sends itself (SIGKILL:
                                the scheduler usually shows exit code 137 or "0:9").
    ``time-limit``              the job outlives ``resources.time_limit``; the scheduler kills it.
    ``preempted``               the scheduler preempts it (Slurm: a higher-priority partition).
    ``node-lost``               a node of the job dies (Slurm: drain/kill a node; Kubeflow:
                                delete the node; a FailureTarget-like object may keep
                                reporting running: phase running with cause node-lost is right).
    ``out-of-memory``           the job exceeds its memory and is OOM-killed.
    ``launch-failed``           the scheduler accepts the object but cannot start it (bad
                                image, missing executable), or refuses it with
                                ``SubmitRefused`` — either is accepted.
    ``no-capacity``             the object stays pending because nothing can fit it.
    ``cancelled-by-scheduler``  someone other than dispatch cancels it at the scheduler
                                (an admin's ``scancel``, ``kubectl delete``... that leaves
                                the object listed).
    ``held-by-scheduler``       the scheduler holds it and dispatch did not (JobHeldAdmin).
    ``native-recovery``         the backend's own restart/requeue runs the object again:
                                the object shows a second execution (only required when
                                the declarations list native actions).
    ``unmappable``              the scheduler shows, for the job's object, an answer the
                                adapter cannot map; the harness returns that raw answer in
                                :attr:`Provoked.raw`.

    Multi-node (required when the backend declares ``multi-node``; the job has at least
    two nodes, e.g. :meth:`Harness.multi_node_spec`):

    ``multi-node-node-lost``    one node of the running job dies (a non-batch node is the
                                stronger test); the cause is ``node-lost`` naming exactly
                                that node in ``Cause.nodes`` (:attr:`Provoked.nodes`), not
                                the nodes whose ranks were killed in its wake (S-42).
    ``multi-node-rank-failed``  one rank exits non-zero while the others run on; the
                                backend stops the others promptly and the cause is that
                                rank's ``non-zero-exit`` with its exit code, its node in
                                ``Cause.nodes`` (and ``Cause.rank`` when
                                :attr:`Provoked.rank` says the scheduler tells ranks):
                                the root cause, never a rank killed after it (S-42).
    """

    SUCCESS = "success"
    EXIT_NONZERO = "exit-nonzero"
    SIGNAL = "signal"
    TIME_LIMIT = "time-limit"
    PREEMPTED = "preempted"
    NODE_LOST = "node-lost"
    OUT_OF_MEMORY = "out-of-memory"
    LAUNCH_FAILED = "launch-failed"
    NO_CAPACITY = "no-capacity"
    CANCELLED_BY_SCHEDULER = "cancelled-by-scheduler"
    HELD_BY_SCHEDULER = "held-by-scheduler"
    NATIVE_RECOVERY = "native-recovery"
    UNMAPPABLE = "unmappable"
    NODE_LOST_OF_N = "multi-node-node-lost"
    RANK_FAILED = "multi-node-rank-failed"


@dataclass(frozen=True)
class Expectation:
    """What the kit requires the object of a provoked scenario to show.

    ``kind`` None means the object's own cause is not checked (``native-recovery``: the
    kit checks its executions instead). ``phases``: the object's phase must be one of
    these. ``provenances``: the cause's provenance must be one of these. A ``scheduler``
    provenance always needs a non-empty verbatim ``detail``; ``non-zero-exit`` needs the
    exit code the harness provoked.
    """

    kind: CauseKind | None
    phases: frozenset[Phase]
    provenances: frozenset[Provenance]


def _e(kind: CauseKind | None, phases: Set[Phase], *provenances: Provenance) -> Expectation:
    return Expectation(kind, frozenset(phases), frozenset(provenances))


_ENDED = {Phase.ENDED}
_SCHED = Provenance.SCHEDULER

#: The kit's own table: what each scenario must be classified as. Not overridable.
EXPECTED: Mapping[Scenario, Expectation] = {
    Scenario.SUCCESS: _e(CauseKind.NONE, _ENDED, Provenance.APPLICATION),
    Scenario.EXIT_NONZERO: _e(CauseKind.NON_ZERO_EXIT, _ENDED, Provenance.APPLICATION),
    Scenario.SIGNAL: _e(CauseKind.NON_ZERO_EXIT, _ENDED, Provenance.APPLICATION),
    Scenario.TIME_LIMIT: _e(CauseKind.TIME_LIMIT, _ENDED, _SCHED),
    Scenario.PREEMPTED: _e(CauseKind.PREEMPTED, _ENDED, _SCHED),
    Scenario.NODE_LOST: _e(CauseKind.NODE_LOST, {Phase.RUNNING, Phase.ENDED}, _SCHED),
    Scenario.OUT_OF_MEMORY: _e(CauseKind.OUT_OF_MEMORY, _ENDED, _SCHED),
    Scenario.LAUNCH_FAILED: _e(CauseKind.LAUNCH_FAILED, _ENDED, _SCHED),
    Scenario.NO_CAPACITY: _e(CauseKind.NO_CAPACITY, {Phase.PENDING}, _SCHED),
    Scenario.CANCELLED_BY_SCHEDULER: _e(CauseKind.CANCELLED, _ENDED, _SCHED, Provenance.ACTOR),
    Scenario.HELD_BY_SCHEDULER: _e(CauseKind.HELD, {Phase.HELD}, _SCHED),
    # the first execution ended with Provoked.native_cause and a second one exists
    Scenario.NATIVE_RECOVERY: _e(None, {Phase.PENDING, Phase.RUNNING, Phase.ENDED}, _SCHED),
    Scenario.UNMAPPABLE: _e(CauseKind.UNKNOWN, set(Phase), _SCHED),
    Scenario.NODE_LOST_OF_N: _e(CauseKind.NODE_LOST, {Phase.RUNNING, Phase.ENDED}, _SCHED),
    Scenario.RANK_FAILED: _e(CauseKind.NON_ZERO_EXIT, _ENDED, Provenance.APPLICATION),
}

#: Scenarios on a job of several nodes: required only of a backend declaring multi-node.
MULTI_NODE_SCENARIOS = frozenset({Scenario.NODE_LOST_OF_N, Scenario.RANK_FAILED})

#: The scenario whose cause kind makes it required when the backend declares that kind.
_REQUIRED_BY_KIND: Mapping[Scenario, CauseKind] = {
    s: e.kind for s, e in EXPECTED.items() if e.kind is not None and s is not Scenario.UNMAPPABLE
}


def required_scenarios(declarations: Declarations) -> frozenset[Scenario]:
    """Scenarios the kit must see provoked (or explicitly not provokable) for a backend.

    Every scenario whose kind the backend declares in ``reports``; ``success`` always;
    ``unmappable`` always (S-4 binds every adapter); ``native-recovery`` when the backend
    declares native actions; the multi-node scenarios only when it declares ``multi-node``.
    """

    required = {s for s, kind in _REQUIRED_BY_KIND.items() if kind in declarations.reports}
    if Capability.MULTI_NODE not in declarations.capabilities:
        required -= MULTI_NODE_SCENARIOS
    required |= {Scenario.SUCCESS, Scenario.UNMAPPABLE}
    if declarations.native_actions:
        required.add(Scenario.NATIVE_RECOVERY)
    return frozenset(required)


@dataclass(frozen=True)
class Provoked:
    """What :meth:`Harness.provoke` did.

    - ``object_id``: the scheduler object it submitted (None when the submit was refused).
    - ``timeout``: how long (seconds, in :meth:`Harness.wait` time) the kit may wait for
      the object to show the expected ending before failing.
    - ``exit_code``: for ``exit-nonzero`` and ``signal``, the exit code the cause must carry
      (e.g. 3, or 137 for SIGKILL).
    - ``raw``: for ``unmappable``, the scheduler's raw answer; the cause's ``detail`` must
      contain it verbatim.
    - ``refused``: for ``launch-failed``, the ``SubmitRefused`` the submit raised, if the
      scheduler refused it outright (its ``detail`` must be non-empty).
    - ``native_cause``: for ``native-recovery``, the kind the first execution ended with.
    - ``detail``: words the scheduler is known to give for this ending (the reason the
      harness injected or the scheduler always prints); the cause's ``detail`` must
      contain them verbatim. Optional: without it the kit checks only that a scheduler
      cause has a non-empty detail.
    - ``nodes``: the node(s) the ending must be attributed to (S-42): the node the harness
      killed, the node of the rank it made fail. When given, ``Cause.nodes`` must be
      exactly these. Required for the multi-node scenarios (for ``multi-node-rank-failed``
      the kit can instead derive it from ``rank`` and the execution's node list).
    - ``rank``: for ``multi-node-rank-failed``, the rank that failed, when the scheduler
      reports ranks; ``Cause.rank`` must then equal it.
    """

    object_id: str | None
    timeout: float = 60.0
    exit_code: int | None = None
    raw: str | None = None
    refused: SubmitRefused | None = None
    native_cause: CauseKind | None = None
    detail: str | None = None
    nodes: tuple[str, ...] = ()
    rank: int | None = None


class Harness:
    """Base class of a harness; override what your scheduler can do.

    Required: :meth:`plugin`, :meth:`scenarios` (may be empty), :meth:`provoke`.
    Optional, each raising :class:`NotProvokable` by default (reported as xfail):
    :meth:`unreachable`, :meth:`calls`. :meth:`wait`, :meth:`long_spec`, :meth:`quick_spec`
    and :meth:`close` have defaults good for a scheduler that runs local commands.
    """

    #: the backend's entry-point name; the kit sets it when it loads the harness from
    #: ``dispatch.harnesses``. Set it yourself for a harness used by a subclass of
    #: :class:`dispatch_testing.kit.BackendConformance`.
    name: str = ""
    #: seconds between two discoveries while the kit waits for something
    poll_interval: float = 1.0
    #: seconds the kit waits for a submitted object to start / stop / show its ending
    timeout: float = 60.0
    #: seconds after a submit within which discovery must list the object: a scheduler
    #: lists what it accepted at once, so nothing listed by then is a broken discovery and
    #: the kit fails at once instead of waiting out :attr:`timeout`
    listing_grace: float = 10.0

    def __init__(self, live: bool = False) -> None:
        self.live = live

    @property
    def tier(self) -> str:
        return "live" if self.live else "offline"

    # -- the backend under test ----------------------------------------------------------

    def plugin(self) -> object:
        """The backend plugin object to test, configured for this tier (``self.live``).

        Called once per session. Raise :class:`NotProvokable` if this tier is not
        available (e.g. no offline tier): the run stops with a usage error saying so.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`plugin` started (servers, temporary directories)."""

    # -- what to run ---------------------------------------------------------------------

    def long_spec(self) -> JobSpec:
        """A job that runs (phase running) until stopped, for at least ten minutes."""
        return JobSpec(name="kit-long", command=("sleep", "3600"))

    def quick_spec(self) -> JobSpec:
        """A job that succeeds quickly (exit 0)."""
        return JobSpec(name="kit-quick", command=("true",))

    def script_spec(self, script: str) -> JobSpec:
        """A job running ``script`` (``JobSpec.script`` is the script file's *text*; the
        backend runs it by its own ``#!`` line). The kit's script starts with
        :attr:`python_shebang` (or ``#!/bin/sh``); raise :class:`NotProvokable` if the
        nodes have no Python or run no programs."""
        return JobSpec(name="kit-script", script=script)

    #: the ``#!`` line of the kit's Python script, for nodes whose python3 is elsewhere
    python_shebang: str = "#!/usr/bin/env python3"

    def printing_spec(self, text: str) -> JobSpec:
        """A quick job that prints ``text`` and a newline on stdout and exits 0 (the
        ``logs`` capability check submits one per submission)."""
        return JobSpec(name="kit-print", command=("echo", text))

    #: (nodes, tasks per node) of the kit's multi-node jobs
    multi_node_shape: tuple[int, int] = (2, 2)

    def multi_node_spec(self) -> JobSpec:
        """A job of :attr:`multi_node_shape` that runs until stopped (multi-node scenarios
        may use it; the exclusion check does)."""
        nodes, tasks = self.multi_node_shape
        spec = self.long_spec()
        return spec.model_copy(update={"resources": Resources(nodes=nodes, tasks_per_node=tasks)})

    def rank_failure_spec(self, rank: int, code: int) -> JobSpec:
        """A job of :attr:`multi_node_shape` whose rank ``rank`` exits ``code`` at once
        while every other rank sleeps (it reads ``RANK`` from the launch contract), for
        :attr:`Scenario.RANK_FAILED` on a scheduler that really runs commands."""
        spec = self.multi_node_spec()
        script = f'if [ "$RANK" = "{rank}" ]; then exit {code}; fi; exec sleep 3600'
        return spec.model_copy(update={"command": ("sh", "-c", script)})

    def contract_spec(self) -> JobSpec:
        """A quick job of :attr:`multi_node_shape` whose every task prints its environment
        (``KEY=VALUE`` lines), for the launch-contract check (S-41)."""
        nodes, tasks = self.multi_node_shape
        return JobSpec(
            name="kit-contract",
            command=("env",),
            resources=Resources(nodes=nodes, tasks_per_node=tasks),
        )

    def task_environments(
        self, backend: Backend, job_id: str, object_id: str, world_size: int
    ) -> list[Mapping[str, str]]:
        """What each rank (0..world_size-1) of the ended :meth:`contract_spec` job saw of
        its environment. By default read through the backend's ``logs`` (``rank=r``);
        override for a backend without the ``logs`` capability."""
        if Capability.LOGS not in backend.declarations.capabilities:
            raise NotProvokable(
                "the backend does not declare logs: override Harness.task_environments "
                "to read what each rank printed"
            )
        seen: list[Mapping[str, str]] = []
        for rank in range(world_size):
            text = b"".join(backend.logs(object_id, LogSelection(rank=rank).of(job_id, 1))).decode(
                errors="replace"
            )
            env: dict[str, str] = {}
            for line in text.splitlines():
                key, sep, value = line.partition("=")
                if sep and key.isidentifier():
                    env[key] = value
            seen.append(env)
        return seen

    def script_output(self, backend: Backend, job_id: str, object_id: str) -> str:
        """What the ended :meth:`script_spec` job ``object_id`` printed on stdout (the
        kit's script prints its environment, ``KEY=VALUE`` lines). By default read through
        the backend's ``logs`` (submission 1, every rank); override for a backend without
        the ``logs`` capability."""
        if Capability.LOGS not in backend.declarations.capabilities:
            raise NotProvokable(
                "the backend does not declare logs: override Harness.script_output "
                "to read what a script job printed"
            )
        selection = LogSelection().of(job_id, 1)
        return b"".join(backend.logs(object_id, selection)).decode(errors="replace")

    def restore_nodes(self, nodes: Set[str]) -> None:
        """Bring nodes a scenario killed back into service (restart a slurmd, uncordon),
        so that only ``JobSpec.exclude_nodes`` keeps the next submission off them. The
        exclusion check calls it after a node-lost ending; default: nothing to do."""

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass for the scheduler. A simulated scheduler advances its clock."""
        time.sleep(seconds)

    def now(self) -> datetime:
        """The scheduler's time (the end-to-end test runs the supervisor on it)."""
        return datetime.now(UTC)

    # -- scenarios -----------------------------------------------------------------------

    def scenarios(self) -> Set[Scenario]:
        """The scenarios :meth:`provoke` can produce in this tier."""
        return frozenset()

    def not_provokable(self) -> Mapping[Scenario, str]:
        """Scenarios this harness knowingly cannot produce in this tier, each with why."""
        return {}

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        """Submit ``job_id`` through ``backend.submit(job_id, 1, spec, gated=False)``
        (exactly one call) so that its object ends (or waits) the way ``scenario`` says,
        and drive any out-of-band action (preempt, drain a node, scancel as an admin,
        inject an answer). May return before the ending shows; the kit then polls
        ``backend.discover([job_id])`` with :meth:`wait` between polls until
        :attr:`Provoked.timeout`.

        Always submit as submission 1, ungated: in the end-to-end test the supervisor
        makes the submit call and the kit hands you a ``backend`` that files your submit
        under the submission number (and gate) the supervisor asked for. Do not keep
        state across calls that assumes the object is the only one of the job.
        """
        raise NotProvokable(f"this harness does not provoke {scenario}")

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """While inside, the scheduler cannot be reached (stop its controller, point the
        adapter at a closed port, inject a fault). Every hook that needs the scheduler must
        then raise ``dispatch.Unreachable``."""
        raise NotProvokable("this harness cannot make the scheduler unreachable")
        yield  # pragma: no cover

    def calls(self) -> int:
        """How many calls the adapter has made to the scheduler so far (monotonic).

        The kit compares the calls one discovery of 1 job costs with one of many jobs
        (S-32); an adapter that shells out or speaks HTTP usually counts in its transport.
        """
        raise NotProvokable("this harness cannot count scheduler calls")
