"""The pure core stays pure (S-20, S-21, S-22): a test, not a convention.

``dispatch.core`` and ``dispatch.model`` may import only each other and the standard
library's side-effect-free modules. Parsed from the source (so a
forbidden import inside a function is caught too) and checked again in a fresh
interpreter (so nothing reaches the shell through a model module).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dispatch
import pytest

SRC = Path(dispatch.__file__).parent
#: The pure packages: the core, and the models it exchanges with the shell.
PURE = {"dispatch.core", "dispatch.model"}
CORE = sorted((SRC / "core").glob("*.py"))
PURE_FILES = sorted(p for pkg in ("core", "model") for p in (SRC / pkg).glob("*.py"))
#: The shell: reading and changing the world.
SHELL = {
    "dispatch.backends",
    "dispatch.cli",
    "dispatch.job_records",
    "dispatch.local",
    "dispatch.plugin",
    "dispatch.store",
    "dispatch.supervisor",
}
#: Standard-library and third-party modules that do I/O, read a clock or draw randomness.
IO_MODULES = {
    "asyncio",
    "http",
    "io",
    "logging",
    "os",
    "pathlib",
    "pluggy",
    "psycopg",
    "random",
    "requests",
    "secrets",
    "shutil",
    "socket",
    "sqlite3",
    "subprocess",
    "sys",
    "threading",
    "time",
    "tomllib",
    "urllib",
    "uuid",
}
CLOCKS = ("datetime.now", ".now(", ".utcnow(", ".today(", "time.time", "monotonic")


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(source: str) -> set[str]:
    """Every module (and ``module.name``) an import statement names, anywhere in ``source``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the core writes absolute imports only"
            base = node.module or ""
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if base.startswith("dispatch")}
    return found


def _source_of(module: str) -> Path | None:
    path = SRC.parent.joinpath(*module.split("."))
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py")
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    return None


def _reached() -> dict[str, set[str]]:
    """Every dispatch module the core reaches, transitively, with what each imports."""
    seen: dict[str, set[str]] = {}
    todo = [_module_name(p) for p in PURE_FILES]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _source_of(name)
        if path is None:
            continue  # a name imported from a module, not a module
        seen[name] = _imports(path.read_text())
        todo += [m for m in seen[name] if m.startswith("dispatch")]
    return seen


def _is_within(name: str, roots: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


def test_the_core_is_a_package_of_its_own_S20() -> None:
    names = {p.stem for p in CORE}
    assert {"table", "folding", "decisions", "projection", "policy", "job", "status"} <= names
    assert {"effects", "cause"} <= names


def test_the_core_reaches_only_itself_and_the_shared_models_S22() -> None:
    reached = _reached()
    for name, imports in reached.items():
        assert not _is_within(name, SHELL), f"the pure core reaches the shell: {name}"
        dispatch_imports = {m for m in imports if m.startswith("dispatch")}
        for m in dispatch_imports:
            if _source_of(m) is None:
                continue
            assert _is_within(m, PURE), f"{name} imports {m}, outside the core and its models"


def test_nothing_outside_the_pure_packages_is_reached() -> None:
    """The pure set is the two packages, not a list kept by hand: whatever they reach is
    inside them."""
    assert all(_is_within(name, PURE) for name in _reached())


def test_no_module_of_the_package_root_shadows_a_core_module() -> None:
    """One name per concept: ``dispatch.X`` never re-exports ``dispatch.core.X``."""
    core_names = {p.stem for p in CORE} - {"__init__"}
    top = {p.stem for p in SRC.glob("*.py")}
    assert not core_names & top, sorted(core_names & top)


@pytest.mark.parametrize("module", sorted(_reached()))
def test_pure_modules_do_no_io_and_read_no_clock_S20_S21_S22(module: str) -> None:
    path = _source_of(module)
    assert path is not None
    tops = {m.split(".")[0] for m in _imports(path.read_text())}
    assert not tops & IO_MODULES, f"{module} imports {sorted(tops & IO_MODULES)}"
    source = path.read_text()
    assert not [c for c in CLOCKS if c in source], f"{module} reads a clock"


def test_the_import_parser_sees_imports_inside_functions() -> None:
    """What the checks above rely on: an import hidden in a function body is still seen."""
    source = "from dispatch.model.events import JobCreated\ndef f():\n    import subprocess\n"
    assert _imports(source) == {
        "dispatch.model.events",
        "dispatch.model.events.JobCreated",
        "subprocess",
    }


def test_importing_the_core_loads_no_shell_module_S22() -> None:
    code = (
        "import sys, importlib\n"
        f"for m in {sorted(_module_name(p) for p in CORE)!r}: importlib.import_module(m)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('dispatch', 'pluggy')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "dispatch.core.decisions" in loaded
    shell = {m for m in loaded if _is_within(m, SHELL) or m.startswith("pluggy")}
    assert not shell, f"importing the core loaded {sorted(shell)}"
