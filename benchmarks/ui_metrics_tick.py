"""What serving /metrics costs a supervisor's tick (``dispatch supervise --metrics``).

The record and the scheduler of ``supervisor_tick.py`` (N active jobs of 21 events, the
simulated scheduler). Ticks run in this thread; then the same ticks run while another
thread serves /metrics (its own connection to the record, as ``--metrics`` opens) and a
scraper asks for it every --every seconds; rounds with and without scrapes alternate, so
a change in the machine's load falls on both. Printed: the median tick with and without,
wall time and this thread's CPU time (the GIL shared with the scrapes shows in the wall
time), and the ratio. Target: <= 5% more at 10,000 jobs.
Run: python benchmarks/ui_metrics_tick.py [--jobs 10000] [--ticks 30] [--every 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.request

from dispatch import Client
from dispatch.store import open_store
from dispatch.ui.metrics import TickMetrics
from dispatch.ui.server import UI, make_server
from supervisor_tick import build


def ticks(
    supervisor: object, count: int, metrics: TickMetrics, walls: list[float], cpus: list[float]
) -> None:
    from dispatch.job_records import utc_now

    for _ in range(count):
        w, c = time.perf_counter(), time.thread_time()
        report = supervisor.tick()  # type: ignore[attr-defined]
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.thread_time() - c) * 1000)
        metrics.observe(report, utc_now())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--every", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        url = f"sqlite:///{where}/bench.db"
        store = open_store(url)
        supervisor, _ = build(args.jobs, store)
        metrics = TickMetrics()
        supervisor.tick()  # the cold start, not measured
        reader = Client(open_store(url), registry=supervisor.registry)
        server = make_server(UI(reader, pages=False, collectors=[metrics]), "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        address = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        t = time.perf_counter()
        size = len(urllib.request.urlopen(address, timeout=600).read())
        print(f"first scrape (the whole feed): {(time.perf_counter() - t) * 1000:.0f} ms")
        done, scraping = threading.Event(), threading.Event()
        scrapes = [0]

        def scrape() -> None:
            while not done.wait(args.every):
                if scraping.is_set():
                    urllib.request.urlopen(address, timeout=600).read()
                    scrapes[0] += 1

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        off: tuple[list[float], list[float]] = ([], [])
        on: tuple[list[float], list[float]] = ([], [])
        per_round = max(args.ticks // 5, 1)
        for _ in range(5):
            scraping.clear()
            ticks(supervisor, per_round, metrics, *off)
            scraping.set()
            ticks(supervisor, per_round, metrics, *on)
        done.set()
        scraper.join()
        server.shutdown()
        without = statistics.median(off[0]), statistics.median(off[1])
        with_scrapes = statistics.median(on[0]), statistics.median(on[1])
        print(f"{args.jobs} active jobs, {args.ticks} ticks each, {scrapes[0]} scrapes of {size} B")
        print(f"tick without /metrics  wall {without[0]:7.1f} ms  cpu {without[1]:7.1f} ms")
        print(
            f"tick while scraped     wall {with_scrapes[0]:7.1f} ms  cpu {with_scrapes[1]:7.1f} ms"
        )
        print(
            f"ratio                  wall {with_scrapes[0] / without[0]:7.2f}     "
            f"cpu {with_scrapes[1] / without[1]:7.2f}"
        )


if __name__ == "__main__":
    main()
