"""The conformance kit's harness for Slurm (``dispatch-conformance slurm --live``).

Live tier only (there is no offline tier: the recorded answers of a real Slurm are tested
by dispatch-slurm's own suite). Two modes, chosen by ``DISPATCH_SLURM_KIT``:

``test-cluster`` (default)
    the cluster this package's start script builds on this host (the harness runs it,
    idempotently): every scenario, including the destructive ones: preemption through the
    ``high`` partition, a node lost (its slurmd and processes killed, brought back once
    Slurm declared it failed), slurmctld stopped for ``unreachable``.
``own-cluster``
    a platform team's own cluster, left as it is: never starts or stops a daemon, never
    drains or downs a node, never preempts, and cancels only the jobs it submitted itself
    (by the ids sbatch returned). It provokes success, exit codes, a signal, the time
    limit, an outside cancel (of its own job), an out-of-memory kill where the cluster
    enforces memory, a launch failure, no capacity, a user hold, an unmappable
    dependency, gating and the discovery cost. Preemption, native requeue, node loss and
    unreachability are reported not provokable, saying why.
    ``DISPATCH_SLURM_KIT_PARTITION`` picks the partition (default: the cluster's default);
    ``DISPATCH_SLURM_KIT_WORKDIR`` a directory every compute node can read and write
    (default: a new directory under the current one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from pathlib import Path

from dispatch import Backend, CauseKind, JobSpec, Prepared, hookimpl
from dispatch_slurm.backend import SlurmBackend
from dispatch_testing.kit.harness import Harness, NotProvokable, Provoked, Scenario

from dispatch_slurm_testing.cluster import (
    STATE_DIR,
    ClusterError,
    memory_enforcement,
    nodes,
    start,
)
from dispatch_slurm_testing.provoke import CannotProvoke, Provocation, Provoker

TEST_CLUSTER = "test-cluster"
OWN_CLUSTER = "own-cluster"
MODES = (TEST_CLUSTER, OWN_CLUSTER)

#: what the non-destructive mode will not do, and why
_DESTRUCTIVE = {
    Scenario.PREEMPTED: "own-cluster mode never preempts other users' jobs",
    Scenario.NATIVE_RECOVERY: "own-cluster mode never preempts (the native requeue needs it)",
    Scenario.NODE_LOST: "own-cluster mode never kills a node's daemons",
    Scenario.NODE_LOST_OF_N: "own-cluster mode never kills a node's daemons",
}


def mode() -> str:
    chosen = os.environ.get("DISPATCH_SLURM_KIT", TEST_CLUSTER)
    if chosen not in MODES:
        raise ValueError(f"DISPATCH_SLURM_KIT={chosen!r}: expected one of {', '.join(MODES)}")
    return chosen


class _RecordingBackend(SlurmBackend):
    """The backend under test, remembering the object ids it submitted, so a cleanup on
    someone else's cluster cancels those and nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted: set[str] = set()

    @hookimpl
    def dispatch_send(self, prepared: Prepared) -> str:
        object_id = super().dispatch_send(prepared)
        self.submitted.add(object_id)
        return object_id


