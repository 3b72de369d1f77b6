"""A small crash and race campaign (S-28, S-34, S-35, S-49): supervisors SIGKILLed at
random (some at a crash point inside a submit), runners SIGKILLed, cancels racing the
supervisors; every job ends as its command says, no submission runs twice, no budget is
over-spent, and no two commands of one job are ever alive at once. The same engine runs
the long campaign: ``python -m dispatch_testing.crash campaign --jobs 60 --seconds 300``."""

from __future__ import annotations

from dispatch_testing.crash import Campaign, Machine


def test_a_small_campaign_of_kills_and_races_finds_no_violation_S34_S49(
    machine: Machine,
) -> None:
    run = Campaign(machine, jobs=8, supervisors=2, seconds=30.0, kill_every=1.5, seed=7)
    figures = run.run()
    assert run.violations == [], (run.violations, figures)
    assert figures["supervisors SIGKILLed"] >= 1
    assert figures["jobs"] == 8
