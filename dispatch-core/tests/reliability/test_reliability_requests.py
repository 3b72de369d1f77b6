"""Two people resubmitting one held job at once: real processes on one
SQLite record race their requests; exactly one resolves the hold, the other is told, in
words naming the hold, and resolves nothing else."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from dispatch_testing.crash import Machine

RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from datetime import UTC, datetime
    from dispatch.model.errors import NotAllowed
    from dispatch.job_records import load_job, request
    from dispatch.core.interventions import current_hold, resubmit
    from dispatch.store.sqlite import SQLiteStore

    record, job, actor, barrier = sys.argv[1:]
    with SQLiteStore(record) as store:
        seen = current_hold(load_job(store, job))  # the hold this person looked at
        Path(barrier + "." + actor).touch()
        while not Path(barrier).exists():
            time.sleep(0.001)
        try:
            request(store, job, lambda j: resubmit(
                j, actor=actor, now=datetime.now(UTC), hold=seen))
        except NotAllowed as refused:
            print("refused:", refused)
            sys.exit(2)
    print("resolved")
    """
)


@pytest.mark.parametrize("attempt", range(3))
def test_two_concurrent_resubmits_resolve_one_hold_once(machine: Machine, attempt: int) -> None:
    policy = machine.root / "p.toml"
    policy.write_text('[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    job = machine.run("submit", "--policy", str(policy), "--", "sh", "-c", "exit 1").stdout
    job = job.strip().splitlines()[-1]
    machine.until(
        lambda: (
            machine.run("supervise", "--once").returncode == 0
            and machine.json("history", job)[-1:] != []
            and machine.json("history", job)[-1]["event"] == "hold-placed"
        )
    )
    barrier = machine.root / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(machine.record), job, who, str(barrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=machine.env,
        )
        for who in ("ann", "bob")
    ]
    machine.until(lambda: all((machine.root / f"go.{who}").exists() for who in ("ann", "bob")))
    barrier.touch()
    results = [(r.wait(timeout=60), r.communicate()) for r in racers]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], (results, machine.json("history", job))
    (refusal,) = [out for code, (out, _) in results if code == 2]
    assert "refused:" in refusal and "resubmit" in refusal
    history = machine.json("history", job)
    assert [e["event"] for e in history].count("hold-resolved") == 1, history