class SlurmHarness(Harness):
    poll_interval = 1.0
    timeout = 120.0

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self.mode = mode()
        self._backend: _RecordingBackend | None = None
        self._workdir = ""
        self._made_workdir = False
        self._helpers: list[str] = []
        self._restorer: threading.Thread | None = None

    @property
    def own_cluster(self) -> bool:
        return self.mode == OWN_CLUSTER

    # -- the backend under test ---------------------------------------------------------

    def plugin(self) -> object:
        if not self.live:
            raise NotProvokable(
                "dispatch-slurm has no offline tier in the kit: its recorded Slurm answers are "
                "tested in its own suite; run dispatch-conformance slurm --live"
            )
        if self.own_cluster:
            if not nodes():
                raise RuntimeError("own-cluster mode: sinfo lists no node; is SLURM_CONF set?")
            base = os.environ.get("DISPATCH_SLURM_KIT_WORKDIR")
            if base:
                self._workdir = base
            else:
                self._workdir = tempfile.mkdtemp(prefix="dispatch-kit-slurm-", dir=os.getcwd())
                self._made_workdir = True
        else:
            try:
                start()
            except ClusterError as exc:
                raise RuntimeError(str(exc)) from exc
            self._workdir = tempfile.mkdtemp(prefix="dispatch-kit-slurm-", dir="/var/tmp")
            self._made_workdir = True
            os.chmod(self._workdir, 0o777)
        self._backend = _RecordingBackend()
        return self._backend

    def close(self) -> None:
        """Cancel what this harness submitted (by id, never by a name pattern)."""
        self._wait_restored()
        mine = sorted(self._backend.submitted if self._backend else set()) + self._helpers
        if mine:
            subprocess.run(["scancel", *mine], capture_output=True, timeout=60, check=False)
        if self._made_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    # -- what to run --------------------------------------------------------------------

    def _partition(self) -> str | None:
        return os.environ.get("DISPATCH_SLURM_KIT_PARTITION") if self.own_cluster else None

    def _provoker(self, backend: Backend) -> Provoker:
        return Provoker(backend.submit, self._workdir, partition=self._partition())

    def _options(self) -> dict[str, str]:
        options = {"output": f"{self._workdir}/%j.out"}
        partition = self._partition()
        if partition:
            options["partition"] = partition
        return options

    def long_spec(self) -> JobSpec:
        return JobSpec(
            name="kit-long",
            command=("sleep", "3600"),
            workdir=self._workdir,
            options=self._options(),
        )

    def quick_spec(self) -> JobSpec:
        return JobSpec(
            name="kit-quick", command=("true",), workdir=self._workdir, options=self._options()
        )

    def printing_spec(self, text: str) -> JobSpec:
        return JobSpec(
            name="kit-print",
            command=("echo", text),
            workdir=self._workdir,
            options=self._partition_only(),
        )

    def contract_spec(self) -> JobSpec:
        spec = super().contract_spec()
        return spec.model_copy(update={"workdir": self._workdir, "options": self._partition_only()})

    def _partition_only(self) -> dict[str, str]:
        partition = self._partition()
        return {"partition": partition} if partition else {}

    def calls(self) -> int:
        assert self._backend is not None
        return self._backend.runner.calls

    def restore_nodes(self, nodes: Set[str]) -> None:
        """The node-lost scenarios bring their node back themselves once Slurm declared it
        failed (a background thread): wait for that."""
        self._wait_restored()

    # -- scenarios ----------------------------------------------------------------------

    def scenarios(self) -> Set[Scenario]:
        return frozenset(Scenario) - set(self.not_provokable())

    def not_provokable(self) -> Mapping[Scenario, str]:
        usable, why = memory_enforcement()
        missing = {} if usable else {Scenario.OUT_OF_MEMORY: why}
        if self.own_cluster:
            missing.update(_DESTRUCTIVE)
        return missing

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        self._wait_restored()
        if self.own_cluster and scenario in _DESTRUCTIVE:
            raise NotProvokable(_DESTRUCTIVE[scenario])
        p = self._provoker(backend)
        try:
            return self._provoke(scenario, p, job_id)
        except CannotProvoke as exc:
            raise NotProvokable(str(exc)) from exc
        finally:
            self._helpers += p.helpers

    def _provoke(self, scenario: Scenario, p: Provoker, job_id: str) -> Provoked:
        simple = {
            Scenario.SUCCESS: p.success,
            Scenario.EXIT_NONZERO: p.exit_nonzero,
            Scenario.SIGNAL: p.signal,
            Scenario.OUT_OF_MEMORY: p.out_of_memory,
            Scenario.LAUNCH_FAILED: p.launch_failed,
            Scenario.NO_CAPACITY: p.no_capacity,
            Scenario.CANCELLED_BY_SCHEDULER: p.cancelled,
            Scenario.HELD_BY_SCHEDULER: p.held_by_scheduler,
            Scenario.UNMAPPABLE: p.unmappable,
        }
        if scenario in simple:
            return _provoked(simple[scenario](job_id), self.timeout)
        if scenario is Scenario.TIME_LIMIT:
            return _provoked(p.time_limit(job_id), 180.0)
        if scenario is Scenario.PREEMPTED:
            oid = p.long(job_id, partition="lowcancel", requeue="no")
            p.preempt({job_id: oid})
            return Provoked(object_id=oid, timeout=self.timeout)
        if scenario is Scenario.NATIVE_RECOVERY:
            oid = p.long(job_id, partition="low", requeue="yes")
            p.preempt({job_id: oid})
            return Provoked(object_id=oid, timeout=self.timeout, native_cause=CauseKind.PREEMPTED)
        if scenario in (Scenario.NODE_LOST, Scenario.NODE_LOST_OF_N):
            spec = self.multi_node_spec() if scenario is Scenario.NODE_LOST_OF_N else None
            oid = (
                p.submit(job_id, 1, spec, False)
                if spec is not None
                else p.long(job_id, partition="low", requeue="no")
            )
            p.wait_state(oid, {"RUNNING"})
            time.sleep(3)  # srun launches its steps through the slurmd's: let it
            node = p.lose(oid)  # the last node: not the batch node when there are several
            self._restorer = threading.Thread(
                target=self._restore_after, args=(p, oid), daemon=True
            )
            self._restorer.start()
            return Provoked(object_id=oid, timeout=self.timeout, nodes=(node,))
        if scenario is Scenario.RANK_FAILED:
            nodes, per_node = self.multi_node_shape
            last = nodes * per_node - 1
            spec = self.multi_node_spec().model_copy(
                update={
                    "command": (
                        "sh",
                        "-c",
                        f'if [ "$RANK" = {last} ]; then sleep 2; exit 5; fi; sleep 3600',
                    )
                }
            )
            oid = p.submit(job_id, 1, spec, False)
            p.wait_state(oid, {"RUNNING", "FAILED", "COMPLETING"})
            # Slurm names the failing step's node; the rank only when a step holds one task
            return Provoked(
                object_id=oid,
                timeout=self.timeout,
                exit_code=5,
                nodes=(p.nodes_of(oid)[-1],),
                rank=last if per_node == 1 else None,
            )
        raise NotProvokable(f"no way to provoke {scenario} on Slurm")

    def _restore_after(self, p: Provoker, object_id: str) -> None:
        """Bring the node back once Slurm declared it failed (or after 2 minutes)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if p.state(object_id) not in ("RUNNING", "COMPLETING", ""):
                    break
            except Exception:
                pass
            time.sleep(1)
        time.sleep(2)
        p.restore_nodes()

    def _wait_restored(self) -> None:
        if self._restorer is not None:
            self._restorer.join(timeout=240)
            self._restorer = None

    # -- unreachable --------------------------------------------------------------------

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """slurmctld really stopped; the start script brings it back (jobs survive)."""
        if self.own_cluster:
            raise NotProvokable("own-cluster mode never stops slurmctld")
        self._wait_restored()
        pidfile = STATE_DIR / "slurmctld.pid"
        _stop(pidfile)
        try:
            yield
        finally:
            start(timeout=180)


def _provoked(p: Provocation, timeout: float) -> Provoked:
    if p.refused is not None:
        return Provoked(object_id=None, refused=p.refused)
    return Provoked(object_id=p.object_id, timeout=timeout, exit_code=p.exit_code, raw=p.raw)


def _stop(pidfile: Path) -> None:
    pid = int(pidfile.read_text().strip())
    os.kill(pid, 15)
    for _ in range(150):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise RuntimeError(f"slurmctld (pid {pid}) did not stop")


__all__ = ["SlurmHarness"]
