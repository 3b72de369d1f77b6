"""``dispatch supervise --once`` and an unreachable backend (S-5): the tick
does what it can, reports the backend, and exits 3 (docs/cli.md: "the scheduler could not
be reached; retry later"), so a cron job or a script sees it; a tick that reached every
backend exits 0."""

from __future__ import annotations

from dispatch_testing.crash import Machine


def test_supervise_once_exits_3_when_a_backend_is_unreachable_S5(machine: Machine) -> None:
    job = machine.run("submit", "--", "true").stdout.strip()
    blocked = machine.root / "not-a-directory"
    blocked.write_text("the local state directory was replaced by a file\n")
    tick = machine.run("supervise", "--once", env={"DISPATCH_LOCAL_DIR": str(blocked)})
    assert tick.returncode == 3, tick
    assert "unreachable local" in tick.stderr + tick.stdout
    assert machine.json("history", job) == []  # S-5: nothing recorded for it

    tick = machine.run("supervise", "--once")
    assert tick.returncode == 0, tick
