"""Requirement ids resolve inside the project: every ``S-NN`` cited in the product, the
docs or the tests (and every ``_SNN`` ending a test's name) is defined in
``dispatch-core/docs/requirements.md``, and every page citing one links that page."""

from __future__ import annotations

import os
import re

from docs.doc_files import ROOT, project_files

PAGE = ROOT / "dispatch-core" / "docs" / "requirements.md"

CITED = re.compile(r"\bS-(\d+)\b")
IN_TEST_NAME = re.compile(r"\bdef test_\w*?_S(\d+)\b")
DEFINED = re.compile(r"^### S-(\d+)$", re.MULTILINE)


def cited_ids(text: str) -> set[int]:
    return {int(n) for n in CITED.findall(text)} | {int(n) for n in IN_TEST_NAME.findall(text)}


def defined_ids() -> list[int]:
    return [int(n) for n in DEFINED.findall(PAGE.read_text(encoding="utf-8"))]


def test_the_page_defines_each_id_once_in_order() -> None:
    ids = defined_ids()
    assert ids, f"{PAGE} defines no requirement (headings '### S-N')"
    assert ids == list(range(1, len(ids) + 1)), f"ids out of order or repeated: {ids}"


def test_every_requirement_is_stated_not_only_named() -> None:
    sections = re.split(r"^### S-\d+$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    for number, body in enumerate(sections[1:], start=1):
        statement = body.split("\n## ", 1)[0].strip()
        assert len(statement.split()) >= 8, f"S-{number} has no statement: {statement!r}"


def test_every_cited_id_is_defined_on_the_requirements_page() -> None:
    defined = set(defined_ids())
    undefined: dict[str, list[int]] = {}
    scanned = 0
    for path in project_files():
        if path == PAGE:
            continue
        scanned += 1
        missing = sorted(cited_ids(path.read_text(encoding="utf-8", errors="replace")) - defined)
        if missing:
            undefined[str(path.relative_to(ROOT))] = missing
    assert scanned > 100, f"only {scanned} files scanned under {ROOT}"
    assert not undefined, f"ids cited but not defined in {PAGE.name}: {undefined}"


def test_a_page_citing_ids_links_the_requirements_page() -> None:
    unlinked = []
    for path in project_files():
        if path.suffix != ".md" or path == PAGE:
            continue
        text = path.read_text(encoding="utf-8")
        if not CITED.search(text):
            continue
        link = os.path.relpath(PAGE, path.parent)
        if f"]({link}" not in text:
            unlinked.append(f"{path.relative_to(ROOT)} (link as {link})")
    assert not unlinked, f"pages citing S-ids without linking the requirements: {unlinked}"


def test_the_scan_sees_ids_in_prose_and_in_test_names() -> None:
    text = "see S-7 and S-12..S-16\ndef test_budgets_are_per_rule_S16() -> None:\n"
    assert cited_ids(text) == {7, 12, 16}
    assert cited_ids("JOBS-3, S-, S-x, test_a_S") == set()
