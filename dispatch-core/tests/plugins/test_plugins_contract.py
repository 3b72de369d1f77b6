"""The adapter contract is stated once, in the hook specs (S-30): the exceptions that pass
the error boundary, the hooks a backend must implement and the table of
``docs/adapters.md`` all come from them. A backend builds what it sends with
``dispatch_prepare`` and sends exactly that with ``dispatch_send``; one with only the one-step
``dispatch_submit`` keeps working, and a deprecated hook still loads, with a warning."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dispatch import (
    BackendBroken,
    BadInput,
    CauseKind,
    Declarations,
    Discovery,
    JobSpec,
    Prepared,
    SubmitRefused,
    Unreachable,
    hookimpl,
    hookspecs,
)
from dispatch.backends import DOCUMENTED, Registry
from dispatch.model.errors import BackendFailed

ADAPTERS = Path(__file__).parents[2] / "docs" / "adapters.md"
SPEC = JobSpec(command=("true",))


class OneStep:
    """A backend written against version 1 of the contract: one-step submit."""

    def __init__(self, name: str = "onestep", api_version: int = 1) -> None:
        self.name = name
        self.api_version = api_version
        self.sent: list[Any] = []

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=self.name,
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE, CauseKind.UNKNOWN}),
            api_version=self.api_version,
        )

    @hookimpl
    def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
        return Discovery(backend=self.name, at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        self.sent.append(("submit", job_id, submission))
        return f"{self.name}-{job_id}-{submission}"

    @hookimpl
    def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
        return None


class TwoStep(OneStep):
    """Version 2: prepare, then send exactly what was prepared."""

    def __init__(self, name: str = "twostep") -> None:
        super().__init__(name, api_version=2)

    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        """Not a hook: a convenience for callers holding the plugin itself."""
        return self.dispatch_send(self.dispatch_prepare(job_id, submission, spec, gated))

    @hookimpl
    def dispatch_prepare(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        if spec.name == "refused":
            raise SubmitRefused("no such queue")
        return Prepared(
            backend=self.name,
            job_id=job_id,
            submission=submission,
            gated=gated,
            parts={"argv": ["run", *spec.command], "env": {"A": "1"}, "script": "echo\n"},
            notes=("the path is drawn when sent",),
        )

    @hookimpl
    def dispatch_send(self, prepared):  # type: ignore[no-untyped-def]
        self.sent.append(prepared)
        return f"{self.name}-{prepared.job_id}"


def test_documented_exceptions_come_from_the_specs_raises_lines_S30() -> None:
    assert set(DOCUMENTED) == set(hookspecs.HOOKS)
    assert DOCUMENTED["dispatch_declare"] == ()
    assert set(DOCUMENTED["dispatch_prepare"]) == {SubmitRefused, Unreachable}
    assert set(DOCUMENTED["dispatch_send"]) == {SubmitRefused, Unreachable}
    assert set(DOCUMENTED["dispatch_logs"]) == {BadInput, Unreachable}
    assert set(DOCUMENTED["dispatch_validate"]) == {BadInput}


def test_adapters_page_holds_the_table_made_from_the_specs_S30() -> None:
    page = ADAPTERS.read_text()
    assert hookspecs.contract_table() in page, (
        "docs/adapters.md is out of step with the hook specs: paste "
        "dispatch.hookspecs.contract_table() into its 'The hooks' section"
    )
    for hook in hookspecs.HOOKS:
        assert f"`{hook}`" in page


def test_prepare_then_send_exactly_what_was_prepared_S30() -> None:
    plugin = TwoStep()
    backend = Registry.from_plugins({"twostep": plugin}).get("twostep")
    assert backend.prepares
    prepared = backend.prepare("j", 2, SPEC, False)
    assert backend.send(prepared) == "twostep-j"
    assert backend.submit("j", 3, SPEC, False) == "twostep-j"
    assert plugin.sent == [prepared, backend.prepare("j", 3, SPEC, False)]
    assert prepared.render().splitlines() == [
        "--- argv ---",
        "run true",
        "--- env ---",
        "A=1",
        "--- script ---",
        "echo",
        "note: the path is drawn when sent",
    ]
    with pytest.raises(SubmitRefused, match="no such queue"):
        backend.prepare("j", 1, SPEC.model_copy(update={"name": "refused"}), False)


def test_a_prepared_value_for_another_submission_is_the_backends_fault_S50() -> None:
    class Confused(TwoStep):
        @hookimpl
        def dispatch_prepare(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
            return Prepared(backend=self.name, job_id=job_id, submission=1, gated=gated, parts={})

    backend = Registry.from_plugins({"twostep": Confused()}).get("twostep")
    with pytest.raises(BackendFailed, match="dispatch_prepare"):
        backend.submit("j", 2, SPEC, False)


def test_a_one_step_backend_keeps_working_and_its_dry_run_shows_the_spec_S30() -> None:
    plugin = OneStep()
    backend = Registry.from_plugins({"onestep": plugin}).get("onestep")
    assert not backend.prepares
    assert backend.submit("j", 1, SPEC, False) == "onestep-j-1"
    assert plugin.sent == [("submit", "j", 1)]
    assert backend.render("j", 1, SPEC, False) is None


def test_prepare_without_send_or_neither_submit_is_refused_at_load_S30() -> None:
    class HalfPair(OneStep):
        @hookimpl
        def dispatch_prepare(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
            raise AssertionError

    with pytest.raises(BackendBroken, match="does not implement dispatch_send"):
        Registry.from_plugins({"onestep": HalfPair()}).get("onestep")

    class Nothing:
        @hookimpl
        def dispatch_declare(self) -> Declarations:
            raise AssertionError

    with pytest.raises(BackendBroken, match="dispatch_submit \\(or dispatch_prepare"):
        Registry.from_plugins({"nothing": Nothing()}).get("nothing")


def test_a_backend_submitting_both_ways_is_refused_at_load_S31() -> None:
    """A subclass adding a ``dispatch_submit`` hook to a backend that prepares would never
    be called: refused loudly instead of bypassed silently."""

    class Recording(TwoStep):
        @hookimpl
        def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
            return super().dispatch_submit(job_id, submission, spec, gated)

    with pytest.raises(BackendBroken, match="implement one way to submit"):
        Registry.from_plugins({"twostep": Recording()}).get("twostep")


def test_a_backend_for_a_newer_contract_is_refused_at_load_S31() -> None:
    newer = OneStep("newer", api_version=hookspecs.API_VERSION + 1)
    with pytest.raises(BackendBroken, match="version 3 of the hook contract"):
        Registry.from_plugins({"newer": newer}).get("newer")


def test_the_deprecated_render_hook_still_loads_and_warns_S30() -> None:
    class Rendering(OneStep):
        @hookimpl
        def dispatch_render(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
            return f"would run {spec.command[0]}"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = Registry.from_plugins({"onestep": Rendering()}).get("onestep")
    assert any("dispatch_render is deprecated" in str(w.message) for w in caught)
    assert backend.render("j", 1, SPEC, False) == "would run true"
