"""Scripts run by their own interpreter."""

from __future__ import annotations

from collections.abc import Callable

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
