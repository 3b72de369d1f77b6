"""The HTTP face of the emulator: Kubernetes REST paths on loopback, stdlib only.

Routes ``/api/v1/...`` and ``/apis/<group>/<version>/...`` (namespaced and cluster-scoped,
with the ``status`` subresource), GET/LIST/POST/PATCH/DELETE, ``labelSelector``,
``fieldValidation`` and the Kubernetes ``Status`` error body. :class:`Api` is what each
verb does to the store (admission, JSON patch, propagation policy, the ``log`` and
``eviction`` subresources, injected faults); every mutating request runs one reconcile
step afterwards, like controllers reacting to a watch event. Provoking endings is the
driver's (:mod:`dispatch_kubeflow_testing.emulator.driver`).
"""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from dispatch_kubeflow_testing.emulator.admission import (
    admit_trainjob,
    check_trainjob_update,
    mutate,
)
from dispatch_kubeflow_testing.emulator.faults import Faults, Hung
from dispatch_kubeflow_testing.emulator.store import (
    KUEUE_GROUP,
    POD,
    RESOURCES,
    TRAINJOB,
    ApiError,
    Obj,
    Resource,
    Store,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster


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


def _json_patch(obj: Obj, ops: list[dict[str, Any]]) -> Obj:
    result = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = result
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(target, list):
                target.insert(len(target) if last == "-" else int(last), op["value"])
            else:
                target[last] = op["value"]
        elif op["op"] == "remove":
            target.pop(int(last) if isinstance(target, list) else last, None)
        else:
            raise ApiError(400, "BadRequest", f"unsupported JSON patch op {op['op']!r}")
    return result


#: metadata no controller acts on when it changes (the garbage collector reads owner
#: references only once an owner is gone, which its next pass sees anyway)
BOOKKEEPING = frozenset({"annotations", "ownerReferences"})


def _bookkeeping_only(body: object) -> bool:
    """A patch of annotations or owner references alone: on a real cluster it sets no
    controller's time going, so here it runs no reconcile step."""
    if not isinstance(body, dict) or set(body) != {"metadata"}:
        return False
    meta = body["metadata"]
    return isinstance(meta, dict) and bool(meta) and set(meta) <= BOOKKEEPING


class Api:
    """The API server's verbs on the emulated cluster's store.

    ``reconcile`` runs the controllers one step (the driver's, which may be paused);
    ``evict`` is what the Eviction API does to a pod (a disruption, as a drain's).
    """

    def __init__(
        self,
        store: Store,
        cluster: Cluster,
        reconcile: Callable[[], None],
        evict: Callable[[Obj], None],
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.reconcile = reconcile
        self.evict = evict
        self.faults: list[tuple[str | None, ApiError | bytes]] = []

    def inject(
        self, code: int, reason: str, message: str, *, times: int = 1, resource: str | None = None
    ) -> None:
        """The next ``times`` requests (on ``resource``, a plural, if given) are answered
        with this error instead: an overloaded API server (503, 429) or RBAC (403)."""
        with self.store.lock:
            self.faults.extend([(resource, ApiError(code, reason, message))] * times)

    def garble(self, body: bytes, *, times: int = 1, resource: str | None = None) -> None:
        """The next ``times`` requests (on ``resource``, a plural, if given) are answered
        200 with ``body`` as it is: a proxy's error page, a cut or mangled answer."""
        with self.store.lock:
            self.faults.extend([(resource, body)] * times)

    def handle(self, request: Request, where: Route) -> tuple[int, Obj | bytes]:
        res, ns, name = where.res, where.namespace or "", where.name
        if res.group == KUEUE_GROUP and not self.cluster.kueue_installed:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self.store.lock:
            for index, (resource, fault) in enumerate(self.faults):
                if resource in (None, res.plural):
                    del self.faults[index]
                    if isinstance(fault, bytes):
                        return 200, fault
                    raise fault
            if request.method == "GET" and where.log and name is not None:
                return 200, self._log(ns, name, request.query)
            if request.method == "GET":
                if name is None:
                    return 200, self.store.listing(
                        res, where.namespace, request.query.get("labelSelector")
                    )
                return 200, self.store.get(res, ns, name)
            if request.method == "POST" and where.eviction and name is not None:
                self.evict(self.store.raw(POD, ns, name))
                return 201, {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                }
            if request.method == "POST" and name is None:
                body = request.body or {}
                if res is TRAINJOB:
                    strict = request.query.get("fieldValidation", "Warn") == "Strict"
                    body = admit_trainjob(
                        self.store,
                        ns,
                        body,
                        self.cluster.trainer_version,
                        strict,
                        kueue=self.cluster.kueue_installed,
                    )
                body.pop("status", None) if res is not TRAINJOB else None
                created = self.store.create(res, ns, mutate(res, body))
                self.reconcile()
                return 201, created
            if request.method == "PATCH" and name is not None:
                body = request.body
                if isinstance(body, list):
                    current = self.store.get(res, ns, name)
                    body = _json_patch(current, body)
                if res is TRAINJOB and not where.status:
                    check_trainjob_update(self.store.raw(res, ns, name), body)
                patched = self.store.patch(res, ns, name, body, status=where.status)
                if not _bookkeeping_only(body):
                    # reconciling on a reader's annotation or a submit's owner reference
                    # would let that write advance the cluster under the test (a preempted
                    # pod's deletion confirmed before anyone could see it terminate)
                    self.reconcile()
                return 200, patched
            if request.method == "DELETE" and name is not None:
                options = request.body or {}
                policy = options.get("propagationPolicy") or request.query.get("propagationPolicy")
                grace = options.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
                answer = self.store.delete(
                    res, ns, name, policy, None if grace is None else int(grace)
                )
                self.reconcile()
                return 200, answer
        raise ApiError(
            405, "MethodNotAllowed", f"{request.method} is not supported on {request.path}"
        )

    def _log(self, ns: str, name: str, query: dict[str, str]) -> bytes:
        """``GET .../pods/NAME/log``: the container's output, ``previous=true`` for the run
        before its last restart, ``tailLines``/``limitBytes`` as the API server reads them."""
        pod = self.store.raw(POD, ns, name)
        runs = self.cluster.logs.get((ns, name), [bytearray()])
        container = query.get("container", "node")
        if query.get("previous") == "true":
            if len(runs) < 2:
                raise ApiError(
                    400,
                    "BadRequest",
                    f'previous terminated container "{container}" in pod "{name}" not found',
                )
            data = bytes(runs[-2])
        else:
            if pod["status"].get("phase") == "Pending":
                raise ApiError(
                    400,
                    "BadRequest",
                    f'container "{container}" in pod "{name}" is waiting to start: '
                    "ContainerCreating",
                )
            data = bytes(runs[-1])
        if "tailLines" in query:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(query["tailLines"]) :]) if int(query["tailLines"]) else b""
        if "limitBytes" in query:
            data = data[: int(query["limitBytes"])]
        return data


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


def make_server(
    host: str,
    port: int,
    handle: Handler,
    log: RequestLog,
    token: str,
    faults: Faults | None = None,
) -> Server:
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

        def _answer(
            self, code: int, body: Obj | bytes, headers: dict[str, str] | None = None
        ) -> None:
            # a pod's log is plain text, like the API server's /log subresource
            text = isinstance(body, bytes)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if faults is not None:
                try:
                    error = faults.before()
                except Hung:
                    self.close_connection = True
                    return
                if error is not None:
                    self._answer(error.code, error.body(), error.headers())
                    return
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
