"""A backend plugin that lets the core supervisor drive a harness's scenarios.

The supervisor decides when to submit and which submission number; the harness decides
what runs and what happens to it. :class:`ProvokingPlugin` joins the two: the supervisor's
``dispatch_submit`` for submission N calls ``harness.provoke(script[N], ...)`` with a
backend that files the harness's submit under N (and the gate the supervisor asked for).
Everything else goes straight to the real backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dispatch import (
    ArrayMember,
    Backend,
    Cause,
    Declarations,
    Discovery,
    JobSpec,
    LogSelection,
    Prepared,
    hookimpl,
)

from dispatch_testing.kit.harness import Harness, Provoked, Scenario


class _Refiling:
    """The real backend, except that a submit is filed under the supervisor's numbers."""

    def __init__(self, real: Backend, submission: int, gated: bool) -> None:
        self._real = real
        self._submission = submission
        self._gated = gated

    def submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        return self._real.submit(job_id, self._submission, spec, self._gated)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class ProvokingPlugin:
    def __init__(self, harness: Harness, real: Backend, script: Mapping[int, Scenario]) -> None:
        self.harness = harness
        self.real = real
        self.script = dict(script)
        self.provoked: dict[int, Provoked] = {}
        #: every object whose gate dispatch opened; stays empty for a backend without gating
        self.gate_calls: list[str] = []

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return self.real.declarations

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        return self.real.discover(job_ids)

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        scenario = self.script.get(submission)
        if scenario is None:
            return self.real.submit(job_id, submission, spec, gated)
        refiling: Any = _Refiling(self.real, submission, gated)
        provoked = self.harness.provoke(scenario, refiling, job_id)
        self.provoked[submission] = provoked
        if provoked.refused is not None:
            raise provoked.refused
        assert provoked.object_id is not None
        return provoked.object_id

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        self.gate_calls.append(object_id)
        self.real.open_gate(object_id)

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        self.real.stop(object_id, cause)

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        # forwarded so a backend declaring `logs` stays loadable behind the wrapper
        return self.real.logs(object_id, selection)

    # forwarded so a backend declaring `arrays` stays loadable behind the wrapper
    @hookimpl
    def dispatch_check_array(self, size: int, max_running: int | None) -> None:
        self.real.check_array(size, max_running)

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        return self.real.submit_array(group_id, members, max_running)

    @hookimpl
    def dispatch_prepare_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> Prepared | None:
        if not self.real.prepares_arrays:
            return None  # the optional half: a backend without it shows the members' specs
        return self.real.prepare_array(group_id, members, max_running)
