"""A script job gets what a command job gets, without a cluster (S-44, S-45, S-47): the
batch script dispatch hands sbatch for ``spec.script`` is a prelude around it, rendered
here and run here by bash as slurmd would run it (Slurm's own variables set by hand, a
stand-in ``squeue`` and ``scancel`` on the PATH). The live tests prove it on Slurm."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch import JobSpec
from dispatch.warning_text import parse_warning
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import CONTRACT, SCRIPT_PRELUDE, WRAPPER, script_body
from dispatch_slurm.warning import LINE
from dispatch_testing.waiting import eventually

#: prints its environment, says it is ready once its traps are set, then waits for the
#: test: STOP (exit 0), a USR1 (the warning: a checkpoint, exit 0) or a TERM (exit 3)
SCRIPT = """#!/bin/bash
#SBATCH --cpus-per-task=2
#SBATCH --job-name=ignored
env > "$WORK/env"
trap 'echo warned > "$WORK/ckpt"; exit 0' USR1
trap 'echo terminated > "$WORK/ckpt"; exit 3' TERM
echo "started"
echo "on stderr" >&2
touch "$WORK/ready"
while [ ! -e "$WORK/stop" ]; do sleep 0.1; done
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A working directory with stand-ins for the two Slurm commands the prelude runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'time_left=0:41 time_limit=1:00'\n")
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/scancel\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return tmp_path


