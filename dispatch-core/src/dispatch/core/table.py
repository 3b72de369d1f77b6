"""Everything that turns an ending into a decision, and a decision into a state, lives here.

Read it as a table (h11's ``_state.py`` is the model). When the current object of a job
ends with cause ``c`` — or the core treats its execution as ended: past the node-loss
window (S-27), past a pending window (S-39), missing from the listing — the plan decides:

==================  ===================================  =============  ===================
ending cause        covering rule (enforcer)             budget         verdict → state
==================  ===================================  =============  ===================
none                (rules never cover it)               —              SUCCEED → succeeded
cancelled           (rules never cover it)               —              CANCEL → cancelled
any other           none                                 —              FAIL → failed + esc.
any other           resubmit (supervisor)                left           RESUBMIT → recovering
any other           resubmit (supervisor)                spent          FAIL → failed + esc.
any other           hold (supervisor)                    —              HOLD → held
any other           escalate (supervisor)                —              FAIL → failed + esc.
any other           restart/requeue, backend lacks it    —              FAIL → failed + esc.
any other           restart/requeue, native              —              FAIL → failed + esc.
                    (the object ended: the backend did not recover it)
==================  ===================================  =============  ===================

An *execution* of a live object ending (the backend recovers natively, S-38):

==================  ===================================  =============  ===================
execution cause     covering rule                        budget         verdict → state
==================  ===================================  =============  ===================
held/released/      —                                    —              IGNORE (not an end)
requeued/duplicate
other               restart/requeue, native              left           NATIVE → recovering
other               restart/requeue, native              spent          STOP + FAIL → failed
other               any other rule, or none              —              STOP + the table above
==================  ===================================  =============  ===================

Budgets are per rule (S-16): a verdict only ever spends the budget of the rule that
covers the cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dispatch.core.cause import Cause
from dispatch.core.job import Job
from dispatch.core.policy import Binding, Plan
from dispatch.enums import NON_ENDING_CAUSES, Action, CauseKind, Enforcer, State


class Verdict(Enum):
    SUCCEED = "succeed"
    CANCEL = "cancel"
    RESUBMIT = "resubmit"
    HOLD = "hold"
    FAIL = "fail"
    NATIVE = "native"
    IGNORE = "ignore"


#: The state each verdict commits (or, for NATIVE/IGNORE, shows while the object lives).
STATE_OF = {
    Verdict.SUCCEED: State.SUCCEEDED,
    Verdict.CANCEL: State.CANCELLED,
    Verdict.RESUBMIT: State.RECOVERING,
    Verdict.HOLD: State.HELD,
    Verdict.FAIL: State.FAILED,
    Verdict.NATIVE: State.RECOVERING,
}


@dataclass(frozen=True)
class Ruling:
    verdict: Verdict
    binding: Binding | None = None
    reason: str = ""
    stop_first: bool = False

    @property
    def state(self) -> State | None:
        return STATE_OF.get(self.verdict)


def rule_on_ending(job: Job, plan: Plan, cause: Cause) -> Ruling:
    """The first table: an object (or the execution the core fenced off) ended with ``cause``."""

    kind = cause.kind
    if kind is CauseKind.NONE:
        return Ruling(Verdict.SUCCEED)
    if kind is CauseKind.CANCELLED:
        return Ruling(Verdict.CANCEL)
    binding = plan.binding_for(kind)
    if binding is None:
        return Ruling(Verdict.FAIL, None, f"no rule covers {kind.value!r}")
    action = binding.rule.action
    if not binding.enforced:
        return Ruling(
            Verdict.FAIL,
            binding,
            f"supervisor recovery for {action.value} is not implemented "
            f"(backend {plan.declarations.name!r} does not enforce {action.value} natively)",
        )
    if binding.enforcer is Enforcer.BACKEND:
        return Ruling(
            Verdict.FAIL,
            binding,
            f"the backend ended the object with {kind.value!r} "
            f"instead of its native {action.value}",
        )
    if action is Action.HOLD:
        return Ruling(Verdict.HOLD, binding, f"recovery hold on {kind.value!r}")
    if action is Action.ESCALATE:
        return Ruling(Verdict.FAIL, binding, f"rule {binding.index + 1} escalates {kind.value!r}")
    if job.budget_left(binding.index) < 1:
        return Ruling(
            Verdict.FAIL,
            binding,
            f"budget of rule {binding.index + 1} ({binding.rule.describe()}) is spent",
        )
    return Ruling(Verdict.RESUBMIT, binding, f"resubmit on {kind.value!r}")


def rule_on_execution(job: Job, plan: Plan, cause: Cause) -> Ruling:
    """The second table: one execution of a still-live object ended with ``cause``."""

    kind = cause.kind
    if kind in NON_ENDING_CAUSES:
        return Ruling(Verdict.IGNORE)
    binding = plan.binding_for(kind)
    if binding is not None and binding.enforcer is Enforcer.BACKEND and binding.enforced:
        if job.budget_left(binding.index) >= 1:
            return Ruling(
                Verdict.NATIVE, binding, f"native {binding.rule.action.value} on {kind.value!r}"
            )
        return Ruling(
            Verdict.FAIL,
            binding,
            f"budget of rule {binding.index + 1} ({binding.rule.describe()}) is spent; "
            "dispatch stopped the backend from recovering again",
            stop_first=True,
        )
    ruling = rule_on_ending(job, plan, cause)
    return Ruling(ruling.verdict, ruling.binding, ruling.reason, stop_first=True)
