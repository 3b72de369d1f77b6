"""``/metrics`` and ``dispatch metrics``: the record as Prometheus metrics.

A :class:`RecordMetrics` follows the record's feed (``read_feed``): each scrape reads only
the events appended since the last one, so a scrape costs what changed, not the record's
size. Counters (``_total``) count events since the record began, whichever process scrapes;
gauges are the record's state now. No job id is a label. The text is made by
``prometheus_client`` (the format, its escaping and its ``_total``/``_created`` rules are
that library's, not reimplemented here).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.store.base import RecordStore

#: Events read per round while catching up.
BATCH = 20_000


class RecordMetrics:
    """What the record says, folded from its feed; ``collect`` is a prometheus_client
    collector's, so ``generate_latest`` renders it."""

    def __init__(self, store: RecordStore, clock: Any = None) -> None:
        from dispatch.job_records import utc_now

        self.store = store
        self.clock = clock or utc_now
        self.position = 0
        self.lock = threading.Lock()
        self.backend: dict[str, str] = {}
        self.state: dict[str, str] = {}
        self.latest: dict[str, int] = {}
        self.ended: set[tuple[str, int]] = set()
        self.bad: set[str] = set()
        self.endings: Counter[tuple[str, str, str]] = Counter()
        self.recoveries: Counter[tuple[str, str, str]] = Counter()
        self.escalations: Counter[str] = Counter()
        self.holds_placed: Counter[str] = Counter()
        self.preemptions: Counter[str] = Counter()

    def catch_up(self) -> None:
        """Read what was appended since the last call and fold it in."""
        with self.lock:
            while True:
                feed = self.store.read_feed(self.position, BATCH)
                for q in feed.quarantined:
                    self.bad.add(q.job_id)
                for e in feed.events:
                    if e.job_id not in self.bad:
                        self._see(e)
                if feed.position == self.position or not feed.events:
                    self.position = feed.position
                    return
                self.position = feed.position

    def _ending(self, job_id: str, number: int | None, cause: Any) -> None:
        number = self.latest.get(job_id, 0) if number is None else number
        if (job_id, number) in self.ended:
            return
        self.ended.add((job_id, number))
        backend = self.backend.get(job_id, "")
        self.endings[(backend, cause.kind.value, cause.provenance.value)] += 1
        if cause.kind.value == "preempted":
            self.preemptions[backend] += 1

    def _see(self, e: Any) -> None:
        job = e.job_id
        kind = e.type
        if kind == "job-created":
            self.backend[job] = e.backend
            self.state[job] = "pending"
        elif kind == "submission-requested":
            self.latest[job] = e.submission
            if self.state.get(job) != "held":
                self.state[job] = "submitted"
        elif kind == "submission-failed":
            self._ending(job, e.submission, e.cause)
        elif kind == "recovery-started":
            self._ending(job, e.submission, e.cause)
            backend = self.backend.get(job, "")
            self.recoveries[(backend, e.action.value, str(e.rule + 1))] += 1
            self.state[job] = "recovering"
        elif kind == "hold-placed":
            if e.submission is not None:
                self._ending(job, e.submission, e.cause)
            self.holds_placed[self.backend.get(job, "")] += 1
            self.state[job] = "held"
        elif kind == "hold-resolved":
            self.state[job] = "recovering"
        elif kind == "escalation-raised":
            self.escalations[self.backend.get(job, "")] += 1
        elif kind == "outcome-committed":
            if self.latest.get(job):
                self._ending(job, None, e.cause)
            self.state[job] = e.state.value

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.catch_up()
        with self.lock:
            states: Counter[tuple[str, str]] = Counter(
                (self.backend.get(j, ""), s) for j, s in self.state.items()
            )
            jobs = GaugeMetricFamily(
                "dispatch_jobs",
                "Jobs in the record by backend and recorded state (submitted: sent, its "
                "live state is the scheduler's; held: waiting for a person).",
                labels=["backend", "state"],
            )
            for (backend, state), n in sorted(states.items()):
                jobs.add_metric([backend, state], n)
            yield jobs
            held = GaugeMetricFamily(
                "dispatch_jobs_held", "Jobs held for a person now.", labels=["backend"]
            )
            for backend in sorted(set(self.backend.values())):
                held.add_metric([backend], states.get((backend, "held"), 0))
            yield held
            yield _counter(
                CounterMetricFamily,
                "dispatch_endings",
                "Executions ended, by backend, cause kind and provenance.",
                ["backend", "kind", "provenance"],
                self.endings,
            )
            yield _counter(
                CounterMetricFamily,
                "dispatch_preemptions",
                "Executions ended by preemption.",
                ["backend"],
                {(b,): n for b, n in self.preemptions.items()},
            )
            yield _counter(
                CounterMetricFamily,
                "dispatch_recoveries",
                "Recoveries started, by backend, action and the policy rule (1-based).",
                ["backend", "action", "rule"],
                self.recoveries,
            )
            yield _counter(
                CounterMetricFamily,
                "dispatch_holds",
                "Holds placed (a job left to a person).",
                ["backend"],
                {(b,): n for b, n in self.holds_placed.items()},
            )
            yield _counter(
                CounterMetricFamily,
                "dispatch_escalations",
                "Escalations raised (stall notices among them).",
                ["backend"],
                {(b,): n for b, n in self.escalations.items()},
            )
            bad = GaugeMetricFamily(
                "dispatch_jobs_quarantined", "Jobs whose record holds a row that does not decode."
            )
            bad.add_metric([], len(self.bad))
            yield bad
        yield from self._supervisors()

    def _supervisors(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        now: datetime = self.clock()
        beats = [b for b in self.store.beats() if b.stopped_at is None]
        last = GaugeMetricFamily(
            "dispatch_supervisor_last_tick_timestamp_seconds",
            "When each running supervisor last ticked (Unix time).",
            labels=["owner"],
        )
        age = GaugeMetricFamily(
            "dispatch_supervisor_last_tick_age_seconds",
            "Seconds since the most recent tick of any running supervisor (absent: none runs).",
        )
        for b in beats:
            last.add_metric([b.owner], b.last_tick.timestamp())
        if beats:
            age.add_metric([], max((now - max(b.last_tick for b in beats)).total_seconds(), 0.0))
        yield last
        yield age


#: Tick durations the histogram sorts into (seconds).
TICK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class TickMetrics:
    """What ``dispatch supervise --metrics`` adds for its own loop: each tick's duration
    (a histogram), the last tick's time, the backends the last tick could not ask, and the
    ticks' errors. ``observe`` is called after each tick, in the supervisor's thread; it
    only counts, so a tick costs the same with or without a scrape."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.buckets = [0] * len(TICK_BUCKETS)
        self.count = 0
        self.total = 0.0
        self.last: datetime | None = None
        self.unreachable: dict[str, str] = {}
        self.seen: set[str] = set()
        self.errors = 0

    def observe(self, report: Any, ended: datetime) -> None:
        seconds = max((ended - report.at).total_seconds(), 0.0)
        with self.lock:
            for i, bound in enumerate(TICK_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            self.count += 1
            self.total += seconds
            self.last = ended
            self.unreachable = dict(report.unreachable)
            self.seen.update(report.discovery_calls, report.unreachable)
            self.errors += len(report.errors)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        with self.lock:
            buckets = [(str(b), float(n)) for b, n in zip(TICK_BUCKETS, self.buckets, strict=True)]
            buckets.append(("+Inf", float(self.count)))
            yield HistogramMetricFamily(
                "dispatch_supervisor_tick_seconds",
                "How long this supervisor's ticks took.",
                buckets=buckets,
                sum_value=self.total,
            )
            last = GaugeMetricFamily(
                "dispatch_supervisor_tick_last_timestamp_seconds",
                "When this supervisor's last tick ended (Unix time).",
            )
            if self.last is not None:
                last.add_metric([], self.last.timestamp())
            yield last
            down = GaugeMetricFamily(
                "dispatch_backend_unreachable",
                "1 when this supervisor's last tick could not ask the backend.",
                labels=["backend"],
            )
            for backend in sorted(self.seen):
                down.add_metric([backend], 1.0 if backend in self.unreachable else 0.0)
            yield down
            yield CounterMetricFamily(
                "dispatch_supervisor_tick_errors",
                "Errors this supervisor's ticks reported (one per job it could not act on).",
                value=self.errors,
            )


def _counter(factory: Any, name: str, doc: str, labels: list[str], counts: Any) -> Any:
    family = factory(name, doc, labels=labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key), n)
    return family


def render(metrics: RecordMetrics, *more: Any) -> bytes:
    """The Prometheus text format of ``metrics`` (read up to now), and of any ``more``
    collectors (a supervisor's :class:`TickMetrics`)."""
    try:
        from prometheus_client import CollectorRegistry, generate_latest
    except ImportError as exc:  # the optional dependency
        from dispatch.model.errors import BadInput

        raise BadInput("metrics need prometheus_client: pip install 'dispatch-core[ui]'") from exc
    registry = CollectorRegistry(auto_describe=False)
    for collector in (metrics, *more):
        registry.register(collector)
    return generate_latest(registry)


__all__ = ["RecordMetrics", "TickMetrics", "render"]
