"""``JobHandle``: one job, as :class:`dispatch.Client` gives it back.

Cheap (it holds the client and the id); every question goes to the record and, where it
says so, one fresh look at the scheduler. ``wait`` supervises the job in this process
while it waits, as ``dispatch watch`` does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dispatch.model.errors import DispatchError, Unreachable

if TYPE_CHECKING:
    from dispatch.client import Client
    from dispatch.core.job import Job, Transition
    from dispatch.core.status import Status
    from dispatch.logs import LogChunk
    from dispatch.model.enums import Stream
    from dispatch.supervisor import TickReport


class WaitTimeout(DispatchError, TimeoutError):
    """``JobHandle.wait(timeout=...)`` ran out before the job ended or was held."""

    def __init__(self, status: Status, timeout: float) -> None:
        self.status = status
        super().__init__(
            f"job {status.job_id} is still {status.state.value} after {timeout:g} s "
            "(it goes on; wait again or check its status)"
        )


class JobHandle:
    """One job: ask about it, wait for it, act on it. Cheap: holds only the id."""

    def __init__(self, client: Client, job_id: str) -> None:
        self.client = client
        self.job_id = job_id

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r})"

    def record(self) -> Job:
        """The job as its record says (folded events, no scheduler call)."""
        from dispatch.job_records import load_job

        return load_job(self.client.store, self.job_id)

    def status(self) -> Status:
        """The record plus one fresh look at the scheduler (S-40)."""
        return self.client.status(self.job_id)

    def history(self) -> tuple[Transition, ...]:
        """The committed transitions: recoveries, holds, escalations, the outcome."""
        return self.record().history

    def wait(
        self,
        timeout: float | None = None,
        *,
        on_change: Callable[[Status], None] | None = None,
        interval: float = 2.0,
        on_unreachable: Callable[[str, str], None] | None = None,
        on_status: Callable[[Status], None] | None = None,
    ) -> Status:
        """Supervise the job here until it ends or is held; return its final status.

        :param on_change: called with the status each time its state, its cause or its count of
            escalations changes (a stall escalation changes neither state nor cause).
        :param on_unreachable: called with (backend, problem) when a tick could not ask.
        :param on_status: called with the status after every tick, changed or not (a live
            view: how long it has waited, the scheduler's pending reason).
        :raises WaitTimeout: ``timeout`` seconds passed first (the job goes on).
        """
        from dispatch import units
        from dispatch.model.enums import State

        interval = units.seconds(interval, "interval")
        if timeout is not None:
            timeout = units.seconds(timeout, "timeout", maximum=float("inf"))
        self.record()  # an unknown id fails before anything starts
        deadline = None if timeout is None else time.monotonic() + timeout
        supervisor = self.client.supervisor([self.job_id])
        stop = threading.Event()
        seen: list[tuple[object, ...]] = []
        last: list[Status] = []
        ended: list[bool] = []

        def on_tick(report: TickReport) -> None:
            if on_unreachable is not None:
                for name, problem in report.unreachable.items():
                    on_unreachable(name, problem)
            try:
                status = self.client.status(self.job_id, timeout=self.client.discovery_timeout)
            except Unreachable as exc:
                if on_unreachable is not None:
                    on_unreachable("", str(exc))
                return
            last[:] = [status]
            if on_status is not None:
                on_status(status)
            cause = status.cause
            # an escalation changes neither state nor cause (a stall, S-47): count it too
            key = (
                (status.state, len(status.escalations), cause.kind, cause.detail, cause.exit_code)
                if cause
                else (status.state, len(status.escalations))
            )
            if not seen or seen[-1] != key:
                seen.append(key)
                if on_change is not None:
                    on_change(status)
            if status.settled and (status.state.terminal or status.state is State.HELD):
                ended.append(True)
                stop.set()
            elif deadline is not None and time.monotonic() >= deadline:
                stop.set()

        try:
            supervisor.run(interval=interval, stop=stop, on_tick=on_tick)
        finally:
            supervisor.release()
        if not ended:
            status = (
                last[-1]
                if last
                else self.client.status(self.job_id, timeout=self.client.discovery_timeout)
            )
            raise WaitTimeout(status, timeout or 0.0)
        return last[-1]

    def cancel(self) -> Status:
        """Stop its objects and commit cancelled, by you (S-12)."""
        from dispatch.core import interventions
        from dispatch.job_records import utc_now

        actor, by = self.client.actor, self.client.identity()
        return self.client.request(
            self.job_id,
            lambda job: interventions.cancel(job, actor=actor, now=utc_now(), by=by),
            "cancel requested",
        )

    def resubmit(self) -> Status:
        """Release a held job with a new submission (spends no budget)."""
        from dispatch.core import interventions
        from dispatch.job_records import utc_now

        actor, by = self.client.actor, self.client.identity()
        return self.client.request(
            self.job_id,
            _pinned(
                lambda job, hold: interventions.resubmit(
                    job, actor=actor, now=utc_now(), hold=hold, by=by
                )
            ),
            "resubmitted",
        )

    def give_up(self) -> Status:
        """End a held job as failed, with the cause that ended its execution (S-14)."""
        from dispatch.core import interventions
        from dispatch.job_records import utc_now

        actor, by = self.client.actor, self.client.identity()
        return self.client.request(
            self.job_id,
            _pinned(
                lambda job, hold: interventions.give_up(
                    job, actor=actor, now=utc_now(), hold=hold, by=by
                )
            ),
            "gave up",
        )

    def supersede(self) -> JobHandle:
        """Run this finished job again as a new job naming this one (S-18)."""
        from dispatch.job_records import supersede_job

        new_id = supersede_job(
            self.client.store, self.client.registry, self.job_id, actor=self.client.actor
        )
        return JobHandle(self.client, new_id)

    def logs(
        self,
        *,
        submission: int | None = None,
        stream: str | Stream = "stdout",
        node: str | None = None,
        rank: int | None = None,
        tail: int | None = None,
        follow: bool = False,
        interval: float = 1.0,
    ) -> Iterator[LogChunk]:
        """What the job printed, as :class:`dispatch.logs.LogChunk` s, streamed (S-46).

        Every submission in order (earlier ones after a recovery too), or only
        ``submission``; ``tail`` keeps the last lines of each; ``follow`` goes on until the
        job ends or is held.
        """
        from dispatch.logs import job_logs
        from dispatch.model.selection import LogSelection, as_stream

        asked = LogSelection(
            stream=as_stream(stream), node=node, rank=rank, submission=submission, tail=tail
        )
        job = self.record()
        backend = self.client.backend(job.backend)
        return job_logs(job, backend, self.status, asked, follow=follow, interval=interval)


def _pinned(make: Callable[[Job, int | None], list[Any]]) -> Callable[[Job], list[Any]]:
    """The request made against the hold the first read showed, on every retry: when a
    retry finds that hold resolved by someone else, it is refused, never applied to the
    job's next hold."""
    from dispatch.core.interventions import current_hold

    seen: list[int | None] = []

    def made(job: Job) -> list[Any]:
        if not seen:
            seen.append(current_hold(job))
        return make(job, seen[0])

    return made
