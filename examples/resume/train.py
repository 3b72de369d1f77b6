"""A training loop that survives its endings: it resumes from DISPATCH_CHECKPOINT_DIR.

The three lines marked RESUME are all a script needs; the rest stands in for training.
Run it with ``dispatch submit --warn USR1@60s -- python train.py --steps 300``.
"""

import os
import signal
import sys
import time
from pathlib import Path

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 100
ckpt = Path(os.environ.get("DISPATCH_CHECKPOINT_DIR", ".")) / "step"  # RESUME 1
step = int(ckpt.read_text()) if ckpt.exists() else 0  # RESUME 2
beat = os.environ.get("DISPATCH_HEARTBEAT")  # set with --progress-window: beat each step
stop = []
for name in ("SIGUSR1", "SIGTERM"):  # the warning, and a preemption's SIGTERM
    signal.signal(getattr(signal, name), lambda n, _f: stop.append(n))
print(
    f"execution {os.environ.get('DISPATCH_EXECUTION')} resumed="
    f"{os.environ.get('DISPATCH_RESUMED')} starts at step {step}",
    flush=True,
)
while step < steps and not stop:
    time.sleep(0.1)  # one training step
    step += 1
    ckpt.with_suffix(".tmp").write_text(str(step))
    ckpt.with_suffix(".tmp").replace(ckpt)  # RESUME 3: checkpoint atomically
    if beat:
        Path(beat).touch()
print(f"stopped at step {step}" + (f" on signal {stop[0]}" if stop else ": done"), flush=True)
