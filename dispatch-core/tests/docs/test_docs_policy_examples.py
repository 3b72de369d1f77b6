"""Every policy example the docs show loads with the loader ``dispatch submit --policy``
uses (S-36: a file the docs recommend must not be refused), and the reference page names
every action and key the code accepts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dispatch.policy_file
import pytest
from dispatch.model.enums import Action
from dispatch.model.errors import BadInput
from dispatch.userfiles import load_policy

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "dispatch-core" / "docs" / "policy.md"
#: a TOML text is a policy when it has a rule table or a policy's top-level key
POLICY_KEYS = re.compile(r"^\s*(\[\[rule\]\]|avoid_nodes_after\s*=|resubmit_on_stall\s*=)", re.M)
FENCED_TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def _docs() -> list[Path]:
    skip = {".venv", ".git", "build", "dist", "node_modules"}
    return sorted(p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts))


def _docstring_examples() -> list[tuple[str, str]]:
    """The literal block after ``::`` in policy_file's docstring."""
    source = Path(dispatch.policy_file.__file__).read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    examples = []
    for block in doc.split("::\n")[1:]:
        lines = []
        for line in block.split("\n")[1:]:
            if line and not line.startswith("    "):
                break
            lines.append(line[4:])
        examples.append(("dispatch/policy_file.py docstring", "\n".join(lines)))
    return examples


def policy_examples() -> list[tuple[str, str]]:
    found = []
    for path in _docs():
        for n, match in enumerate(FENCED_TOML.finditer(path.read_text(encoding="utf-8")), 1):
            if POLICY_KEYS.search(match.group(1)):
                found.append((f"{path.relative_to(ROOT)} toml block {n}", match.group(1)))
    for path in sorted((ROOT / "examples").rglob("*.toml")):
        if path.name != "pyproject.toml" and POLICY_KEYS.search(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return found + _docstring_examples()


EXAMPLES = policy_examples()


def test_the_examples_are_found() -> None:
    where = {name.split(" ")[0] for name, _ in EXAMPLES}
    for expected in (
        "README.md",
        "dispatch-core/docs/policy.md",
        "dispatch-core/docs/cli.md",
        "dispatch/policy_file.py",
        "examples/demo/policy.toml",
    ):
        assert expected in where, f"no policy example found in {expected}: {sorted(where)}"


@pytest.mark.parametrize(("where", "text"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_a_policy_example_in_the_docs_loads_S36(where: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    policy = load_policy(path)
    assert policy.rules or policy.resubmit_on_stall, f"{where}: the example sets nothing"


def test_the_loader_refuses_a_top_level_key_written_after_a_rule_S36(tmp_path: Path) -> None:
    """The mistake the docs warn about is refused, so the check above can fail."""
    path = tmp_path / "policy.toml"
    path.write_text(
        '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 1\n\nresubmit_on_stall = 2\n',
        encoding="utf-8",
    )
    with pytest.raises(BadInput, match="rule 1: unknown field"):
        load_policy(path)


def test_the_reference_names_every_action_and_key() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    actions = re.search(r"^## Actions\n(.*?)^## ", text, re.S | re.M)
    assert actions, "policy.md has no Actions section"
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", actions.group(1), re.M))
    assert listed == {a.value for a in Action}, listed
    for key in ("on", "action", "budget", "avoid_nodes_after", "resubmit_on_stall"):
        assert f"| `{key}` |" in text, f"policy.md's key table lacks {key}"
