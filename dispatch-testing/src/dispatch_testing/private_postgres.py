"""A PostgreSQL server of a test's own, to restart and cut at will (never the shared one).

``initdb`` into a temporary directory as the ``postgres`` user, on a free port of
127.0.0.1, trust authentication for that address only. The test (or the campaign under
``benchmarks/``) stops it fast or immediately, starts it again, and drops the record's
connections with ``pg_terminate_backend``; :class:`CuttingProxy` loses one answer in
transit (a COMMIT that reached the server, its reply never the client).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """One private server: :attr:`dsn`, :meth:`stop`, :meth:`start`, :meth:`terminate`."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("a private PostgreSQL is run as the postgres user: run as root")
        self.root = Path(tempfile.mkdtemp(prefix="dispatch-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self.port = free_port()
        self.log = self.root / "server.log"
        user = pwd.getpwnam("postgres")
        os.chown(self.root, user.pw_uid, user.pw_gid)
        initdb = [str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        self._as_postgres([*initdb, "--no-sync", "-E", "UTF8"])
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def _as_postgres(self, argv: list[str], timeout: float = 120) -> str:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=self.root,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr}{done.stdout}")
        return done.stdout

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c max_connections=300"
        )
        ctl = [str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options]
        self._as_postgres([*ctl, "-w", "-t", "120", "start"])

    def stop(self, mode: str = "fast") -> None:
        """``fast`` (clients disconnected, a clean shutdown) or ``immediate`` (a crash:
        recovery from the WAL at the next start)."""
        self._as_postgres(
            [str(BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop"]
        )

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def terminate(self, application: str = "dispatch") -> int:
        """Drop every connection named ``application``; how many were dropped."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True, application_name="chaos") as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (application,),
            ).fetchall()
        return sum(1 for (done,) in rows if done)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


class CuttingProxy:
    """A TCP proxy to ``port`` that, when armed with a marker, loses the server's answer
    to the client message holding it: the message reaches the server (so a COMMIT is
    committed), its reply is dropped and both sockets are closed. One cut per arming."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = int(self.listener.getsockname()[1])
        self.marker: bytes | None = None
        self.before_server = False
        self.cuts = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes, *, before_server: bool = False) -> None:
        """Cut at the next client message holding ``marker``; ``before_server``: drop the
        message itself (the server never sees it), instead of its answer."""
        with self._lock:
            self.marker = marker
            self.before_server = before_server

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            cut = threading.Event()
            threading.Thread(target=self._up, args=(client, server, cut), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, cut), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                with self._lock:
                    hit = self.marker is not None and self.marker in data
                    if hit:
                        self.marker = None
                        self.cuts += 1
                        before = self.before_server
                if hit and before:
                    _close(client, server)
                    return
                if hit:
                    cut.set()  # set before the server can answer
                server.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if cut.is_set():  # the answer to the marked message: lost in transit
                    break
                client.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def close(self) -> None:
        self.listener.close()


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
