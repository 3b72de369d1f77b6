"""Redaction and escaping of long untrusted text, against ``str.replace`` over the same text.

Every error the CLI prints goes through ``dispatch.store.redact_text`` (no password in a
message) and every untrusted field through ``dispatch.cli.render.escaped`` (control
characters escaped). Both must take time linear in the text: a message quoting a
100,000-character job id once took over 20 s to redact. This measures both on texts of
5,000, 20,000 and 100,000 characters (and more with ``--sizes``), each shape that made the
old patterns backtrack, beside a baseline measured in the same run on the same text: one
``str.replace`` of a secret (a single linear pass). Figures: CPU seconds of this process
(best of ``--repeat``) and wall seconds beside them, and the ratio to the baseline's CPU.
Also: the end-to-end ``dispatch status`` of a 100,000-character job id (refused at once).
Run: python benchmarks/redact_long_text.py [--sizes 5000,20000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dispatch.cli.render import escaped
from dispatch.store import redact_text

SHAPES: dict[str, Callable[[int], str]] = {
    "job id (no @)": lambda n: "unknown job " + "x" * n,
    "colons, no @": lambda n: ("a:" * n)[:n] + "/",
    "unclosed quotes": lambda n: ("password='" * n)[:n],
    "escapes": lambda n: ("\x1b[2J\r\n\u202e" * n)[:n],
}


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the fastest of ``repeat`` runs, by CPU."""
    runs = []
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.process_time() - cpu, time.perf_counter() - wall))
    return min(runs)


def cli_figure() -> str:
    dispatch = Path(sys.executable).with_name("dispatch")
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "XDG_STATE_HOME": home, "XDG_CONFIG_HOME": home}
        env.pop("DISPATCH_STORE", None)
        wall = time.perf_counter()
        done = subprocess.run(
            [str(dispatch), "status", "j" * 100_000],
            capture_output=True,
            text=True,
            env=env,
            cwd=home,
            timeout=600,
        )
        took = time.perf_counter() - wall
    return f"dispatch status <100,000-char id>: exit {done.returncode} in {took:.2f} s wall"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,20000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'shape':<16} {'chars':>7}  {'base cpu':>9}  {'redact cpu':>10} {'wall':>8} "
        f"{'x base':>7}  {'escape cpu':>10} {'wall':>8} {'x base':>7}"
    )
    for name, make in SHAPES.items():
        for n in sizes:
            text = make(n)
            base, _ = best(functools.partial(text.replace, "hunter2x", "***"), args.repeat)
            base = max(base, 1e-6)
            redact = functools.partial(redact_text, text, ["hunter2x"])
            red_cpu, red_wall = best(redact, args.repeat)
            esc_cpu, esc_wall = best(functools.partial(escaped, text), args.repeat)
            print(
                f"{name:<16} {n:>7}  {base:>9.5f}  {red_cpu:>10.5f} {red_wall:>8.5f} "
                f"{red_cpu / base:>7.0f}  {esc_cpu:>10.5f} {esc_wall:>8.5f} {esc_cpu / base:>7.0f}"
            )
    print(cli_figure())


if __name__ == "__main__":
    main()
