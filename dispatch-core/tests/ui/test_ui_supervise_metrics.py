"""``dispatch supervise --metrics HOST:PORT``: /metrics scraped while the supervisor
recovers a real local job (its script exits 1 once, then succeeds), parsed with
prometheus_client's parser: the recovery by action and rule, the tick histogram, the last
tick; and a bad HOST:PORT refused."""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from typing import Any

from cli.cli_shell import DISPATCH, Shell
from dispatch_testing.waiting import eventually
from prometheus_client.parser import text_string_to_metric_families
from ui.ui_record import fetch

POLICY = '[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 2\n'
#: exits 1 the first time (leaving a mark), 0 the next
SCRIPT = "test -f {mark} && exit 0; touch {mark}; exit 1"
DEADLINE = 120.0


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metrics_url(proc: subprocess.Popen[str]) -> str:
    """The address the supervisor says it serves metrics on (its stderr)."""
    assert proc.stderr is not None
    seen: list[str] = []
    end = time.monotonic() + DEADLINE
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < end:
            if not sel.select(timeout=max(end - time.monotonic(), 0.1)):
                continue
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            found = re.search(r"metrics on (http://\S+/metrics)", line)
            if found:
                return found.group(1)
    raise AssertionError(f"no metrics address; the supervisor said: {''.join(seen)}")


def test_metrics_are_scraped_while_the_supervisor_recovers_a_job(sh: Shell) -> None:
    policy = sh.write("policy.toml", POLICY)
    os.chmod(policy, 0o600)
    work = sh.home / "work"
    work.mkdir()
    script = SCRIPT.format(mark=shlex.quote(str(work / "ran-once")))
    out = sh.run("submit", "--policy", str(policy), "--", "sh", "-c", script)
    assert out.returncode == 0, out.stderr
    proc = subprocess.Popen(
        [DISPATCH, "supervise", "--interval", "0.5", "--metrics", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=sh.env,
        cwd=sh.home,
    )
    try:
        url = metrics_url(proc)
        recovery = (
            "dispatch_recoveries_total",
            (("action", "resubmit"), ("backend", "local"), ("rule", "1")),
        )
        succeeded = ("dispatch_jobs", (("backend", "local"), ("state", "succeeded")))

        def scrape() -> dict[Any, float]:
            status, _, text = fetch(url)
            assert status == 200
            return samples(text)

        scraped = eventually(
            scrape,
            until=lambda got: got.get(succeeded) == 1,
            what="the job recovered and succeeded, as scraped",
            timeout=DEADLINE,
            interval=0.2,
        )
        assert scraped[recovery] == 1
        ended = (
            "dispatch_endings_total",
            (("backend", "local"), ("kind", "non-zero-exit"), ("provenance", "application")),
        )
        assert scraped[ended] == 1
        assert scraped[("dispatch_supervisor_tick_seconds_count", ())] >= 2
        assert scraped[("dispatch_supervisor_tick_last_timestamp_seconds", ())] > 0
        assert scraped[("dispatch_backend_unreachable", (("backend", "local"),))] == 0
        assert fetch(url.replace("/metrics", "/"))[0] == 404  # metrics only: no pages
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_a_metrics_address_that_is_not_host_port_is_refused(sh: Shell) -> None:
    out = sh.run("supervise", "--metrics", "9464")
    assert out.returncode != 0 and "HOST:PORT" in out.stderr


def test_a_detached_or_unit_supervisor_keeps_its_metrics_address(sh: Shell) -> None:
    unit = sh.run("supervise", "--print-systemd-unit", "--metrics", "127.0.0.1:9464")
    assert unit.returncode == 0, unit.stderr
    (start,) = [line for line in unit.stdout.splitlines() if line.startswith("ExecStart=")]
    assert "--metrics 127.0.0.1:9464" in start
    refused = sh.run("supervise", "--status", "--metrics", "127.0.0.1:9464")
    assert (
        refused.returncode != 0 and "--metrics goes with a supervisor that runs" in refused.stderr
    )
