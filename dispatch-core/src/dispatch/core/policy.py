"""Recovery rules written against causes (S-7, S-8) and their binding to a backend (S-9..S-11)."""

from __future__ import annotations

from pydantic import Field

from dispatch.model.base import Model
from dispatch.model.declarations import Declarations
from dispatch.model.enums import (
    COVERABLE_ENDINGS,
    NATIVE_ACTIONS,
    NON_ENDING_CAUSES,
    UNCOVERABLE_CAUSES,
    Action,
    CauseKind,
    Enforcer,
)
from dispatch.model.errors import PolicyError


class Rule(Model):
    """``on`` these causes, do ``action``, at most ``budget`` times (resubmit/restart/requeue)."""

    on: tuple[CauseKind, ...] = Field(min_length=1)
    action: Action
    budget: int | None = None

    def describe(self) -> str:
        kinds = ", ".join(k.value for k in self.on)
        budget = f" budget={self.budget}" if self.budget is not None else ""
        return f"on [{kinds}] {self.action.value}{budget}"


#: By default only a lost node is blamed on the node (S-43).
AVOID_NODES_AFTER = frozenset({CauseKind.NODE_LOST})


class RecoveryPolicy(Model):
    """The rules, and which endings are blamed on their nodes.

    ``avoid_nodes_after``: after an ending of one of these kinds that names its nodes
    (``Cause.nodes``), every later submission of the job keeps off those nodes, on a
    backend declaring ``exclude-nodes`` (S-43). Empty: never keep off a node.

    ``resubmit_on_stall``: the budget of the stall rule (S-47). A job declaring a progress
    window that shows no progress for it is always escalated; with this set, dispatch
    then stops it and resubmits it, at most this many times (after that: escalated only).
    A stall is not an ending, so it is no cause and no ``Rule`` can be written on it; the
    stop is dispatch's own, recorded as ``cancelled`` by actor ``dispatch`` naming the
    stall (docs/endings.md). None: a stall is only escalated, a person decides.
    """

    rules: tuple[Rule, ...] = ()
    avoid_nodes_after: frozenset[CauseKind] = AVOID_NODES_AFTER
    resubmit_on_stall: int | None = None

    @property
    def stall_index(self) -> int:
        """The index the stall rule's budget is spent under in the record (``spent``,
        ``recovery-started.rule``): the one after the listed rules, rule N+1."""
        return len(self.rules)

    def describe_stall(self) -> str:
        return f"rule {self.stall_index + 1}: resubmit_on_stall budget={self.resubmit_on_stall}"

    def validate(self) -> RecoveryPolicy:  # type: ignore[override]
        """Refuse an ambiguous or meaningless policy (S-8); return self when it is sound.

        Every problem is listed at once, each naming the rule(s) (1-based, as a person
        counts them in a file) and the cause.
        """

        problems: list[str] = []
        owner: dict[CauseKind, int] = {}
        for number, rule in enumerate(self.rules, start=1):
            label = f"rule {number} ({rule.describe()})"
            for kind in rule.on:
                if kind in owner:
                    problems.append(
                        f"rule {owner[kind]} and {label} both cover {kind.value!r}; "
                        "a cause may be covered by one rule only"
                    )
                else:
                    owner[kind] = number
                if kind in UNCOVERABLE_CAUSES:
                    why = (
                        "is success"
                        if kind is CauseKind.NONE
                        else "reached the scheduler and is never undone"
                    )
                    problems.append(f"{label} covers {kind.value!r}, which {why}; remove it")
                elif kind in NON_ENDING_CAUSES:
                    problems.append(
                        f"{label} covers {kind.value!r}, which never ends an object; remove it"
                    )
                elif kind is CauseKind.UNKNOWN and rule.action not in (
                    Action.HOLD,
                    Action.ESCALATE,
                ):
                    problems.append(
                        f"{label} covers 'unknown' with {rule.action.value!r}; only hold or "
                        "escalate may cover a cause nobody understands"
                    )
            if len(set(rule.on)) != len(rule.on):
                problems.append(f"{label} names a cause twice")
            if rule.action.needs_budget and (rule.budget is None or rule.budget < 1):
                problems.append(
                    f"{label}: {rule.action.value} needs a positive budget, got {rule.budget!r}"
                )
            if not rule.action.needs_budget and rule.budget is not None:
                problems.append(
                    f"{label}: {rule.action.value} takes no budget, got {rule.budget!r}"
                )
        problems += self._stall_problems()
        for kind in sorted(self.avoid_nodes_after - COVERABLE_ENDINGS):
            problems.append(
                f"avoid_nodes_after names {kind.value!r}, which never ends an object for a "
                "node's fault; remove it"
            )
        if problems:
            raise PolicyError(problems)
        return self

    def _stall_problems(self) -> list[str]:
        budget = self.resubmit_on_stall
        if budget is None or (budget >= 1 and not isinstance(budget, bool)):
            return []
        return [f"resubmit_on_stall (the stall rule) needs a positive budget, got {budget!r}"]


class Binding(Model):
    """One rule bound to its enforcer; ``enforced`` is False for a rule nobody carries out."""

    index: int
    rule: Rule
    enforcer: Enforcer
    enforced: bool


class Plan(Model):
    """A validated policy bound to one backend's declarations.

    Stored in the job's record at creation, so every reader projects the same Status (S-24).
    """

    policy: RecoveryPolicy
    declarations: Declarations
    bindings: tuple[Binding, ...]
    uncovered: frozenset[CauseKind]
    impossible: frozenset[CauseKind] = frozenset()

    @classmethod
    def bind(cls, policy: RecoveryPolicy, declarations: Declarations) -> Plan:
        policy.validate()
        bindings = []
        for index, rule in enumerate(policy.rules):
            if rule.action in NATIVE_ACTIONS:
                enforced = rule.action in declarations.native_actions
                enforcer = Enforcer.BACKEND if enforced else Enforcer.SUPERVISOR
            else:
                enforced, enforcer = True, Enforcer.SUPERVISOR
            bindings.append(Binding(index=index, rule=rule, enforcer=enforcer, enforced=enforced))
        covered = {kind for rule in policy.rules for kind in rule.on}
        can_end = (COVERABLE_ENDINGS & declarations.reports) | {CauseKind.UNKNOWN}
        return cls(
            policy=policy,
            declarations=declarations,
            bindings=tuple(bindings),
            uncovered=frozenset(can_end - covered),
            impossible=frozenset(COVERABLE_ENDINGS - declarations.reports - {CauseKind.UNKNOWN}),
        )

    @property
    def unenforced(self) -> tuple[Binding, ...]:
        """Rules accepted but carried out by nobody; their cause fails the job (S-11)."""
        return tuple(b for b in self.bindings if not b.enforced)

    def binding_for(self, kind: CauseKind) -> Binding | None:
        for binding in self.bindings:
            if kind in binding.rule.on:
                return binding
        return None
