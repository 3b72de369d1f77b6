"""The repository speaks in its own terms: no path of one machine (a checkout, a home
directory) in any file, and no reference to a tracker entry that does not ship in the
product's source or docs, where a reader could not resolve it."""

from __future__ import annotations

import re
from pathlib import Path

from docs.doc_files import ROOT, project_files

MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|Users)/")
TRACKER = re.compile(r"\bissues? #?\d|\(issue\b", re.IGNORECASE)
#: an upstream project's tracker, cited with its name, resolves
UPSTREAM = re.compile(r"\b(?:jobset|kubernetes|slurm|pluggy|trainer) issues? #?\d", re.IGNORECASE)


def _product_or_doc(path: Path) -> bool:
    return path.suffix == ".md" or "src" in path.relative_to(ROOT).parts


def test_no_file_names_a_path_of_one_machine() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in project_files()
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1)
        if MACHINE_PATH.search(line)
    ]
    assert not found, f"machine paths: {found}"


def test_product_and_docs_cite_no_tracker_entry() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in project_files()
        if _product_or_doc(path)
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1)
        if TRACKER.search(UPSTREAM.sub("", line))
    ]
    assert not found, f"tracker references a reader cannot resolve: {found}"


def test_the_patterns_catch_what_they_are_for() -> None:
    slash = "/"  # split, so this file names no such path itself
    assert MACHINE_PATH.search(f"see {slash}work/main/.venv/postgres-dsn")
    assert MACHINE_PATH.search(f"(`{slash}root/.local/share/dispatch`)")
    assert not MACHINE_PATH.search(f"sqlite:{slash * 3}home/you/record.db or .{slash}work/x")
    assert TRACKER.search("garbage collection (issue 15.12)")
    assert not TRACKER.search(UPSTREAM.sub("", "the JobSet lags (jobset issue #928)"))
