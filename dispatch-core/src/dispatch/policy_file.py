"""Recovery policies as TOML files::

    avoid_nodes_after = ["node-lost", "out-of-memory"]   # optional; default ["node-lost"]
    resubmit_on_stall = 2      # optional; without it a stall only escalates

    [[rule]]
    on = ["preempted", "node-lost"]
    action = "resubmit"
    budget = 3

Top-level keys come before the first ``[[rule]]``: TOML gives a key written after a
``[[rule]]`` header to that rule, where it is an unknown field. The reference, with every
key, its default and the actions, is dispatch-core/docs/policy.md.

``avoid_nodes_after`` lists the endings blamed on their nodes: a later submission keeps
off the nodes such an ending names (S-43); ``[]`` never keeps off a node.
``resubmit_on_stall`` is the stall rule (S-47): a job with a progress window that stalls
is escalated, then stopped and resubmitted, at most that many times; without it a stall
is only escalated.

Errors name the file, the rule (1-based, as it appears in the file) and the field (S-36).
"""

from __future__ import annotations

from pathlib import Path

from dispatch.core.policy import RecoveryPolicy, Rule
from dispatch.model.enums import Action, CauseKind
from dispatch.model.errors import BadInput, PolicyError

_FIELDS = {"on", "action", "budget"}
_TOP = ("rule", "avoid_nodes_after", "resubmit_on_stall")


def load_policy(path: str | Path) -> RecoveryPolicy:
    """Read, check and validate a policy file; raise BadInput/PolicyError naming the place.

    Read as every user file is (:mod:`dispatch.userfiles`): a FIFO, a directory or a
    device is refused naming the path, never waited on; one another user owns or can
    write is refused too (S-51).
    """
    from dispatch.userfiles import POLICY_LIMIT, read_toml

    path = Path(path)
    data = read_toml(path, "policy file", POLICY_LIMIT, trusted=True)
    return parse_policy(data, where=str(path))


def parse_policy(data: dict[str, object], where: str = "<policy>") -> RecoveryPolicy:
    extra = sorted(set(data) - set(_TOP))
    if extra:
        raise BadInput(
            f"{where}: unknown top-level key(s) {', '.join(extra)}; rules go in [[rule]] "
            "tables (top-level keys: avoid_nodes_after, resubmit_on_stall)"
        )
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise BadInput(f"{where}: 'rule' must be an array of tables ([[rule]])")
    rules = [_rule(raw, f"{where}: rule {n}") for n, raw in enumerate(raw_rules, start=1)]
    policy = RecoveryPolicy(rules=tuple(rules))
    if "avoid_nodes_after" in data:
        avoid = _kinds(data["avoid_nodes_after"], f"{where}: key 'avoid_nodes_after'", empty=True)
        policy = policy.model_copy(update={"avoid_nodes_after": frozenset(avoid)})
    if "resubmit_on_stall" in data:
        budget = _budget(data, "resubmit_on_stall", f"{where}: key 'resubmit_on_stall'")
        policy = policy.model_copy(update={"resubmit_on_stall": budget})
    try:
        return policy.validate()
    except PolicyError as exc:
        raise PolicyError([f"{where}: {p}" for p in exc.problems]) from None


def _rule(raw: object, where: str) -> Rule:
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: must be a table")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise BadInput(
            f"{where}: unknown field(s) {', '.join(unknown)} (fields: on, action, budget)"
        )
    kinds = _kinds(raw.get("on"), f"{where}: field 'on'", empty=False)
    return Rule(
        on=tuple(kinds),
        action=_action(raw.get("action"), where),
        budget=_budget(raw, "budget", f"{where}: field 'budget'"),
    )


def _action(value: object, where: str) -> Action:
    try:
        return Action(str(value))
    except ValueError:
        names = ", ".join(a.value for a in Action)
        raise BadInput(
            f"{where}: field 'action': unknown action {value!r} (actions: {names})"
        ) from None


def _budget(raw: dict[str, object], key: str, where: str) -> int | None:
    budget = raw.get(key)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise BadInput(f"{where} must be a whole number, got {budget!r}")
    return budget


def _kinds(value: object, where: str, *, empty: bool) -> list[CauseKind]:
    """A cause or a list of causes, each a known name; ``where`` names the field."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or (not value and not empty):
        wanted = "a list of causes" if empty else "one or more causes"
        raise BadInput(f"{where} must list {wanted}")
    kinds = []
    for item in value:
        try:
            kinds.append(CauseKind(item))
        except ValueError:
            names = ", ".join(k.value for k in CauseKind)
            raise BadInput(f"{where}: unknown cause {item!r} (causes: {names})") from None
    return kinds
