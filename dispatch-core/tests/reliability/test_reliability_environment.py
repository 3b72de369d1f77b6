"""The job gets its submitter's environment, whichever supervisor runs it, and never
dispatch's own configuration (S-44): real CLI processes."""

from __future__ import annotations

from dispatch_testing.crash import Machine


def test_the_submitters_environment_reaches_the_job_not_the_supervisors_S44(
    machine: Machine,
) -> None:
    out = machine.root / "seen"
    store = f"sqlite:///{machine.record}"
    script = f'echo "FOO=$FOO SUP=$SUP STORE=${{DISPATCH_STORE:-unset}}" > {out}'
    job = machine.run(
        "submit", "--", "sh", "-c", script, env={"FOO": "x", "DISPATCH_STORE": store}
    ).stdout.strip()
    assert job
    done = machine.run("supervise", "--once", env={"SUP": "y", "DISPATCH_STORE": store})
    assert done.returncode == 0, done
    machine.until(out.exists)
    assert out.read_text() == "FOO=x SUP= STORE=unset\n"
