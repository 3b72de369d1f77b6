"""Crash injection for dispatch's own code, kept out of the product (S-34).

``python -m dispatch_testing.crash STEP[@N] [STEP[@N] ...] -- dispatch ARGS...`` runs the
``dispatch`` CLI in this process with crash points installed: the process SIGKILLs itself
the N-th time (default: the first) it reaches one of the named steps, as a power cut or
an OOM kill would stop it. Exit status -9 (or 137 from a shell) says it died there; any
other status says the step was never reached.

The points are installed into dispatch's own classes (the supervisor's ``step`` callback
and the local backend's submit steps), never into a client library, and only in the
process this launcher starts: a product install has no fault hook at all.

Steps (:data:`STEPS`):

- supervisor: ``intent-recorded`` (intents appended, no effect done), ``submitted`` (a
  submit returned, its result not recorded), ``stopped``, ``gate-opened``,
  ``result-recorded``;
- local backend, inside one submit: ``local-draft-written`` (the object's files written
  under their draft name), ``local-object-created`` (moved into place, no runner, not
  indexed), ``local-runner-started`` (its runner started, not indexed yet),
  ``local-indexed`` (indexed, the submit about to return).

:class:`Machine` runs ``dispatch`` (plain or under crash points) for tests, on a state
directory of its own.

Longer than most: the crash points, the launcher that installs them and the campaign that
uses them change together, so they are kept in one module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispatch_testing.waiting import eventually

SUPERVISOR_STEPS = ("intent-recorded", "submitted", "stopped", "gate-opened", "result-recorded")
#: The local backend's submit steps, each after the method of LocalBackend that ends it.
LOCAL_STEPS = {
    "local-draft-written": "_draft",
    "local-object-created": "_move_in",
    "local-runner-started": "_start_runner",
    "local-indexed": "_publish",
}
STEPS = (*SUPERVISOR_STEPS, *LOCAL_STEPS)

USAGE = "usage: python -m dispatch_testing.crash STEP[@N] [STEP[@N] ...] -- dispatch ARGS..."


def parse(words: Sequence[str]) -> dict[str, int]:
    """``["submitted@2"]`` → ``{"submitted": 2}``; a clear error for an unknown step."""
    wanted: dict[str, int] = {}
    for word in words:
        name, _, count = word.partition("@")
        if name not in STEPS:
            raise SystemExit(f"unknown crash step {name!r}; steps: {', '.join(STEPS)}")
        try:
            times = int(count) if count else 1
        except ValueError:
            times = 0
        if times < 1:
            raise SystemExit(f"{word!r}: the count after @ must be a positive integer")
        wanted[name] = times
    return wanted


class Points:
    """The steps to die at, counting how often each was reached."""

    def __init__(self, wanted: dict[str, int]) -> None:
        self.wanted = wanted
        self.reached: dict[str, int] = {}

    def reach(self, name: str) -> None:
        if name not in self.wanted:
            return
        self.reached[name] = self.reached.get(name, 0) + 1
        if self.reached[name] == self.wanted[name]:
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Wrap the supervisor's step callback and the local backend's submit steps."""
        from dispatch.local.backend import LocalBackend
        from dispatch.supervisor import Supervisor

        points = self
        init = Supervisor.__init__

        def supervisor_init(sup: Supervisor, *args: Any, **kwargs: Any) -> None:
            given: Callable[[str], None] | None = kwargs.pop("step", None)

            def step(name: str) -> None:
                points.reach(name)
                if given is not None:
                    given(name)

            init(sup, *args, step=step, **kwargs)

        setattr(Supervisor, "__init__", supervisor_init)  # noqa: B010 - ours, by name
        for name, method in LOCAL_STEPS.items():
            setattr(LocalBackend, method, _after(getattr(LocalBackend, method), name, points))


def _after(fn: Callable[..., Any], name: str, points: Points) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        points.reach(name)
        return result

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(USAGE, file=sys.stderr)
        return 2
    cut = args.index("--")
    steps, command = args[:cut], args[cut + 1 :]
    if not steps or not command or Path(command[0]).name != "dispatch":
        print(USAGE, file=sys.stderr)
        return 2
    Points(parse(steps)).install()
    from dispatch.cli.main import cli

    cli.main(args=command[1:], prog_name="dispatch")
    return 0


