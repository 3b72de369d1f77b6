"""How the dispatch conformance kit drives the example backend (``dispatch-conformance
example``). Its scheduler file is the out-of-band hand: replaced by a directory-less path
it is unreachable; edited, it answers a word the adapter does not know."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from pathlib import Path

from dispatch import Backend, JobSpec, SubmitRefused
from dispatch_testing.kit.harness import Harness, NotProvokable, Provoked, Scenario

from dispatch_example.backend import ExampleBackend

ODD_ANSWER = "zombie (reaped by pid 1)"


class ExampleHarness(Harness):
    name = "example"
    poll_interval = 0.1
    timeout = 20.0
    listing_grace = 2.0  # the file lists an object the moment submit returns

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self.dir = Path(tempfile.mkdtemp(prefix="dispatch-example-kit-"))
        self.backend = ExampleBackend(self.dir / "queue" / "scheduler.json")

    def plugin(self) -> object:
        if self.live:
            raise NotProvokable("the example scheduler is a file on this machine: no live tier")
        return self.backend

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def calls(self) -> int:
        return self.backend.reads

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        queue, away = self.dir / "queue", self.dir / "away"
        queue.rename(away)
        queue.write_text("the scheduler's volume is not mounted")
        try:
            yield
        finally:
            queue.unlink()
            away.rename(queue)

    def scenarios(self) -> Set[Scenario]:
        return {
            Scenario.SUCCESS,
            Scenario.EXIT_NONZERO,
            Scenario.SIGNAL,
            Scenario.LAUNCH_FAILED,
            Scenario.UNMAPPABLE,
        }

    def not_provokable(self) -> Mapping[Scenario, str]:
        return {
            Scenario.CANCELLED_BY_SCHEDULER: "the example scheduler has no operator: only "
            "dispatch's own stop cancels (see test_stop_is_idempotent)"
        }

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        command = {
            Scenario.SUCCESS: ("true",),
            Scenario.EXIT_NONZERO: ("sh", "-c", "exit 4"),
            Scenario.SIGNAL: ("sh", "-c", "kill -9 $$"),
            Scenario.LAUNCH_FAILED: ("/nonexistent/example-no-such-program",),
            Scenario.UNMAPPABLE: ("true",),
        }[scenario]
        try:
            object_id = backend.submit(job_id, 1, JobSpec(command=command), False)
        except SubmitRefused as exc:
            return Provoked(object_id=None, refused=exc)
        codes = {Scenario.EXIT_NONZERO: 4, Scenario.SIGNAL: 137}
        if scenario is not Scenario.UNMAPPABLE:
            return Provoked(object_id, timeout=self.timeout, exit_code=codes.get(scenario))
        # the scheduler's own file says when it ended (not the adapter under test)
        path = self.backend.path
        deadline = time.monotonic() + self.timeout
        while json.loads(path.read_text())[object_id].get("state") in (None, "running"):
            assert time.monotonic() < deadline, "the quick job never ended"
            time.sleep(self.poll_interval)
        table = json.loads(path.read_text())
        table[object_id]["state"] = ODD_ANSWER
        path.write_text(json.dumps(table))
        return Provoked(object_id, timeout=self.timeout, raw=ODD_ANSWER)
