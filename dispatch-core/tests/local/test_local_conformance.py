"""The conformance kit (dispatch-testing) run against the local backend, fsspec style: the
harness below provokes each ending the local backend declares with real processes.

Every kit test runs; the harness says what it cannot do (count scheduler calls: there is
no remote scheduler) and the kit reports that as xfailed with the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Set
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from dispatch import Backend, Cause, CauseKind, JobSpec, Provenance, Resources
from dispatch.local.backend import LocalBackend
from dispatch.local.records import ProcessIdentity
from dispatch_testing.harness import Harness, NotProvokable, Provoked, Scenario
from dispatch_testing.suite import BackendConformance

#: What the harness writes over an ended object's record: an answer no build can map.
UNMAPPABLE_ANSWER = "EXPLODED at 03:12 (state word from a future build)"


class LocalHarness(Harness):
    name = "local"
    poll_interval = 0.1
    timeout = 30.0

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self.root = Path(tempfile.mkdtemp(prefix="dispatch-local-kit-"))
        self.backend = LocalBackend(state_dir=self.root / "state", stop_grace=0.5)

    def plugin(self) -> object:
        return self.backend

    def close(self) -> None:
        objects = self.backend.state.objects
        if objects.is_dir():
            done = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="kit over")
            for obj in objects.iterdir():
                if obj.name.startswith("local-"):
                    self.backend.dispatch_stop(obj.name, done)
        shutil.rmtree(self.root, ignore_errors=True)

    def scenarios(self) -> Set[Scenario]:
        return {
            Scenario.SUCCESS,
            Scenario.EXIT_NONZERO,
            Scenario.SIGNAL,
            Scenario.TIME_LIMIT,
            Scenario.LAUNCH_FAILED,
            Scenario.CANCELLED_BY_SCHEDULER,
            Scenario.UNMAPPABLE,
        }

    def calls(self) -> int:
        raise NotProvokable(
            "the local backend makes no scheduler calls: discovery reads the index "
            "directory of each job asked and the files of its objects"
        )

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """The state directory replaced by a file, as when its share is unmounted."""
        state = self.backend.state.root
        aside = state.with_name("state-aside")
        os.rename(state, aside)
        state.write_text("")
        try:
            yield
        finally:
            state.unlink()
            os.rename(aside, state)

    def _file(self, object_id: str, name: str) -> Path:
        path = self.backend.state.objects / object_id / name
        deadline = time.monotonic() + self.timeout
        while not path.exists():
            if time.monotonic() >= deadline:
                raise AssertionError(f"{path} did not appear in {self.timeout}s")
            self.wait(self.poll_interval)
        return path

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        spec = self.quick_spec()
        extra: dict[str, object] = {}
        if scenario is Scenario.EXIT_NONZERO:
            spec, extra["exit_code"] = JobSpec(script="exit 3\n"), 3
        elif scenario is Scenario.SIGNAL:
            spec, extra["exit_code"] = JobSpec(script="kill -KILL $$\n"), 128 + 9
        elif scenario is Scenario.TIME_LIMIT:
            spec = self.long_spec().model_copy(
                update={"resources": Resources(time_limit=timedelta(seconds=1))}
            )
        elif scenario is Scenario.LAUNCH_FAILED:
            spec = JobSpec(command=("no-such-command-for-the-kit",))
        elif scenario is Scenario.CANCELLED_BY_SCHEDULER:
            spec = self.long_spec()
        object_id = backend.submit(job_id, 1, spec, False)
        if scenario is Scenario.CANCELLED_BY_SCHEDULER:
            self._file(object_id, "started.json")  # its runner is recorded and running it
            runner = ProcessIdentity.model_validate_json(
                self._file(object_id, "runner.json").read_text()
            )
            os.kill(runner.pid, signal.SIGTERM)  # the local scancel
        elif scenario is Scenario.UNMAPPABLE:
            self._file(object_id, "end.json").write_text(UNMAPPABLE_ANSWER)
            extra["raw"] = UNMAPPABLE_ANSWER
        return Provoked(object_id=object_id, timeout=self.timeout, **extra)  # type: ignore[arg-type]


class TestLocalConformance(BackendConformance):
    """S-2, S-4, S-5, S-6, S-28, S-30, S-31, S-32: the kit's whole suite on ``local``."""

    harness_class = LocalHarness
