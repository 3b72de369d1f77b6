"""Two hosts, one record: supervisors in network namespaces of their own, their clocks
skewed, sharing one PostgreSQL record (S-35, S-49).

Each host is a network namespace (``ip netns``, as root) reaching a private PostgreSQL
server through its own veth pair: the server listens on the host-side veth addresses
only (never the shared server, never 127.0.0.1), so a supervisor reaches the record the
way a second machine would, over its own link. Each host runs ``dispatch supervise``
with its clock skewed (``DISPATCH_TEST_CLOCK_SKEW``: +30 s on one, -30 s on the other by
default; a supervisor acts by the record's clock all the same, and the run says both the
host clocks and the skew left in the record) and a state directory (notification cursor)
of its own; they share the local backend's state directory, the one scheduler both
watch, and one notification receiver (an HTTP server counting requests per
``Idempotency-Key``, refusing the first try of some). Jobs are recorded with ``dispatch
submit --no-start``, so the first submission of each is an effect the two supervisors
contend for under leases. Meanwhile, in turns, one host is frozen (SIGSTOP) past its
lease and thawed: the other takes its jobs over.

Checked afterwards: no submission made twice and no job ran twice (each job appends its
id and submission number to a file when it runs), every job ended and succeeded, every
notification (hold, escalation, outcome) reached the receiver exactly once per
``job:seq`` and the record's delivery table says delivered, both supervisors alive.

Prints a table (tried, survived, broke); ``--json`` adds the rows as one JSON line.
Exit 1 when anything broke; 2 when the hosts cannot be set up (not root, no ``ip``).

Usage: .venv/bin/python benchmarks/two_hosts.py [--short] [--jobs 60] [--freezes 6]
       [--skew 30] [--lease 40] [--json]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dispatch_testing.private_postgres import PrivatePostgres

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
WAIT = 300.0


class SetupError(RuntimeError):
    """The hosts could not be made (not root, no ``ip``, no free addresses)."""


def sh(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise SetupError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def free_subnets(count: int) -> list[ipaddress.IPv4Network]:
    """``count`` /30 networks in 10.0.0.0/8 no interface of this machine is on."""
    used = [
        ipaddress.ip_interface(word).network
        for line in sh("ip", "-4", "-o", "addr").splitlines()
        for i, word in enumerate(line.split())
        if i > 0 and line.split()[i - 1] == "inet"
    ]
    picked: list[ipaddress.IPv4Network] = []
    rng = random.Random()
    while len(picked) < count:
        base = ipaddress.ip_network(
            f"10.{rng.randrange(100, 250)}.{rng.randrange(0, 256)}.{rng.randrange(0, 64) * 4}/30"
        )
        if not any(base.overlaps(u) for u in used + picked):
            picked.append(base)
    return picked


class Host:
    """One network namespace and its veth pair: ``gateway`` is the root side's address
    (where the record listens for this host), ``address`` the namespace side's."""

    def __init__(self, tag: str, n: int, net: ipaddress.IPv4Network) -> None:
        self.ns = f"dsp-{tag}-h{n}"
        self.outer, self.inner = f"dsp{tag}{n}a", f"dsp{tag}{n}b"
        first, second = list(net.hosts())
        self.gateway, self.address = str(first), str(second)
        self.prefix = net.prefixlen
        self.made: list[str] = []

    def up(self) -> None:
        sh("ip", "netns", "add", self.ns)
        self.made.append("ns")
        sh("ip", "link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        self.made.append("link")
        sh("ip", "link", "set", self.inner, "netns", self.ns)
        sh("ip", "addr", "add", f"{self.gateway}/{self.prefix}", "dev", self.outer)
        sh("ip", "link", "set", self.outer, "up")
        inside = ("ip", "netns", "exec", self.ns)
        sh(*inside, "ip", "addr", "add", f"{self.address}/{self.prefix}", "dev", self.inner)
        sh(*inside, "ip", "link", "set", self.inner, "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "route", "add", "default", "via", self.gateway)

    def down(self) -> None:
        if "link" in self.made:
            subprocess.run(["ip", "link", "del", self.outer], capture_output=True, check=False)
        if "ns" in self.made:
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, check=False)
        self.made.clear()

    def exec(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def reaches_loopback(self, port: int) -> bool:
        """Whether this host reaches the machine's 127.0.0.1 (it must not)."""
        probe = (
            "import socket,sys\n"
            "s=socket.socket();s.settimeout(2)\n"
            f"sys.exit(0 if s.connect_ex(('127.0.0.1',{port}))==0 else 1)"
        )
        done = subprocess.run(self.exec([sys.executable, "-c", probe]), check=False, timeout=30)
        return done.returncode == 0


class VethPostgres(PrivatePostgres):
    """A private server listening on the hosts' veth gateways only, trusting their links."""

    def __init__(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        super().__init__()

    def start(self) -> None:
        hba = self.data / "pg_hba.conf"
        lines = [f"host all all {h.gateway}/{h.prefix} trust" for h in self.hosts]
        text = hba.read_text()
        if lines[0] not in text:
            hba.write_text(text + "\n" + "\n".join(lines) + "\n")
        listen = ",".join(h.gateway for h in self.hosts)
        options = (
            f"-p {self.port} -c listen_addresses={listen} -k {self.root} "
            "-c fsync=off -c max_connections=300"
        )
        ctl = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", str(self.data), "-l", str(self.log)]
        self._as_postgres([*ctl, "-o", options, "-w", "-t", "120", "start"])

    def dsn_via(self, host: Host, database: str) -> str:
        return f"postgresql://postgres@{host.gateway}:{self.port}/{database}"


class Receiver:
    """Counts POSTs per Idempotency-Key; the first try of every third key is refused (503)
    so a delivery is retried, by whichever host comes next."""

    def __init__(self, address: str) -> None:
        self.ok: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.keyed_body: dict[str, bool] = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    refuse = hash(key) % 3 == 0 and not receiver.refused[key]
                    if refuse:
                        receiver.refused[key] += 1
                    else:
                        receiver.ok[key] += 1
                        receiver.keyed_body[key] = body.get("key") == key
                self.send_response(503 if refuse else 200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def hosts(count: int) -> Iterator[list[Host]]:
    """``count`` hosts, torn down whatever happens."""
    if os.geteuid() != 0:
        raise SetupError("network namespaces need root (ip netns)")
    if shutil.which("ip") is None:
        raise SetupError("the ip command (iproute2) is not installed")
    tag = uuid.uuid4().hex[:5]
    made = [Host(tag, n, net) for n, net in enumerate(free_subnets(count), start=1)]
    try:
        for host in made:
            host.up()
        yield made
    finally:
        for host in made:
            host.down()


class Campaign:
    def __init__(self, args: argparse.Namespace, made: list[Host]) -> None:
        self.args = args
        self.hosts = made
        self.work = Path(tempfile.mkdtemp(prefix="dispatch-two-hosts-"))
        os.chmod(self.work, 0o755)
        self.runs = self.work / "runs.txt"
        self.pg = VethPostgres(made)
        self.database = f"two_hosts_{uuid.uuid4().hex[:8]}"
        import psycopg

        with psycopg.connect(self.pg.dsn_via(made[0], "postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.database}")
        self.receiver = Receiver(made[0].gateway)
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
        self.base |= {
            "DISPATCH_NOTIFY_URL": self.receiver.url,
            "DISPATCH_LOCAL_DIR": str(self.work / "scheduler"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
            "XDG_CONFIG_HOME": str(self.work / "config"),
        }
        self.sups: list[subprocess.Popen[bytes]] = []
        self.skews = [args.skew if n % 2 == 0 else -args.skew for n in range(len(made))]

    def env(self, n: int) -> dict[str, str]:
        """Host ``n``'s environment (-1: the person's CLI, on the machine itself)."""
        host = self.hosts[max(n, 0)]
        env = self.base | {"DISPATCH_STORE": self.pg.dsn_via(host, self.database)}
        env["XDG_STATE_HOME"] = str(self.work / (f"host{n}" if n >= 0 else "cli"))
        if n >= 0:
            env["DISPATCH_TEST_CLOCK_SKEW"] = str(self.skews[n])
        return env

    def dispatch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            env=self.env(-1),
            timeout=WAIT,
            cwd=self.work,
            check=False,
        )

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        import psycopg

        dsn = self.pg.dsn_via(self.hosts[0], self.database)
        with psycopg.connect(dsn, connect_timeout=10, application_name="campaign") as conn:
            return conn.execute(query).fetchall()

    def until(self, what: str, check: Any, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}; logs in {self.work}")
            time.sleep(0.25)

    def run(self) -> list[dict[str, object]]:
        a = self.args
        isolated = [not h.reaches_loopback(self.pg.port) for h in self.hosts]
        assert self.dispatch("list").returncode == 0  # creates the record's tables
        for n, host in enumerate(self.hosts):
            self.sups.append(
                subprocess.Popen(
                    host.exec(
                        [DISPATCH, "supervise", "--interval", "0.5", "--lease", str(a.lease)]
                    ),
                    env=self.env(n),
                    cwd=self.work,
                    stdout=subprocess.DEVNULL,
                    stderr=open(self.work / f"supervisor-{n}.log", "w"),
                )
            )
        self.until(
            "both supervisors to tick",
            lambda: len(self.sql("SELECT owner FROM dispatch_supervisors")) == len(self.hosts),
        )
        self.until(
            "the sink's start to be recorded",
            lambda: len(self.sql("SELECT sink FROM dispatch_delivery_sinks")) == 1,
        )
        script = f'echo "$DISPATCH_JOB_ID $DISPATCH_SUBMISSION" >> {self.runs}; sleep 1'
        jobs: list[str] = []
        freezes: list[bool] = []
        freeze_at = {round((i + 1) * a.jobs / (a.freezes + 1)) for i in range(a.freezes)}
        for i in range(a.jobs):
            if i in freeze_at:
                freezes.append(self.freeze(len(freezes) % len(self.hosts)))
            out = self.dispatch("submit", "--no-start", "--name", f"j{i}", "--", "sh", "-c", script)
            if out.returncode == 0 and out.stdout.strip():
                jobs.append(out.stdout.split()[0])
            time.sleep(a.gap)
        self.until(
            "every job to end",
            lambda: self.sql("SELECT count(*) FROM dispatch_jobs WHERE outcome IS NULL")[0][0] == 0,
        )
        told = {
            f"{j}:{s}"
            for j, s in self.sql(
                "SELECT job_id, seq FROM dispatch_events WHERE type IN "
                "('hold-placed', 'escalation-raised', 'outcome-committed')"
            )
        }

        def delivered() -> int:
            rows = self.sql("SELECT count(*) FROM dispatch_deliveries WHERE state = 'delivered'")
            return int(rows[0][0])

        try:
            self.until("every notification to be delivered", lambda: delivered() >= len(told))
        except TimeoutError:
            pass  # counted below as broken
        alive = sum(1 for p in self.sups if p.poll() is None)
        return self.rows(jobs, told, freezes, isolated, alive)

    def host_clock(self, n: int) -> int:
        """How far host ``n``'s clock runs off the machine's, as its processes see it."""
        probe = (
            "from datetime import UTC, datetime\n"
            "from dispatch.job_records import utc_now\n"
            "print(round((utc_now() - datetime.now(UTC)).total_seconds()))"
        )
        argv = self.hosts[n].exec([sys.executable, "-c", probe])
        done = subprocess.run(argv, env=self.env(n), capture_output=True, text=True, check=True)
        return int(done.stdout.strip())

    def freeze(self, n: int) -> bool:
        """Host ``n``'s supervisor stopped past its lease, then thawed; True when the other
        host ticked meanwhile and the thawed one ticks again."""
        sup = self.sups[n]
        sup.send_signal(signal.SIGSTOP)
        try:
            time.sleep(self.args.lease + 5)
        finally:
            sup.send_signal(signal.SIGCONT)
        before = {o: t for o, t in self.sql("SELECT owner, last_tick FROM dispatch_supervisors")}
        try:
            self.until(
                "both supervisors to tick after a freeze",
                lambda: all(
                    t > before[o]
                    for o, t in self.sql("SELECT owner, last_tick FROM dispatch_supervisors")
                ),
                timeout=120,
            )
        except TimeoutError:
            return False
        return sup.poll() is None

    def rows(
        self,
        jobs: list[str],
        told: set[str],
        freezes: list[bool],
        isolated: list[bool],
        alive: int,
    ) -> list[dict[str, object]]:
        outcomes = dict(self.sql("SELECT job_id, outcome FROM dispatch_jobs"))
        created = Counter(
            (j, s)
            for j, s in self.sql(
                "SELECT job_id, body::json->>'submission' FROM dispatch_events "
                "WHERE type = 'submission-created'"
            )
        )
        submissions = Counter(j for j, _ in created)
        ran = Counter(
            line.split()[0] for line in self.runs.read_text().splitlines() if line.strip()
        )
        rows_of_deliveries = self.sql("SELECT job_id, seq, state FROM dispatch_deliveries")
        with self.receiver.lock:
            ok, refused = Counter(self.receiver.ok), Counter(self.receiver.refused)
            keyed = dict(self.receiver.keyed_body)
        beats = self.sql("SELECT owner, host FROM dispatch_supervisors")
        # each supervisor records its last tick by the clock it acts by: the record's
        ticks = sorted(t for (t,) in self.sql("SELECT last_tick FROM dispatch_supervisors"))

        def row(what: str, tried: int, broke: int) -> dict[str, object]:
            return {"what": what, "tried": tried, "survived": tried - broke, "broke": broke}

        twice_submitted = [k for k, n in created.items() if n > 1]
        resubmitted = [j for j, n in submissions.items() if n > 1]
        twice_run = [j for j, n in ran.items() if n > 1]
        undelivered = [k for k in told if ok[k] == 0]
        delivered_twice = [k for k in told if ok[k] > 1]
        unkeyed = [k for k in told if not keyed.get(k, False)]
        unfinished_rows = [r for r in rows_of_deliveries if r[2] != "delivered"]
        self.details = {
            "host clocks (s)": [self.host_clock(n) for n in range(len(self.hosts))],
            "skew seen in the record (s)": round((ticks[-1] - ticks[0]).total_seconds()),
            "lease": self.args.lease,
            "supervisors": [list(b) for b in beats],
            "retried deliveries (refused first)": sum(1 for k in told if refused[k]),
            "twice_submitted": twice_submitted[:5],
            "resubmitted": resubmitted[:5],
            "twice_run": twice_run[:5],
            "undelivered": undelivered[:5],
            "delivered_twice": delivered_twice[:5],
        }
        return [
            row(
                "hosts: record reached only over their own veth",
                len(isolated),
                isolated.count(False),
            ),
            row("freezes past the lease: both tick again", len(freezes), freezes.count(False)),
            row("jobs: recorded", self.args.jobs, self.args.jobs - len(jobs)),
            row("jobs: submitted once per submission", len(jobs), len(twice_submitted)),
            row("jobs: one submission (no resubmit)", len(jobs), len(resubmitted)),
            row("jobs: ran once", len(jobs), len(twice_run) + sum(1 for j in jobs if not ran[j])),
            row(
                "jobs: succeeded",
                len(jobs),
                sum(1 for j in jobs if outcomes.get(j) != "succeeded"),
            ),
            row("notifications: delivered", len(told), len(undelivered)),
            row("notifications: once per job:seq", len(told), len(delivered_twice)),
            row("notifications: idempotency key in body", len(told), len(unkeyed)),
            row(
                "delivery table: delivered",
                len(rows_of_deliveries),
                len(unfinished_rows) + abs(len(rows_of_deliveries) - len(told)),
            ),
            row("supervisors: alive", len(self.sups), len(self.sups) - alive),
        ]

    def close(self) -> None:
        for p in self.sups:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in self.sups:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(60)
        self.receiver.close()
        self.pg.close()


def table(rows: list[dict[str, object]]) -> str:
    width = max(len(str(r["what"])) for r in rows)
    lines = [f"{'':{width}}  {'tried':>6}  {'survived':>8}  {'broke':>5}"]
    lines += [
        f"{r['what']!s:{width}}  {r['tried']:>6}  {r['survived']:>8}  {r['broke']:>5}" for r in rows
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--short", action="store_true", help="a few jobs and freezes (the test)")
    p.add_argument("--jobs", type=int, default=60)
    p.add_argument("--freezes", type=int, default=6)
    p.add_argument("--skew", type=float, default=30.0, help="seconds; hosts get +skew, -skew")
    p.add_argument("--lease", type=float, default=40.0, help="the supervisors' --lease")
    p.add_argument("--gap", type=float, default=0.5, help="seconds between submits")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.short:
        args.jobs, args.freezes, args.lease, args.gap = 12, 2, 20.0, 0.3
    started = time.monotonic()
    try:
        with hosts(2) as made:
            campaign = Campaign(args, made)
            try:
                rows = campaign.run()
            finally:
                campaign.close()
    except SetupError as exc:
        print(f"two_hosts: cannot set up the hosts: {exc}", file=sys.stderr)
        return 2
    print(table(rows))
    print(f"wall {time.monotonic() - started:.0f} s; {json.dumps(campaign.details)}")
    if args.json:
        print(json.dumps(rows))
    if any(r["broke"] for r in rows):
        print(f"the supervisors' logs are kept in {campaign.work}", file=sys.stderr)
        return 1
    shutil.rmtree(campaign.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
