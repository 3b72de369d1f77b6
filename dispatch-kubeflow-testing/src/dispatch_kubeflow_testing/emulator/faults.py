"""Fault switches for the emulated API server, flipped while it serves.

An API server that misbehaves as a whole, for as long as a switch is on (unlike
``Emulator.inject``, which answers the next few requests with an error):

- ``answer(code, reason, message, retry_after=...)``: every request is answered with this
  Kubernetes ``Status`` error (500 from an etcd timeout, 429 or 503 with ``Retry-After``
  from priority-and-fairness or a restarting server);
- ``hang()``: every request is accepted and read, and never answered while the switch is
  on (a frozen kube-apiserver: the kernel still accepts connections); when it goes off the
  held connections are closed unanswered;
- refusing connections is the emulator stopping to listen (``Emulator.go_unreachable``),
  which :meth:`dispatch_kubeflow_testing.emulator.Emulator.misbehave` switches like the
  others.

``clear()`` turns every switch off. The cluster's controllers go on meanwhile (the driver
acts on the store, not through the API), as a cluster's do while its API server is away.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from dispatch_kubeflow_testing.emulator.store import ApiError, Obj


@dataclass(frozen=True)
class ErrorAnswer:
    code: int
    reason: str
    message: str
    retry_after: int | None = None

    def body(self) -> Obj:
        return ApiError(self.code, self.reason, self.message).body()

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


class Faults:
    """What the server does with a request right now: serve it, answer an error, or hang."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._error: ErrorAnswer | None = None
        self._hanging = False
        self._released = threading.Event()
        self._released.set()
        #: requests answered with an error or held unanswered, for tests to count
        self.answered = 0
        self.held = 0

    def answer(
        self, code: int, reason: str, message: str, *, retry_after: int | None = None
    ) -> None:
        with self._lock:
            self._release()
            self._error = ErrorAnswer(code, reason, message, retry_after)

    def hang(self) -> None:
        with self._lock:
            self._error = None
            self._hanging = True
            self._released.clear()

    def clear(self) -> None:
        with self._lock:
            self._error = None
            self._release()

    def _release(self) -> None:
        self._hanging = False
        self._released.set()

    @property
    def on(self) -> bool:
        return self._error is not None or self._hanging

    def before(self) -> ErrorAnswer | None:
        """Called by the server for each request before it is served: the error to answer,
        or None to serve it. While hanging, blocks until the switch goes off and raises
        :class:`Hung` (the connection is then closed unanswered)."""
        with self._lock:
            error, hanging = self._error, self._hanging
            if error is not None:
                self.answered += 1
            elif hanging:
                self.held += 1
        if error is not None:
            return error
        if hanging:
            self._released.wait()
            raise Hung
        return None


class Hung(Exception):
    """The request was held while the server hung: close its connection unanswered."""
