"""Discovery of many TrainJobs against the emulated cluster: list calls and wall time (S-32).

Run: .venv/bin/python benchmarks/kubeflow_discovery.py [N]   (default 500)

Submits N two-node TrainJobs through the backend (over HTTP), provokes a mix of endings,
then times ``dispatch_discover`` for 1, 200 (the id-selector limit), and N job ids, and
prints the API calls each made. Figures only; no assertion.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from dispatch import JobSpec, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow_testing.emulator import Emulator


def main(n: int) -> None:
    emu = Emulator(nodes=16).start()
    kubeconfig = emu.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
    backend = KubeflowBackend(KubeflowConfig(kubeconfig=str(kubeconfig)))
    spec = JobSpec(
        name="bench",
        command=("torchrun", "train.py"),
        resources=Resources(nodes=2, gpus_per_node=8),
    )
    jobs = [f"bench-{i:04d}" for i in range(n)]
    started = time.perf_counter()
    with emu.paused():
        names = [
            tags.split_object_id(
                backend.dispatch_submit(job_id=j, submission=1, spec=spec, gated=False)
            )[1]
            for j in jobs
        ]
    print(f"submitted {n} TrainJobs ({2 * n} pods) in {time.perf_counter() - started:.1f}s")
    with emu.paused():
        for i, name in enumerate(names):
            if i % 10 == 1:
                emu.preempt(name)
            elif i % 10 == 2:
                emu.oom(name, pod=1)
            elif i % 10 == 3:
                emu.exit(name, 3)
    emu.settle()  # the emulated controllers act on the provocations as the real ones do
    print(
        f"{'job ids':>8} {'objects':>8} {'list calls':>10} {'other calls':>11} "
        f"{'best s':>8} {'median s':>9}"
    )
    for count in (1, backend.config.selector_limit, n):
        asked = jobs[:count]
        times = []
        for _ in range(5):
            emu.log.clear()
            t0 = time.perf_counter()
            found = backend.dispatch_discover(job_ids=asked)
            times.append(time.perf_counter() - t0)
        lists = len(emu.log.lists())
        others = len(emu.log.entries) - lists
        print(
            f"{count:>8} {len(found.objects):>8} {lists:>10} {others:>11} {min(times):>8.3f} "
            f"{statistics.median(times):>9.3f}"
        )
    kinds: dict[str, int] = {}
    for obj in found.objects:
        key = obj.phase.value + (f"/{obj.cause.kind.value}" if obj.cause else "")
        kinds[key] = kinds.get(key, 0) + 1
    print("classified:", ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    emu.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
