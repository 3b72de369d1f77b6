"""A real HTTP server on loopback that records what is POSTed to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Answers each POST with the next status of ``answers`` (then 200) and keeps the
    bodies it answered 2xx to; ``hold`` makes handlers wait until it is set."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts: list[str] = []
        self.answers: list[int] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.entered.set()
                receiver.hold.wait(30)
                with receiver.lock:
                    receiver.attempts.append(self.headers["Idempotency-Key"])
                    code = receiver.answers.pop(0) if receiver.answers else 200
                    if code < 300:
                        receiver.bodies.append(body)
                try:
                    self.send_response(code)
                    self.end_headers()
                except OSError:
                    pass  # the notifier timed out and hung up

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def keys(self) -> list[str]:
        with self.lock:
            return [b["key"] for b in self.bodies]
