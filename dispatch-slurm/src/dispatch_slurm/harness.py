"""The conformance kit's harness for Slurm (``dispatch-conformance slurm --live``).

Live tier only: the real Slurm ``sinfo`` reaches, built by ``scripts/start-slurm.sh``
(the harness runs it, idempotently, when it starts). There is no offline tier: the
recorded answers of a real Slurm are tested by the package's own tests
(``tests/test_slurm_classify.py``, ``tests/test_slurm_observe.py``).

Every scenario is provoked for real by :mod:`dispatch_slurm.provoke`; node failure kills
slurmd and a background thread brings it back once Slurm has declared the job's node
failed, so the tests after it find a healthy node.
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

from dispatch import Backend, CauseKind, JobSpec
from dispatch_testing.harness import Harness, NotProvokable, Provoked, Scenario

from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.provoke import (
    START_SCRIPT,
    STATE_DIR,
    CannotProvoke,
    Provocation,
    Provoker,
    cgroup_memory,
)


class SlurmHarness(Harness):
    poll_interval = 1.0
    timeout = 120.0

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self._backend: SlurmBackend | None = None
        self._workdir = ""
        self._restorer: threading.Thread | None = None

    # -- the backend under test ---------------------------------------------------------

    def plugin(self) -> object:
        if not self.live:
            raise NotProvokable(
                "dispatch-slurm has no offline tier in the kit: its recorded Slurm answers are "
                "tested in its own suite; run dispatch-conformance slurm --live"
            )
        env = dict(os.environ, SKIP_APT="1" if shutil.which("sbatch") else "0")
        done = subprocess.run(["bash", str(START_SCRIPT)], env=env, capture_output=True,
                              text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"start-slurm.sh failed: {done.stdout}{done.stderr}")
        self._workdir = tempfile.mkdtemp(prefix="dispatch-kit-slurm-", dir="/var/tmp")
        os.chmod(self._workdir, 0o777)
        self._backend = SlurmBackend()
        return self._backend

    def close(self) -> None:
        self._wait_restored()
        listed = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True,
                                timeout=60, check=False).stdout.split("\n")
        mine = [line.split()[0] for line in listed
                if len(line.split()) == 2 and line.split()[1].startswith(("dsp.kit-",
                                                                           "dispatch-slurm-helper"))]
        if mine:
            subprocess.run(["scancel", *mine], capture_output=True, timeout=60, check=False)
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    # -- what to run --------------------------------------------------------------------

    def _provoker(self, backend: Backend) -> Provoker:
        return Provoker(backend.submit, self._workdir)

    def long_spec(self) -> JobSpec:
        return JobSpec(name="kit-long", command=("sleep", "3600"), workdir=self._workdir,
                       options={"output": f"{self._workdir}/%j.out"})

    def quick_spec(self) -> JobSpec:
        return JobSpec(name="kit-quick", command=("true",), workdir=self._workdir,
                       options={"output": f"{self._workdir}/%j.out"})

    def calls(self) -> int:
        assert self._backend is not None
        return self._backend.runner.calls

    # -- scenarios ----------------------------------------------------------------------

    def scenarios(self) -> Set[Scenario]:
        return frozenset(Scenario) - set(self.not_provokable())

    def not_provokable(self) -> Mapping[Scenario, str]:
        usable, why = cgroup_memory()
        return {} if usable else {Scenario.OUT_OF_MEMORY: why}

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        self._wait_restored()
        p = self._provoker(backend)
        try:
            return self._provoke(scenario, p, job_id)
        except CannotProvoke as exc:
            raise NotProvokable(str(exc)) from exc

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
            return Provoked(object_id=oid, timeout=self.timeout,
                            native_cause=CauseKind.PREEMPTED)
        if scenario is Scenario.NODE_LOST:
            oid = p.long(job_id, partition="low", requeue="no")
            p.wait_state(oid, {"RUNNING"})
            time.sleep(3)  # srun launches its step through slurmd: let it
            p.kill_slurmd()
            self._restorer = threading.Thread(target=self._restore_after, args=(p, oid),
                                              daemon=True)
            self._restorer.start()
            return Provoked(object_id=oid, timeout=self.timeout)
        raise NotProvokable(f"no way to provoke {scenario} on Slurm")

    def _restore_after(self, p: Provoker, object_id: str) -> None:
        """Bring slurmd back once Slurm declared the node failed (or after 2 minutes)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if p.state(object_id) not in ("RUNNING", "COMPLETING", ""):
                    break
            except Exception:
                pass
            time.sleep(1)
        time.sleep(2)
        p.restore_node()

    def _wait_restored(self) -> None:
        if self._restorer is not None:
            self._restorer.join(timeout=240)
            self._restorer = None

    # -- unreachable --------------------------------------------------------------------

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """slurmctld really stopped; the start script brings it back (jobs survive)."""
        self._wait_restored()
        pidfile = STATE_DIR / "slurmctld.pid"
        _stop(pidfile)
        try:
            yield
        finally:
            subprocess.run(["bash", str(START_SCRIPT)], env=dict(os.environ, SKIP_APT="1"),
                           check=True, capture_output=True, timeout=180)


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
