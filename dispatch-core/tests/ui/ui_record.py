"""A real record for the ``dispatch ui`` tests: jobs run on the simulated scheduler by a
supervisor (a job preempted twice that then succeeded, one held for a person, one running,
and two whose names are HTML), and a server over it on a free loopback port."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from core_bench import policy
from dispatch import Action, CauseKind, Client, JobSpec, Registry
from dispatch.job_records import create_job
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch.ui.server import UI, make_server
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import exit_with, runs_forever, succeed

SCRIPT_NAME = "<script>alert(1)</script>"
IMG_NAME = '"><img src=x onerror=alert(1)>'
#: the scheduler's words of the second preemption: HTML too
REASON = 'Preempted <b onmouseover="alert(2)">by</b> & "urgent"'
#: what the job named SCRIPT_NAME prints (its command is echo: the scheduler runs it)
LOG_LINE = "<script>alert(3)</script> step 1 loss 0.5"
PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 3)
EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


@dataclass
class Record:
    store: RecordStore
    sched: SimScheduler = field(default_factory=SimScheduler)
    jobs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.registry = Registry.from_plugins({"simulated": SimulatedBackend(self.sched)})
        self.sup = Supervisor(self.store, self.registry, owner="sup", clock=self.sched.now)
        self.client = Client(self.store, registry=self.registry)

    def job(
        self,
        name: str,
        *rules: Any,
        checkpoint: str | None = None,
        command: tuple[str, ...] = ("python", "train.py"),
    ) -> str:
        spec = JobSpec(
            command=command,
            resources={"nodes": 2},
            name=name,
            checkpoint_dir=checkpoint,
        )
        job_id = create_job(
            self.store,
            self.registry,
            backend="simulated",
            spec=spec,
            policy=policy(*rules),
            now=self.sched.now(),
        )
        self.jobs[name] = job_id
        self.sched.advance(1)  # each job a second newer than the last
        return job_id

    def settle(self, ticks: int = 6) -> None:
        for _ in range(ticks):
            self.sup.tick()
            self.sched.advance(2)

    def live_object(self, job_id: str) -> str:
        (obj,) = [
            o
            for o in self.sched.objects()
            if o.tags[SimScheduler.TAG_JOB] == job_id and not o.ended
        ]
        return obj.object_id


def make_record(store: RecordStore) -> Record:
    """recovered: preempted twice (the second time in words that hold HTML), then
    succeeded; held: exit 1, held for a person; running: runs; and the two HTML names
    (one prints LOG_LINE)."""
    r = Record(store)
    recovered = r.job("recovered", PREEMPT, checkpoint="/scratch/ckpt/recovered")
    held = r.job("held", EXIT_HOLD)
    running = r.job("running", PREEMPT)
    r.job(SCRIPT_NAME, command=("echo", LOG_LINE))
    img = r.job(IMG_NAME, EXIT_HOLD)
    r.sched.plan(recovered, 1, runs_forever())
    r.sched.plan(recovered, 2, runs_forever())
    r.sched.plan(recovered, 3, succeed(after=3))
    r.sched.plan(held, 1, exit_with(1, after=1))
    r.sched.plan(running, 1, runs_forever())
    r.sched.plan(img, 1, exit_with(3, after=1))
    r.settle()
    r.sched.preempt(r.live_object(recovered))
    r.settle()
    r.sched.preempt(r.live_object(recovered), reason=REASON)
    r.settle(10)
    return r


@contextmanager
def serving(client: Client, **options: Any) -> Iterator[str]:
    """A ``dispatch ui`` server over ``client`` on a free loopback port: its base URL."""
    with serve(UI(client, **options)) as base:
        yield base


@contextmanager
def serve(ui: UI) -> Iterator[str]:
    """``ui`` served on a free loopback port, from a thread: its base URL."""
    server = make_server(ui, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def fetch(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, Any, str]:
    """(status, headers, body) of one request; an HTTP error is an answer, not raised."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.headers, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()