#: Set in a test's environment and its jobs', so a cleanup finds what a test left running.
TAG = "RELIABILITY_TEST_TAG"
DISPATCH = str(Path(sys.executable).with_name("dispatch"))
TIMEOUT = 60.0


def tagged(tag: str) -> list[int]:
    """Every live process (but this one) carrying ``TAG=tag`` in its environment."""
    marker = f"{TAG}={tag}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            pids.append(int(entry.name))
    return pids


@dataclass
class Machine:
    """One user's dispatch on this host, its state under ``root``: a SQLite record and
    the local backend (``XDG_STATE_HOME=root/state``)."""

    root: Path
    env: dict[str, str]

    @property
    def tag(self) -> dict[str, str]:
        """The environment entry marking a job as this machine's (for ``spec.env``)."""
        return {TAG: str(self.root)}

    @property
    def local(self) -> Path:
        return self.root / "state" / "dispatch" / "local"

    @property
    def record(self) -> Path:
        return self.root / "state" / "dispatch" / "record.db"

    def argv(self, args: Sequence[str], crash: Sequence[str] = ()) -> list[str]:
        if not crash:
            return [DISPATCH, *args]
        return [sys.executable, "-m", "dispatch_testing.crash", *crash, "--", "dispatch", *args]

    def run(
        self, *args: str, env: dict[str, str] | None = None, crash: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(args, crash),
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=TIMEOUT,
            check=False,
        )

    def start(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        crash: Sequence[str] = (),
        log: Path | None = None,
    ) -> subprocess.Popen[str]:
        """Start ``dispatch ARGS``; its output is piped, or appended to ``log`` (a long-lived
        process must not block on a pipe nobody reads)."""
        if log is None:
            return subprocess.Popen(
                self.argv(args, crash),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**self.env, **(env or {})},
            )
        with open(log, "a") as out:
            return subprocess.Popen(
                self.argv(args, crash),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env={**self.env, **(env or {})},
            )

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        if done.returncode != 0:
            raise AssertionError(f"dispatch {' '.join(args)}: exit {done.returncode}\n{done}")
        return json.loads(done.stdout)

    def objects_of(self, job_id: str) -> list[str]:
        """Every object directory the local backend made for ``job_id``, run or not."""
        found = []
        for meta in sorted(self.local.glob("objects/local-*/meta.json")):
            if json.loads(meta.read_text())["job_id"] == job_id:
                found.append(meta.parent.name)
        return found

    def until(self, what: Callable[[], bool], timeout: float = TIMEOUT, every: float = 0.1) -> None:
        """Wait, bounded, for ``what()``; fail naming it."""
        eventually(what, timeout=timeout, interval=every, what=what.__doc__ or repr(what))


# ---------------------------------------------------------------------- the campaign


