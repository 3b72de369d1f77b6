"""The HTTP face of the emulator: Kubernetes REST paths on loopback, stdlib only.

Routes ``/api/v1/...`` and ``/apis/<group>/<version>/...`` (namespaced and cluster-scoped,
with the ``status`` subresource), GET/LIST/POST/PATCH/DELETE, ``labelSelector``,
``fieldValidation`` and the Kubernetes ``Status`` error body. Every mutating request runs
one reconcile step afterwards, like controllers reacting to a watch event.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dispatch_kubeflow_testing.emulator.store import RESOURCES, ApiError, Obj, Resource


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    resource: str = ""
    verb: str = ""


@dataclass
class Route:
    res: Resource
    namespace: str | None
    name: str | None
    status: bool
    log: bool = False
    eviction: bool = False


def route(path: str) -> Route:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if not rest:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    res = RESOURCES.get((group, version, rest[0]))
    if res is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    status = len(rest) > 2 and rest[2] == "status"
    log = len(rest) > 2 and rest[2] == "log" and res.plural == "pods"
    eviction = len(rest) > 2 and rest[2] == "eviction" and res.plural == "pods"
    if len(rest) > 3 or (len(rest) == 3 and not (status or log or eviction)):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if res.namespaced and name is not None and namespace is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return Route(res, namespace if res.namespaced else None, name, status, log, eviction)


@dataclass
class RequestLog:
    """Every request the emulator answered, for tests and benchmarks to count."""

    entries: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: Request) -> None:
        with self.lock:
            self.entries.append(request)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()

    def lists(self) -> list[Request]:
        return [r for r in self.entries if r.verb == "list"]


Handler = Callable[[Request, Route], tuple[int, Obj | bytes]]


class Server(ThreadingHTTPServer):
    """Keeps its open connections, so going away closes kept-alive ones too."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def close_everything(self) -> None:
        self.shutdown()
        self.server_close()
        with self.connections_lock:
            for conn in list(self.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self.connections.clear()


def make_server(host: str, port: int, handle: Handler, log: RequestLog, token: str) -> Server:
    connections: set[socket.socket] = set()
    connections_lock = threading.Lock()

    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes: without this, Nagle and delayed
            # ACKs add ~40 ms to every answer on a kept-alive connection
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with connections_lock:
                connections.add(self.connection)

        def finish(self) -> None:
            with connections_lock:
                connections.discard(self.connection)
            super().finish()

        def _answer(self, code: int, body: Obj | bytes) -> None:
            # a pod's log is plain text, like the API server's /log subresource
            text = isinstance(body, bytes)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                if self.headers.get("Authorization") != f"Bearer {token}":
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                body = json.loads(raw) if raw else None
                where = route(url.path)
                verb = {
                    "GET": "get" if where.name else "list",
                    "POST": "create" if not where.eviction else "evict",
                    "PATCH": "patch",
                    "PUT": "update",
                    "DELETE": "delete",
                }.get(method, method.lower())
                resource = where.res.plural + (
                    "/log" if where.log else "/eviction" if where.eviction else ""
                )
                request = Request(method, url.path, query, body, resource, verb)
                log.add(request)
                code, answer = handle(request, where)
            except json.JSONDecodeError as exc:
                code, answer = 400, ApiError(400, "BadRequest", f"invalid JSON body: {exc}").body()
            except ApiError as exc:
                code, answer = exc.code, exc.body()
            self._answer(code, answer)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    server = Server((host, port), _Handler)
    server.connections, server.connections_lock = connections, connections_lock
    return server
