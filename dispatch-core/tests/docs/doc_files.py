"""The project's own text files, as the docs tests read them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: files that can hold the project's words: source, docs, scripts, configuration
SUFFIXES = {".py", ".md", ".sh", ".toml", ".ini", ".yaml", ".yml", ".txt", ".cfg", ".rst"}
#: generated or installed trees, never the project's own text
SKIP_DIRS = {"__pycache__", "build", "dist", "node_modules"}


def project_files() -> Iterator[Path]:
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in SKIP_DIRS and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            path = Path(top) / name
            if path.suffix in SUFFIXES:
                yield path