@dataclass
class Campaign:
    """A crash and race campaign on one machine: ``jobs`` jobs (flaky, failing, stubborn
    and cancelled ones), ``supervisors`` supervisor processes on one record, SIGKILLed at
    random (some at a crash point inside a submit), runners SIGKILLed at random, and a
    watcher sampling the process table for two live commands of one job. ``run`` returns
    the figures and every violation of the invariants found."""

    machine: Machine
    jobs: int = 24
    supervisors: int = 3
    seconds: float = 90.0
    kill_every: float = 1.0
    seed: int = 1
    store: str | None = None
    lease: float = 3.0
    figures: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def _count(self, name: str, n: int = 1) -> None:
        self.figures[name] = self.figures.get(name, 0) + n

    def _submit(self, index: int, rng: Any) -> tuple[str, str]:
        """One job of one of four kinds; returns (job id, kind)."""
        kind = ("flaky", "fails", "succeeds", "stubborn")[index % 4]
        runs = self.machine.root / f"runs-{index}"
        marker = self.machine.root / f"marker-{index}"
        nap = f"{rng.uniform(0.2, 2.0):.2f}"
        body = {
            "flaky": f"[ -e {marker} ] && exit 0; touch {marker}; sleep {nap}; exit 1",
            "fails": f"sleep {nap}; exit 3",
            "succeeds": f"sleep {nap}; exit 0",
            "stubborn": "trap '' TERM; sleep 600",
        }[kind]
        script = f'echo "$DISPATCH_SUBMISSION $$" >> {runs}; {body}'
        policy = self.machine.root / "policy.toml"
        policy.write_text('[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 2\n')
        done = self.machine.run("submit", "--policy", str(policy), "--", "sh", "-c", script)
        if done.returncode != 0:
            raise AssertionError(f"submit failed: {done}")
        return done.stdout.strip().splitlines()[-1], kind

    def _supervisor(self, rng: Any) -> subprocess.Popen[str]:
        args = ["supervise", "--interval", "0.2", "--lease", str(self.lease)]
        log = self.machine.root / "supervisors.log"
        if rng.random() < 0.3:
            step = rng.choice(STEPS)
            self._count("supervisors started under a crash point")
            return self.machine.start(*args, crash=[f"{step}@{rng.randint(1, 3)}"], log=log)
        self._count("supervisors started")
        return self.machine.start(*args, log=log)

    def _watch(self, job_ids: list[str]) -> None:
        """Two live commands of one job at once is the one thing that must never be."""
        live: dict[str, set[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            for item in environ:
                if item.startswith(b"DISPATCH_JOB_ID="):
                    job = item[16:].decode()
                    pgid = int(stat[stat.rindex(")") + 2 :].split()[2])
                    live.setdefault(job, set()).add(pgid)
        self._count("process-table samples")
        for job, groups in live.items():
            if job in job_ids and len(groups) > 1:
                self.violations.append(f"job {job}: {len(groups)} live command groups at once")

    def _kill_a_runner(self, rng: Any, kinds: dict[str, str]) -> None:
        """SIGKILL the runner of a command that ends by itself (its exit must still count)."""
        runners = list(self.machine.local.glob("objects/local-*/runner.json"))
        rng.shuffle(runners)
        for path in runners:
            if (path.parent / "end.json").exists() or not (path.parent / "started.json").exists():
                continue
            try:
                job = json.loads((path.parent / "meta.json").read_text())["job_id"]
            except (OSError, ValueError, KeyError):
                continue
            if kinds.get(job) == "stubborn" or (path.parent / "exit.json").exists():
                continue
            from dispatch.local.processes import gone
            from dispatch.local.records import ProcessIdentity

            try:
                runner = ProcessIdentity.model_validate_json(path.read_text())
                if gone(runner) is not None:
                    continue  # killed before: its pid may be another process's now
                os.kill(runner.pid, signal.SIGKILL)
            except (OSError, ValueError):
                continue
            self._count("runners SIGKILLed")
            return

    def run(self) -> dict[str, int]:
        import random

        rng = random.Random(self.seed)
        if self.store:
            self.machine.env["DISPATCH_STORE"] = self.store
        kinds = dict(self._submit(i, rng) for i in range(self.jobs))
        self._count("jobs", len(kinds))
        procs = [self._supervisor(rng) for _ in range(self.supervisors)]
        cancelled: set[str] = set()
        deadline = time.monotonic() + self.seconds
        next_kill = time.monotonic() + self.kill_every
        while time.monotonic() < deadline:
            self._watch(list(kinds))
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    self._count(
                        "supervisors died at a crash point"
                        if proc.returncode == -9
                        else f"supervisors exited rc={proc.returncode}"
                    )
                    procs[i] = self._supervisor(rng)
            if time.monotonic() >= next_kill:
                next_kill = time.monotonic() + rng.uniform(0.5, 1.5) * self.kill_every
                victim = rng.randrange(len(procs))
                procs[victim].kill()
                procs[victim].wait()
                self._count("supervisors SIGKILLed")
                procs[victim] = self._supervisor(rng)
                if rng.random() < 0.4:
                    self._kill_a_runner(rng, kinds)
                stubborn = [j for j, k in kinds.items() if k == "stubborn" and j not in cancelled]
                if stubborn and rng.random() < 0.3:
                    job = rng.choice(stubborn)
                    asked = self.machine.run("cancel", job)
                    self._count(f"cancels exit {asked.returncode}")
                    if asked.returncode == 0:
                        cancelled.add(job)
            if self._all_done(list(kinds)):
                break
            time.sleep(0.2)
        for job in [j for j, k in kinds.items() if k == "stubborn" and j not in cancelled]:
            self.machine.run("cancel", job)
            cancelled.add(job)
        settle = time.monotonic() + 120
        while not self._all_done(list(kinds)) and time.monotonic() < settle:
            self._watch(list(kinds))
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    procs[i] = self.machine.start(
                        "supervise",
                        "--interval",
                        "0.2",
                        "--lease",
                        str(self.lease),
                        log=self.machine.root / "supervisors.log",
                    )
            time.sleep(0.3)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._check(kinds)
        return self.figures

    def _all_done(self, job_ids: list[str]) -> bool:
        listed = self.machine.run("list", "--json")
        if listed.returncode != 0:
            return False
        rows = json.loads(listed.stdout)
        rows = rows.get("jobs", rows) if isinstance(rows, dict) else rows
        ended = {r["job_id"] for r in rows if r.get("outcome")}
        return set(job_ids) <= ended

    def _check(self, kinds: dict[str, str]) -> None:
        expected = {"flaky": "succeeded", "fails": "failed", "succeeds": "succeeded"}
        for index, (job, kind) in enumerate(kinds.items()):
            status = self.machine.json("status", job)
            state = status["state"]
            self._count(f"jobs {state}")
            want = "cancelled" if kind == "stubborn" else expected[kind]
            if not status["settled"] or state != want:
                cause = status.get("cause") or {}
                self.violations.append(
                    f"job {job} ({kind}): {state} settled={status['settled']}, expected {want}; "
                    f"cause {cause.get('kind')}: {cause.get('detail')}"
                )
            subs = status["submissions"]
            self._count("submissions", len(subs))
            for sub in subs:
                if len(sub["objects"]) > 1:
                    self._count("duplicate objects stopped", len(sub["objects"]) - 1)
            left = status["budgets"]["rule 1"]  # of 2
            spent = 2 - left
            if left < 0:
                self.violations.append(f"job {job}: budget over-spent ({status['budgets']})")
            if len(subs) != 1 + spent and not (state == "cancelled" and not subs):
                self.violations.append(f"job {job}: {len(subs)} submissions for {spent} units")
            runs = self.machine.root / f"runs-{index}"
            lines = runs.read_text().split() if runs.exists() else []
            numbers = lines[0::2]
            self._count("command runs", len(numbers))
            for number in set(numbers):
                if numbers.count(number) > 1:
                    self.violations.append(
                        f"job {job}: submission {number} ran {numbers.count(number)} times"
                    )
        left = tagged(str(self.machine.root))
        if left:
            self.violations.append(f"processes left running: {left}")


def campaign_main(argv: Sequence[str]) -> int:
    """``python -m dispatch_testing.crash campaign [--jobs N] [--supervisors S] [--seconds T]
    [--seed K] [--store URL]``: print the figures and every violation found."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m dispatch_testing.crash campaign")
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--supervisors", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--kill-every", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", default=None, help="a record store URL (default: SQLite)")
    parser.add_argument("--lease", type=float, default=3.0, help="the supervisors' --lease")
    args = parser.parse_args(list(argv))
    root = Path(tempfile.mkdtemp(prefix="dispatch-campaign-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    env["XDG_STATE_HOME"] = str(root / "state")
    env[TAG] = str(root)
    run = Campaign(
        Machine(root, env),
        jobs=args.jobs,
        supervisors=args.supervisors,
        seconds=args.seconds,
        kill_every=args.kill_every,
        seed=args.seed,
        store=args.store,
        lease=args.lease,
    )
    started = time.monotonic()
    try:
        figures = run.run()
    finally:
        for pid in tagged(str(root)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    print(f"campaign in {root}, {time.monotonic() - started:.0f} s, seed {args.seed}")
    for name, value in sorted(figures.items()):
        print(f"  {name}: {value}")
    print(f"violations: {len(run.violations)}")
    for violation in run.violations:
        print(f"  - {violation}")
    return 1 if run.violations else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["campaign"]:
        sys.exit(campaign_main(sys.argv[2:]))
    sys.exit(main())
