"""Scripts: run by their own interpreter, and given what a command is given."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from dispatch import CauseKind

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.suite.support import alive, find_object, not_provokable
from dispatch_testing.kit.view import Kit

#: The kit's script: Python, which sh cannot run (sh stops at its syntax error, exit 2).
SCRIPT = """{shebang}
# The dispatch kit's script: JobSpec.script is this text, run by its own #! line.
import sys
print("dispatch kit: the script ran under", sys.executable.rsplit("/", 1)[-1])
sys.exit(0)
"""

#: The kit's script that prints its environment (sh, as ``env`` would for a command).
ENV_SCRIPT = """#!/bin/sh
# The dispatch kit's script: its environment, one KEY=VALUE line each.
env
"""
#: the variables a first submission's execution sees with the same value in any job
SAME_VALUE = ("DISPATCH_SUBMISSION", "DISPATCH_EXECUTION", "DISPATCH_RESUMED", "PYTHONUNBUFFERED")


def parse_env(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            env[key] = value
    return env


def dispatch_variables(env: Mapping[str, str]) -> dict[str, str]:
    """``DISPATCH_*`` and ``PYTHONUNBUFFERED``, without what the job inherited unchanged
    from the process running the kit (the submitter's own environment, not the backend's
    doing)."""
    return {
        k: v
        for k, v in env.items()
        if (k.startswith("DISPATCH_") or k == "PYTHONUNBUFFERED") and os.environ.get(k) != v
    }


def ended(kit: Kit, job: str, object_id: str, what: str) -> None:
    objects = kit.wait_for(job, lambda objs: bool(objs) and not alive(objs), "ended")
    obj = find_object(objects, object_id)
    assert obj is not None and obj.cause is not None and obj.cause.kind is CauseKind.NONE, (
        f"the {what} printing its environment did not succeed: {obj and obj.cause}"
    )


class ScriptTests:
    def test_script_runs_by_its_own_interpreter(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30: ``JobSpec.script`` is the script file's text, run by its own ``#!`` line
        (here Python), never fed to sh: sh stops at the first Python line (exit 2)."""
        script = SCRIPT.format(shebang=kit.harness.python_shebang)
        try:
            spec = kit.harness.script_spec(script)
        except NotProvokable as exc:
            not_provokable(kit, exc)
        assert spec.script == script, "Harness.script_spec must submit the script as given"
        job = new_job()
        object_id = kit.backend.submit(job, 1, spec, False)
        objects = kit.wait_for(job, lambda objs: bool(objs) and not alive(objs), "ended")
        obj = find_object(objects, object_id)
        assert obj is not None and obj.cause is not None
        assert obj.cause.kind is CauseKind.NONE, (
            f"the Python script ended {obj.cause.kind.value} (exit {obj.cause.exit_code}, "
            f"{obj.cause.detail!r}): a script must run by its own #! line "
            f"({kit.harness.python_shebang}), not through sh, which fails it with exit 2"
        )

    def test_a_script_and_a_command_see_the_same_dispatch_environment(
        self, kit: Kit, new_job: Callable[[], str]
    ) -> None:
        """S-44: a ``JobSpec.script`` job sees the same ``DISPATCH_*`` variables (job,
        submission, execution, resumed, checkpoint directory, the warning's and the
        heartbeat's) and ``PYTHONUNBUFFERED`` as a command job, with the same values where
        they do not name the job: each job prints its environment and the two are compared."""
        try:
            script_spec = kit.harness.script_spec(ENV_SCRIPT)
        except NotProvokable as exc:
            not_provokable(kit, exc)
        contract = kit.harness.contract_spec()
        one = contract.resources.model_copy(update={"nodes": 1, "tasks_per_node": 1})
        command_spec = contract.model_copy(update={"resources": one})
        command_job, script_job = new_job(), new_job()
        command_id = kit.backend.submit(command_job, 1, command_spec, False)
        script_id = kit.backend.submit(script_job, 1, script_spec, False)
        ended(kit, command_job, command_id, "command job")
        ended(kit, script_job, script_id, "script job")
        try:
            (command_env,) = kit.harness.task_environments(kit.backend, command_job, command_id, 1)
            script_env = parse_env(kit.harness.script_output(kit.backend, script_job, script_id))
        except NotProvokable as exc:
            not_provokable(kit, exc)
        assert command_env and script_env, (
            f"nothing read of what the jobs printed: command {dict(command_env)}, script "
            f"{script_env} (Harness.task_environments, Harness.script_output)"
        )
        command, script = dispatch_variables(command_env), dispatch_variables(script_env)
        missing = sorted(set(command) - set(script))
        assert not missing, f"a script job does not see {missing}, which a command job sees"
        extra = sorted(set(script) - set(command))
        assert not extra, f"a script job sees {extra}, which a command job does not"
        for key in SAME_VALUE:
            if key in command:
                assert script[key] == command[key], (
                    f"{key}: a command job sees {command[key]!r}, a script job {script[key]!r}"
                )
        for job, seen in ((command_job, command), (script_job, script)):
            if "DISPATCH_JOB_ID" in seen:
                assert seen["DISPATCH_JOB_ID"] == job, f"job {job} sees {seen['DISPATCH_JOB_ID']}"
