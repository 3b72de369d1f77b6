"""Recovery policies as TOML files::

    [[rule]]
    on = ["preempted", "node-lost"]
    action = "resubmit"
    budget = 3

Errors name the file, the rule (1-based, as it appears in the file) and the field (S-36).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from dispatch.enums import Action, CauseKind
from dispatch.errors import BadInput, PolicyError
from dispatch.policy import RecoveryPolicy, Rule

_FIELDS = {"on", "action", "budget"}


def load_policy(path: str | Path) -> RecoveryPolicy:
    """Read, check and validate a policy file; raise BadInput/PolicyError naming the place."""

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such policy file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML: {exc}") from exc
    return parse_policy(data, where=str(path))


def parse_policy(data: dict[str, object], where: str = "<policy>") -> RecoveryPolicy:
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise BadInput(
            f"{where}: unknown top-level key(s) {', '.join(extra)}; rules go in [[rule]] tables"
        )
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise BadInput(f"{where}: 'rule' must be an array of tables ([[rule]])")
    rules = [_rule(raw, f"{where}: rule {n}") for n, raw in enumerate(raw_rules, start=1)]
    policy = RecoveryPolicy(rules=tuple(rules))
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
    on = raw.get("on")
    if isinstance(on, str):
        on = [on]
    if not isinstance(on, list) or not on:
        raise BadInput(f"{where}: field 'on' must list one or more causes")
    kinds = []
    for value in on:
        try:
            kinds.append(CauseKind(value))
        except ValueError:
            names = ", ".join(k.value for k in CauseKind)
            raise BadInput(
                f"{where}: field 'on': unknown cause {value!r} (causes: {names})"
            ) from None
    try:
        action = Action(str(raw.get("action")))
    except ValueError:
        names = ", ".join(a.value for a in Action)
        raise BadInput(
            f"{where}: field 'action': unknown action {raw.get('action')!r} (actions: {names})"
        ) from None
    budget = raw.get("budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise BadInput(f"{where}: field 'budget' must be a whole number, got {budget!r}")
    return Rule(on=tuple(kinds), action=action, budget=budget)