class Batch:
    """The rendered batch script run by bash as the batch step's shell."""

    def __init__(self, work: Path, script: str, **env: str) -> None:
        self.work = work
        path = work / "batch.sh"
        path.write_text(script_body(script))
        self.out, self.err = work / "batch.out", work / "batch.err"
        environ = {
            "PATH": f"{work / 'bin'}:{os.environ['PATH']}",
            "HOME": str(work),
            "TMPDIR": str(work),
            "WORK": str(work),
            "SLURM_JOB_ID": "42",
            "DISPATCH_JOB_ID": "j-script",
            "DISPATCH_SUBMISSION": "1",
            "DISPATCH_CHECKPOINT_DIR": str(work / "ck"),
            **env,
        }
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(
                ["bash", str(path)], env=environ, stdout=out, stderr=err
            )

    def ready(self) -> None:
        eventually(lambda: (self.work / "ready").exists(), timeout=60, what="the script's traps")

    def stop(self) -> None:
        (self.work / "stop").touch()

    def wait(self) -> int:
        return self.process.wait(timeout=60)

    def env(self) -> dict[str, str]:
        lines = (self.work / "env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)


@pytest.fixture
def run(work: Path) -> Iterator[Callable[..., Batch]]:
    started: list[Batch] = []

    def start(script: str, **env: str) -> Batch:
        started.append(Batch(work, script, **env))
        return started[-1]

    yield start
    for batch in started:
        batch.close()


def test_a_script_is_rendered_under_the_prelude_its_sbatch_lines_above_it() -> None:
    body = script_body(SCRIPT)
    lines = body.splitlines()
    assert lines[:3] == ["#!/bin/bash", "#SBATCH --cpus-per-task=2", "#SBATCH --job-name=ignored"]
    assert CONTRACT in body and CONTRACT in WRAPPER  # one contract for scripts and commands
    payload = body.split("<<'DISPATCH_SCRIPT_END'\n", 1)[1].split("\nDISPATCH_SCRIPT_END", 1)[0]
    assert base64.b64decode(payload).decode() == SCRIPT
    assert '"$script" "$@" &' in body
    # sbatch stops reading directives at the first command: so does the copy
    late = "#!/bin/sh\necho hi\n#SBATCH --mem=1G\n"
    assert "#SBATCH" not in script_body(late).split("dispatch-slurm:", 1)[0]


def test_a_script_without_its_own_interpreter_line_is_run_by_sh() -> None:
    body = script_body("#SBATCH --nodes=1\necho plain\n")
    assert body.startswith("#!/bin/bash\n#SBATCH --nodes=1\n")
    assert '/bin/sh "$script" "$@" &' in body


def test_prepare_hands_sbatch_the_prelude_for_every_script_with_or_without_a_warning() -> None:
    backend = SlurmBackend()
    for warn in (None, parse_warning("USR1@60s")):
        spec = JobSpec(script=SCRIPT, warn=warn)
        prepared = backend.dispatch_prepare("j", 1, spec, False)
        assert prepared.text("batch script") == script_body(SCRIPT)
        assert prepared.words("script arguments") == []
    assert SCRIPT_PRELUDE.count("@PAYLOAD@") == 1


@pytest.mark.parametrize(
    "restarts,submission,resumed", [("0", "1", "0"), ("1", "1", "1"), ("0", "2", "1")]
)
def test_a_script_sees_the_execution_resumed_and_unbuffered_python_S44(
    run: Callable[..., Batch], restarts: str, submission: str, resumed: str
) -> None:
    batch = run(SCRIPT, SLURM_RESTART_COUNT=restarts, DISPATCH_SUBMISSION=submission)
    batch.ready()
    batch.stop()
    assert batch.wait() == 0
    env = batch.env()
    assert env["DISPATCH_EXECUTION"] == restarts
    assert env["DISPATCH_RESUMED"] == resumed
    assert env["PYTHONUNBUFFERED"] == "1"
    assert (env["DISPATCH_JOB_ID"], env["DISPATCH_SUBMISSION"]) == ("j-script", submission)
    assert env["DISPATCH_CHECKPOINT_DIR"] == str(batch.work / "ck")
    assert batch.out.read_text() == "started\n" and batch.err.read_text() == "on stderr\n"
    assert not list(batch.work.glob("dispatch-script.*"))  # the script's copy is removed


def test_the_warning_is_noted_and_passed_on_and_the_script_checkpoints_S45(
    run: Callable[..., Batch], work: Path
) -> None:
    warnings = work / "warnings"
    batch = run(
        SCRIPT,
        SLURM_RESTART_COUNT="1",
        DISPATCH_WARN_SIGNAL="USR1",
        DISPATCH_WARNINGS=str(warnings),
    )
    batch.ready()
    batch.process.send_signal(signal.SIGUSR1)  # what Slurm's --signal=B:USR1@S does
    assert batch.wait() == 0
    assert (work / "ckpt").read_text() == "warned\n"
    (line,) = warnings.read_text().splitlines()
    match = LINE.match(line)
    assert match is not None and match.group(1) == "1" and match.group(2) == "SIGUSR1"
    assert "time_left=0:41 time_limit=1:00" in line
    # and on to the script's own steps
    assert (work / "scancel").read_text() == "--quiet --signal=USR1 42\n"


def test_a_signal_slurm_sends_the_batch_shell_reaches_the_script(run: Callable[..., Batch]) -> None:
    batch = run(SCRIPT)
    batch.ready()
    batch.process.send_signal(signal.SIGTERM)  # a preemption's or the time limit's
    assert batch.wait() == 3  # the script's own status, after its checkpoint
    assert (batch.work / "ckpt").read_text() == "terminated\n"


def test_a_script_killed_by_a_signal_ends_the_batch_shell_by_that_signal(
    run: Callable[..., Batch],
) -> None:
    """As for the script alone, Slurm records a signal (0:9), not an exit code 137."""
    batch = run("#!/bin/sh\nkill -9 $$\n")
    assert batch.wait() == -signal.SIGKILL
    batch = run("#!/bin/sh\nexit 7\n")
    assert batch.wait() == 7


def test_the_batch_output_growing_moves_the_heartbeat_S47(
    run: Callable[..., Batch], work: Path
) -> None:
    """Whatever --output and --error name: the prelude's own stdout and stderr are read."""
    beat = work / "beat" / ".dispatch-heartbeat"
    beat.parent.mkdir()
    batch = run(SCRIPT, DISPATCH_HEARTBEAT=str(beat))
    batch.ready()

    def follows() -> bool:
        newest = max(batch.out.stat().st_mtime_ns, batch.err.stat().st_mtime_ns)
        return beat.exists() and beat.stat().st_mtime_ns == newest

    eventually(follows, timeout=60, what="the heartbeat moved up to the batch output")
    os.utime(batch.err, ns=(batch.err.stat().st_atime_ns, beat.stat().st_mtime_ns + 10**9))
    eventually(follows, timeout=60, what="the heartbeat following the output again")
    batch.stop()
    assert batch.wait() == 0


def test_a_command_task_keeps_the_wrappers_own_variable_to_itself_S44(tmp_path: Path) -> None:
    """Each task's shell of the launch wrapper notes a failing status in the file the
    wrapper names in DISPATCH_EXITS, and the command does not see that variable: a command
    and a script see the same DISPATCH_* variables."""
    task = WRAPPER.split("\ntask='", 1)[1].split("'\npids=()", 1)[0]
    exits, seen = tmp_path / "exits.0", tmp_path / "seen"
    env = {
        "PATH": os.environ["PATH"],
        "NODE_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "SLURM_LOCALID": "1",
        "DISPATCH_EXITS": str(exits),
    }
    command = f'echo "RANK=$RANK exits=${{DISPATCH_EXITS-unset}}" > {seen}; exit 3'
    done = subprocess.run(
        ["/bin/sh", "-c", task, "dispatch-task", "sh", "-c", command], env=env, timeout=60
    )
    assert done.returncode == 3
    assert seen.read_text() == "RANK=3 exits=unset\n"
    assert exits.read_text() == "3 3\n"
