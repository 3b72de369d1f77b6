"""Notifications: tell a person when a job is held, escalated or ends.

The notifier reads the record's feed (``RecordStore.read_since``), so it only ever sees
committed events, whoever appended them (a supervisor, ``dispatch give-up``). For each
``hold-placed``, ``escalation-raised`` and ``outcome-committed`` it POSTs a JSON body to a
URL or runs a command with the body on stdin, each with a timeout.

Delivery guarantees, per sink (a URL or command):

- **after the commit**: only events the store returns, so only committed ones;
- **at least once**: a delivery cursor (``position`` in the feed plus the ``(job, seq)``
  keys delivered past it) is written atomically to a file beside the record after each
  success, so a restarted supervisor resumes where the last one stopped; a failing
  delivery is retried with exponential backoff (1 s doubling to 5 min, ``max_attempts``
  times, then logged as dropped) and later events wait for it, keeping the order;
- **never twice for one (job, seq)**: a key in the cursor is never delivered again, and
  one lock file lets one process at a time deliver for a cursor. The one gap left is a
  crash between a receiver's answer and the cursor write; the body and the
  ``Idempotency-Key`` header carry ``job_id:seq`` so a receiver can drop that repeat;
- **never in the tick's way**: delivery runs in a background thread; ``poke`` returns at
  once and nothing a sink does (hang, refuse, fail) reaches the supervisor.

On a record shared by supervisors on several hosts (PostgreSQL: a store with
``claim_delivery``), each host's cursor only says how far it has read; who delivers is
decided in the record. A delivery table holds one row per (sink, job, seq): a supervisor
claims it (for the sink's timeout and a margin, measured by the database's clock, so
skewed host clocks do not matter), sends, and records ``delivered``, ``failed`` (with the
retry time, for any supervisor to take up) or ``dropped``; a row delivered or dropped is
never sent again, and a host reads past an event only once its row is finished. The
sink's start (``since``) is the first notifier's, shared by all. So a person is told once
per (job, seq) whichever supervisors run; the gap left is the same as above (a
supervisor that dies after the receiver answered and before the row is written, whose
claim then expires), which the ``Idempotency-Key`` closes at the receiver.

A first run starts at the events committed after the notifier was made (no flood of
old events).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.model.errors import DecodeError

if TYPE_CHECKING:
    from dispatch.core.cause import Cause
    from dispatch.model.events import Event
    from dispatch.store.base import RecordStore

log = logging.getLogger("dispatch.notify")

EVENTS = ("hold-placed", "escalation-raised", "outcome-committed")
PAGE = 500


def cursor_path(store_url: str | None, sink: Mapping[str, Any]) -> Path:
    """The cursor file: beside a SQLite record, else in the dispatch state directory;
    named for the store and the sink, so a new URL starts a cursor of its own."""
    from dispatch.store import default_store_path, sqlite_path

    key = json.dumps([store_url or "", sink.get("url"), sink.get("command")], default=str)
    name = f"notify-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    url = (store_url or "").strip()
    if url.lower().startswith("sqlite:"):
        return sqlite_path(url).parent / name
    return default_store_path().parent / name


def _shown(url: str) -> str:
    """A URL for the log, without a password or a query value (a ``?token=``) it carries."""
    from dispatch.store.redact import redact_url

    return redact_url(url)


def _now() -> datetime:
    return datetime.now(UTC)


def _page(store: RecordStore, position: int) -> tuple[list[Event], int]:
    """The next page of the feed; past a quarantined row when the store can (read_feed)."""
    read_feed = getattr(store, "read_feed", None)
    if read_feed is not None:
        feed = read_feed(position, limit=PAGE)
        return list(feed.events), int(feed.position)
    return store.read_since(position, limit=PAGE)


def body_of(event: Event, events: Sequence[Event]) -> dict[str, Any]:
    """The JSON body: the event, and the job's status as its record says after it
    (``status`` is null when the job's record does not decode)."""
    from dispatch.core.folding import fold

    key = f"{event.job_id}:{event.seq}"
    mine = [e for e in events if e.seq <= event.seq]
    if not mine or mine[0].seq != 1:
        return {"key": key, "event": event.model_dump(mode="json"), "status": None}
    job = fold(mine)
    cause: Cause | None
    if job.outcome is not None:
        state, cause = job.outcome.state.value, job.outcome.cause
    elif job.hold is not None:
        state, cause = "held", job.hold.cause
    else:
        state, cause = "active", getattr(event, "cause", None)
    return {
        "key": key,
        "event": event.model_dump(mode="json"),
        "status": {
            "job_id": job.job_id,
            "name": job.name,
            "backend": job.backend,
            "state": state,
            "cause": cause.model_dump(mode="json") if cause is not None else None,
            "history": [t.model_dump(mode="json") for t in job.history],
            "escalations": [e.model_dump(mode="json") for e in job.escalations],
        },
    }


class Notifier:
    """Delivers notifications for one store to one sink, in a background thread.

    :param store_url: the record store (the thread opens its own connection).
    :param url: POST the body here (``Content-Type: application/json``), or
    :param command: run this argv with the body on stdin and ``DISPATCH_EVENT``,
        ``DISPATCH_JOB_ID``, ``DISPATCH_SEQ`` in its environment; exit 0 is success.
    :param cursor: the cursor file (see :func:`cursor_path`).
    """

    def __init__(
        self,
        store_url: str | None,
        *,
        cursor: Path,
        url: str | None = None,
        command: Sequence[str] | None = None,
        timeout: float = 10.0,
        events: Sequence[str] | None = None,
        max_attempts: int = 10,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        open_store: Callable[[], RecordStore] | None = None,
    ) -> None:
        if not url and not command:
            raise ValueError("a notifier needs a url or a command")
        self.store_url = store_url
        self.url = url
        self.command = list(command) if command else None
        self.timeout = float(timeout)
        self.events = frozenset(events or EVENTS)
        self.cursor = Path(cursor)
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._open_store = open_store
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._cond = threading.Condition()
        self._asked = 0
        self._passes = 0
        self._thread: threading.Thread | None = None
        self.delivered = 0
        #: Events committed from here on are owed (the cursor's start on a first run).
        self._born = _now()
        #: The sink's name in a shared record's delivery table (the same for every host
        #: configured with this URL or command), and this notifier's name for its claims.
        self.sink = hashlib.sha256(
            json.dumps([url, self.command], default=str).encode()
        ).hexdigest()[:16]
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"

    # ------------------------------------------------------------------ control
    def poke(self) -> None:
        """Deliver whatever was committed since the last look; returns at once."""
        with self._cond:
            self._asked += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="dispatch-notify", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` s) until a delivery pass that began after the last
        ``poke`` has finished; failed deliveries stay scheduled for retry."""
        with self._cond:
            target = self._asked
            if self._thread is None:
                return True
            return self._cond.wait_for(lambda: self._passes >= target, timeout)

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    # ------------------------------------------------------------------ thread
    def _loop(self) -> None:
        store: RecordStore | None = None
        delay: float | None = None
        while not self._closed.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._closed.is_set():
                break
            with self._cond:
                asked = self._asked
            try:
                if store is None:
                    store = self._store()
                delay = self.deliver_pending(store)
            except Exception as exc:  # never let a sink or a store fault kill the thread
                delay = min((delay or self.backoff / 2) * 2, self.max_backoff)
                log.warning(
                    "notifications: %s: %s; retrying in %.0f s", type(exc).__name__, exc, delay
                )
                with contextlib.suppress(Exception):
                    if store is not None:
                        store.close()
                store = None
            with self._cond:
                self._passes = max(self._passes, asked)
                self._cond.notify_all()
        if store is not None:
            store.close()

    def _store(self) -> RecordStore:
        if self._open_store is not None:
            return self._open_store()
        from dispatch.store import open_store

        return open_store(self.store_url)

    # ------------------------------------------------------------------ one pass
    def deliver_pending(self, store: RecordStore) -> float | None:
        """One pass over the feed since the cursor; the seconds until a retry is due, or
        None when nothing waits. Another process delivering for this cursor: skip."""
        with self._locked() as mine:
            if not mine:
                return 1.0
            cursor = self._load()
            shared = callable(getattr(store, "claim_delivery", None))
            if shared:  # the sink's start is the record's, the same on every host
                born = datetime.fromisoformat(cursor["since"])
                cursor["since"] = store.delivery_since(self.sink, born).isoformat()  # type: ignore[attr-defined]
            while True:
                events, position = _page(store, cursor["position"])
                for event in events:
                    wait = (self._shared if shared else self._one)(store, cursor, event)
                    if wait is not None:
                        return wait
                if not events or position == cursor["position"]:
                    return None
                cursor["position"], cursor["done"] = position, []
                self._save(cursor)

    def _one(self, store: RecordStore, cursor: dict[str, Any], event: Event) -> float | None:
        key = f"{event.job_id}:{event.seq}"
        if (
            event.type not in self.events
            or key in cursor["done"]
            or event.at < datetime.fromisoformat(cursor["since"])
        ):
            return None
        failure = cursor["failures"].get(key)
        now = time.time()
        if failure and failure["next_at"] > now:
            return float(failure["next_at"]) - now
        try:
            record = store.read(event.job_id)
        except DecodeError as exc:  # a quarantined job: say so rather than stay silent
            record = []
            log.warning("notification %s: the job's record does not decode: %s", key, exc)
        body = body_of(event, record)
        problem = self._send(event, body)
        if problem is None:
            cursor["done"].append(key)
            cursor["failures"].pop(key, None)
            self.delivered += 1
            self._save(cursor)
            return None
        attempts = (failure or {}).get("attempts", 0) + 1
        if attempts >= self.max_attempts:
            log.error("notification %s dropped after %d attempts: %s", key, attempts, problem)
            cursor["done"].append(key)
            cursor["failures"].pop(key, None)
            self._save(cursor)
            return None
        wait = float(min(self.backoff * 2 ** (attempts - 1), self.max_backoff))
        log.warning("notification %s failed (%s); retry %d in %.0f s", key, problem, attempts, wait)
        cursor["failures"][key] = {"attempts": attempts, "next_at": now + wait, "error": problem}
        self._save(cursor)
        return wait

    def _shared(self, store: Any, cursor: dict[str, Any], event: Event) -> float | None:
        """:meth:`_one` on a shared record: the delivery table decides who sends."""
        key = f"{event.job_id}:{event.seq}"
        if (
            event.type not in self.events
            or key in cursor["done"]
            or event.at < datetime.fromisoformat(cursor["since"])
        ):
            return None
        hold = self.timeout + 30.0
        verdict, attempts, wait = store.claim_delivery(
            self.sink, event.job_id, event.seq, self.owner, hold
        )
        if verdict == "busy":  # another supervisor sends it, or its retry is not due
            return max(float(wait), 0.5)
        if verdict == "mine":
            try:
                record = store.read(event.job_id)
            except DecodeError as exc:
                record = []
                log.warning("notification %s: the job's record does not decode: %s", key, exc)
            problem = self._send(event, body_of(event, record))
            if problem is not None:
                attempts += 1
                if attempts < self.max_attempts:
                    retry = float(min(self.backoff * 2 ** (attempts - 1), self.max_backoff))
                    log.warning(
                        "notification %s failed (%s); retry %d in %.0f s",
                        key,
                        problem,
                        attempts,
                        retry,
                    )
                    store.finish_delivery(
                        self.sink,
                        event.job_id,
                        event.seq,
                        self.owner,
                        outcome="failed",
                        retry_in=retry,
                        error=problem,
                    )
                    return retry
                log.error("notification %s dropped after %d attempts: %s", key, attempts, problem)
            else:
                self.delivered += 1
            store.finish_delivery(
                self.sink,
                event.job_id,
                event.seq,
                self.owner,
                outcome="delivered" if problem is None else "dropped",
                error=problem,
            )
        cursor["done"].append(key)
        self._save(cursor)
        return None

    def _send(self, event: Event, body: dict[str, Any]) -> str | None:
        """Deliver one body; None on success, else what went wrong."""
        data = json.dumps(body).encode()
        if self.url:
            request = urllib.request.Request(
                self.url,
                data=data,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "Idempotency-Key": body["key"],
                    "User-Agent": "dispatch-notify",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    answer.read()
            except urllib.error.HTTPError as exc:
                return f"{_shown(self.url)} answered {exc.code} {exc.reason}"
            except (OSError, ValueError) as exc:
                return f"{_shown(self.url)}: {exc}"
            return None
        env = {
            **os.environ,
            "DISPATCH_EVENT": event.type,
            "DISPATCH_JOB_ID": event.job_id,
            "DISPATCH_SEQ": str(event.seq),
            "DISPATCH_IDEMPOTENCY_KEY": body["key"],
        }
        try:
            done = subprocess.run(
                self.command or [],
                input=data,
                env=env,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"{self.command} did not finish within {self.timeout:g} s"
        except OSError as exc:
            return f"{self.command}: {exc}"
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip()[-200:]
            return f"{self.command} exited {done.returncode}: {tail}"
        return None

    # ------------------------------------------------------------------ cursor file
    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        self.cursor.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.cursor.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _load(self) -> dict[str, Any]:
        try:
            cursor = json.loads(self.cursor.read_text(encoding="utf-8"))
        except FileNotFoundError:
            cursor = {"position": 0, "since": self._born.isoformat(), "done": [], "failures": {}}
            self._save(cursor)
        except (OSError, ValueError) as exc:
            raise OSError(f"notification cursor {self.cursor} unreadable: {exc}") from exc
        return cursor  # type: ignore[no-any-return]

    def _save(self, cursor: dict[str, Any]) -> None:
        tmp = self.cursor.with_name(f".{self.cursor.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(cursor, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.cursor)
