"""``/metrics`` and ``dispatch metrics``: scraped while a supervisor recovers a job, parsed
with prometheus_client's own parser; and the summary page of the same record."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from dispatch.cli.common import Context
from dispatch.cli.main import cli
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.sqlite import SQLiteStore
from dispatch_testing.simulated.scheduler import exit_with, runs_forever, succeed
from prometheus_client.parser import text_string_to_metric_families
from ui.ui_record import EXIT_HOLD, PREEMPT, Record, fetch, serving

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_scraped_while_a_job_recovers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "record.db")
    r = Record(store)
    train = r.job("train", PREEMPT)
    held = r.job("held", EXIT_HOLD)
    r.sched.plan(train, 1, runs_forever())
    r.sched.plan(train, 2, succeed(after=4))
    r.sched.plan(held, 1, exit_with(2, after=1))
    r.settle(3)
    preempted = {"backend": "simulated", "kind": "preempted", "provenance": "scheduler"}
    recovery = {"backend": "simulated", "action": "resubmit", "rule": "1"}
    with serving(r.client, clock=r.sched.now) as base:
        status, headers, body = fetch(base + "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        before = parse(body)
        assert value(before, "dispatch_preemptions_total", backend="simulated") == 0
        assert value(before, "dispatch_jobs_held", backend="simulated") == 1
        assert value(before, "dispatch_jobs", backend="simulated", state="held") == 1
        r.sched.preempt(r.live_object(train))
        r.sup.tick()  # the supervisor sees the preemption and starts the recovery
        during = parse(fetch(base + "/metrics")[2])
        assert value(during, "dispatch_preemptions_total", backend="simulated") == 1
        assert value(during, "dispatch_endings_total", **preempted) == 1
        assert value(during, "dispatch_recoveries_total", **recovery) == 1
        r.settle(8)
        after = parse(fetch(base + "/metrics")[2])
    assert value(after, "dispatch_preemptions_total", backend="simulated") == 1  # counted once
    ended = {"backend": "simulated", "kind": "none", "provenance": "application"}
    assert value(after, "dispatch_endings_total", **ended) == 1
    assert value(after, "dispatch_jobs", backend="simulated", state="succeeded") == 1
    assert value(after, "dispatch_holds_total", backend="simulated") == 1
    assert all("job" not in dict(labels) for _, labels in after)  # no job id is a label
    store.close()


def test_dispatch_metrics_prints_what_the_endpoint_serves(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "record.db")
    r = Record(store)
    train = r.job("train", PREEMPT)
    r.sched.plan(train, 1, runs_forever())
    r.settle(3)
    r.sched.preempt(r.live_object(train))
    r.settle(3)
    now = r.sched.now()
    store.record_beat(
        SupervisorBeat(
            owner="host:1",
            host="host",
            pid=1,
            started_at=now - timedelta(minutes=5),
            last_tick=now - timedelta(seconds=7),
            interval=5,
            lease=90,
        )
    )
    with serving(r.client, clock=r.sched.now) as base:
        served = fetch(base + "/metrics")[2]
    printed = CliRunner().invoke(cli, ["metrics"], obj=Context(store=store, registry=r.registry))
    assert printed.exit_code == 0, printed.output
    cli_samples, served_samples = parse(printed.output), parse(served)
    age = ("dispatch_supervisor_last_tick_age_seconds", ())
    assert served_samples.pop(age) == 7.0 and cli_samples.pop(age) > 7.0  # the real clock
    assert cli_samples == served_samples
    assert value(served_samples, "dispatch_preemptions_total", backend="simulated") == 1
    tick = ("dispatch_supervisor_last_tick_timestamp_seconds", (("owner", "host:1"),))
    assert served_samples[tick] == (now - timedelta(seconds=7)).timestamp()
    store.close()


def test_the_summary_counts_states_endings_time_lost_and_nodes(record: Record) -> None:
    with serving(record.client, clock=record.sched.now) as base:
        status, _, body = fetch(base + "/summary")
    assert status == 200

    def table(name: str) -> list[list[str]]:
        found = re.search(rf'<table id="{name}">(.*?)</table>', body)
        assert found is not None
        rows = re.findall(r"<tr>(.*?)</tr>", found.group(1))
        return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row) for row in rows]

    assert table("by-state") == [["active", "3"], ["succeeded", "2"]]
    assert table("by-cause")[1:] == [
        ["non-zero-exit", "2", "2"],
        ["none", "2", "2"],
        ["preempted", "2", "2"],
    ]
    # recovered named sim-node-001 in each of its three endings; the others one node each
    assert table("nodes") == [
        ["sim-node-001", "3"],
        ["sim-node-003", "1"],
        ["sim-node-007", "1"],
        ["sim-node-009", "1"],
    ]
    lost = re.search(r'<p id="lost">(.*?)</p>', body)
    assert lost is not None and lost.group(1) == "0h 0m 24s"  # two preemptions, 12 s each
