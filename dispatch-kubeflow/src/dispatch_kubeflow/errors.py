"""The adapter's one error of its own: the API server answered, and said no."""

from __future__ import annotations

from dispatch.model.errors import DispatchError


class ApiRefused(DispatchError):
    """A 4xx answer (other than 429) from the Kubernetes API, with the server's words.

    Not ``Unreachable``: the server was reached; retrying the same request will not help.
    """

    def __init__(self, status: int, reason: str, message: str, what: str) -> None:
        self.status, self.reason, self.message, self.what = status, reason, message, what
        super().__init__(f"Kubernetes refused to {what}: {status} {reason}: {message}")
