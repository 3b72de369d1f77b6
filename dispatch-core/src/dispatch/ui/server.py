"""The HTTP side of ``dispatch ui``: the standard library's server, GET (and HEAD) only.

Routes: ``/`` the job list, ``/jobs/<id>`` a job's page, ``/jobs/<id>/logs`` its log tail,
``/summary``, ``/metrics`` (Prometheus text), ``/static/...``. Any other method is 405.
Every page carries a Content-Security-Policy that allows only this server's own script and
stylesheet (no inline script, no other origin). Loopback by default; another address
needs a token, given as ``Authorization: Bearer`` or once as ``?token=`` (then a cookie).
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from dispatch.ui.html import Markup, html

if TYPE_CHECKING:
    from dispatch.client import Client

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse an address other than loopback without a token (the pages show every job's
    command and the scheduler's words to whoever can reach them)."""
    from dispatch.model.errors import BadInput

    if not is_loopback(host) and not token:
        raise BadInput(
            f"binding {host} serves the record to whoever reaches that address: give "
            "--token (then ask with 'Authorization: Bearer TOKEN' or ?token=TOKEN once), "
            "or bind 127.0.0.1"
        )


class UI:
    """The pages of one client; one request at a time reads the record."""

    def __init__(
        self,
        client: Client,
        *,
        token: str | None = None,
        clock: Callable[[], datetime] | None = None,
        pages: bool = True,
        collectors: Sequence[Any] = (),
    ) -> None:
        """``pages=False`` serves ``/metrics`` alone (``dispatch supervise --metrics``),
        with ``collectors`` rendered after the record's."""
        from dispatch.ui.metrics import RecordMetrics

        self.client = client
        self.token = token
        # the record's clock, as the supervisors': a lease or an age is judged alike on
        # every host, whatever this host's clock says
        self.clock = clock or client.record_clock
        self.lock = threading.Lock()
        self.metrics = RecordMetrics(client.store, self.clock)
        self.pages = pages
        self.collectors = tuple(collectors)

    def warm(self) -> threading.Thread:
        """Read the record's feed for the metrics now, in a thread, so the first scrape
        does not pay for the whole record (seconds on a big one)."""

        def catch_up() -> None:
            with self.lock:
                try:
                    self.metrics.catch_up()
                except Exception:  # the first scrape tries again and shows the error
                    return

        thread = threading.Thread(target=catch_up, name="metrics-warm", daemon=True)
        thread.start()
        return thread

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``path``."""
        from dispatch.model.errors import DispatchError
        from dispatch.ui import views

        split = urlsplit(path)
        query = dict(parse_qsl(split.query))
        parts = [unquote(p) for p in split.path.split("/") if p]
        page = "text/html; charset=utf-8"
        try:
            with self.lock:
                now = self.clock()
                if parts == ["metrics"]:
                    from dispatch.ui.metrics import render

                    body = render(self.metrics, *self.collectors)
                    return 200, "text/plain; version=0.0.4; charset=utf-8", body
                if not self.pages:
                    return _error(HTTPStatus.NOT_FOUND, "this server has /metrics only")
                if not parts:
                    return 200, page, views.list_page(self.client, query, now).encode()
                if parts == ["summary"]:
                    return 200, page, views.summary_page(self.client, now).encode()
                if len(parts) == 2 and parts[0] == "jobs":
                    return 200, page, views.job_page(self.client, parts[1], now).encode()
                if len(parts) == 3 and parts[0] == "jobs" and parts[2] == "logs":
                    return 200, page, views.logs_page(self.client, parts[1]).encode()
                if len(parts) == 2 and parts[0] == "static" and parts[1] in STATIC:
                    body = resources.files("dispatch.ui").joinpath("static", parts[1]).read_bytes()
                    return 200, STATIC[parts[1]], body
            return _error(HTTPStatus.NOT_FOUND, f"nothing at {split.path}")
        except views.NotFound as exc:
            return _error(HTTPStatus.NOT_FOUND, str(exc))
        except views.BadQuery as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        except DispatchError as exc:  # a record the page cannot read: said in the page
            return _error(HTTPStatus.SERVICE_UNAVAILABLE, f"the record cannot be read: {exc}")

    def allowed(self, headers: Any, path: str) -> tuple[bool, str | None]:
        """Whether the request may be answered, and a cookie to set when the token came
        as ``?token=``. Without a token, only a request naming a loopback host in its
        Host header is answered: a web page elsewhere that points a name of its own at
        127.0.0.1 (DNS rebinding) gets nothing."""
        if not self.token:
            host = urlsplit("//" + headers.get("Host", "")).hostname or ""
            return is_loopback(host), None
        given = headers.get("Authorization", "")
        if given.startswith("Bearer ") and _same(given[7:], self.token):
            return True, None
        cookies = headers.get("Cookie", "")
        for part in cookies.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "dispatch_token" and _same(value, self.token):
                return True, None
        query = dict(parse_qsl(urlsplit(path).query))
        if _same(query.get("token", ""), self.token):
            return True, f"dispatch_token={self.token}; HttpOnly; SameSite=Strict; Path=/"
        return False, None


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8", "replace"))


def _error(status: HTTPStatus, words: str) -> tuple[int, str, bytes]:
    from dispatch.ui.views import layout

    body = layout(
        str(status.value), html('<h1>{}</h1><p class="error">{}</p>', status.phrase, words)
    )
    return status.value, "text/html; charset=utf-8", body.encode()


class Handler(BaseHTTPRequestHandler):
    ui: UI
    server_version = "dispatch-ui"

    def _send(
        self, status: int, kind: str, body: bytes, head: bool, cookie: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        if cookie is not None:
            self.send_header("Set-Cookie", cookie)
        if status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", "GET, HEAD")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _get(self, head: bool) -> None:
        ok, cookie = self.ui.allowed(self.headers, self.path)
        if not ok and not self.ui.token:
            status, kind, body = _error(
                HTTPStatus.FORBIDDEN, "ask for this server by a loopback name (127.0.0.1)"
            )
        elif not ok:
            status, kind, body = _error(HTTPStatus.UNAUTHORIZED, "this server needs its token")
        else:
            status, kind, body = self.ui.answer(self.path)
        self._send(status, kind, body, head, cookie)

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _refuse(self) -> None:
        status, kind, body = _error(
            HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command}: this view is read-only (GET only)"
        )
        self._send(status, kind, body, head=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # every other method, known or not
            return self._refuse
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no request log
        return


def make_server(ui: UI, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """A server for ``ui`` bound to ``host:port`` (port 0: any free one); refuses another
    address than loopback without the UI's token."""
    check_bind(host, ui.token)
    handler = type("BoundHandler", (Handler,), {"ui": ui})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:  # in use, not an address of this host, not allowed
        from dispatch.model.errors import BadInput

        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    server.daemon_threads = True
    return server


__all__ = ["CSP", "UI", "Markup", "check_bind", "make_server"]
