"""The kit harness for dispatch-core's ``local`` backend (processes on this machine).

The local backend's "scheduler" is its state directory plus one runner process per object,
so the out-of-band hand is the operating system's: an operator killing a runner is a
cancel outside dispatch; a state directory replaced by a plain file (an unmounted or
broken volume) is an unreachable scheduler; an ``end.json`` a crashed writer left as
garbage is an answer nobody can map. Real processes run, so this tier waits in real time.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from dispatch import Backend, JobSpec, Phase, SubmitRefused

from dispatch_testing.kit.harness import Harness, NotProvokable, Provoked, Scenario

#: what a crashed writer left in end.json: not JSON, so the backend cannot map it
GARBAGE = '{"state": "exited", "cause": {"kind": "non-zero-ex'


class LocalHarness(Harness):
    name = "local"
    poll_interval = 0.2
    timeout = 30.0

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self._tmp = Path(tempfile.mkdtemp(prefix="dispatch-kit-local-"))
        self.root = self._tmp / "state"
        self._backend: Any = None

    def plugin(self) -> object:
        from dispatch.local.backend import LocalBackend

        self._backend = LocalBackend(state_dir=self.root, stop_grace=1.0)
        return self._backend

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def scenarios(self) -> Set[Scenario]:
        return frozenset(
            {
                Scenario.SUCCESS,
                Scenario.EXIT_NONZERO,
                Scenario.SIGNAL,
                Scenario.TIME_LIMIT,
                Scenario.LAUNCH_FAILED,
                Scenario.CANCELLED_BY_SCHEDULER,
                Scenario.UNMAPPABLE,
            }
        )

    def not_provokable(self) -> Mapping[Scenario, str]:
        return {}

    def calls(self) -> int:
        raise NotProvokable(
            "the local backend has no scheduler to call: discovery reads the state "
            "directory, one job index directory per job asked"
        )

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        away = self._tmp / "state-away"
        os.rename(self.root, away)
        self.root.write_text("not a directory: the state volume is not mounted\n")
        try:
            yield
        finally:
            self.root.unlink()
            os.rename(away, self.root)

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        commands: dict[Scenario, tuple[str, ...]] = {
            Scenario.SUCCESS: ("true",),
            Scenario.EXIT_NONZERO: ("sh", "-c", "exit 3"),
            Scenario.SIGNAL: ("sh", "-c", "kill -9 $$"),
            Scenario.TIME_LIMIT: ("sleep", "60"),
            Scenario.LAUNCH_FAILED: ("/nonexistent/dispatch-kit-no-such-program",),
            Scenario.CANCELLED_BY_SCHEDULER: ("sleep", "60"),
            Scenario.UNMAPPABLE: ("true",),
        }
        if scenario not in commands:
            raise NotProvokable(f"the local backend cannot produce {scenario}")
        spec = JobSpec(name=f"kit-{scenario}", command=commands[scenario])
        if scenario is Scenario.TIME_LIMIT:
            spec = spec.model_copy(
                update={
                    "resources": spec.resources.model_copy(
                        update={"time_limit": timedelta(seconds=1)}
                    )
                }
            )
        try:
            object_id = backend.submit(job_id, 1, spec, False)
        except SubmitRefused as exc:
            return Provoked(object_id=None, refused=exc)
        provoked = Provoked(object_id=object_id, timeout=self.timeout)
        if scenario is Scenario.EXIT_NONZERO:
            return Provoked(object_id=object_id, timeout=self.timeout, exit_code=3)
        if scenario is Scenario.SIGNAL:
            return Provoked(object_id=object_id, timeout=self.timeout, exit_code=137)
        if scenario is Scenario.CANCELLED_BY_SCHEDULER:
            self._kill_runner(backend, job_id, object_id)
        if scenario is Scenario.UNMAPPABLE:
            self._until(backend, job_id, lambda o: o.phase is Phase.ENDED)
            (self.root / "objects" / object_id / "end.json").write_text(GARBAGE)
            return Provoked(object_id=object_id, timeout=self.timeout, raw=GARBAGE)
        return provoked

    def _until(self, backend: Backend, job_id: str, ready: Any) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(ready(o) for o in backend.discover([job_id]).of_job(job_id)):
                return
            time.sleep(self.poll_interval)
        raise AssertionError(f"local object of {job_id} never got ready for the scenario")

    def _kill_runner(self, backend: Backend, job_id: str, object_id: str) -> None:
        """An operator's ``kill`` of the runner: a cancel outside dispatch."""
        from dispatch.local.records import ProcessIdentity, read

        self._until(backend, job_id, lambda o: o.phase is Phase.RUNNING)
        runner = read(self.root / "objects" / object_id / "runner.json", ProcessIdentity)
        assert runner is not None, "a running local object has its runner on record"
        os.kill(runner.pid, signal.SIGTERM)
