"""What a function job runs: ``python -m dispatch.function_runner --python 3.11``.

:meth:`dispatch.Client.submit_function` and :meth:`dispatch.Client.map` write the function
and its arguments, pickled by cloudpickle, into the job's checkpoint directory
(``DISPATCH_CHECKPOINT_DIR``, which every node of a Slurm job reaches), in its
``dispatch-function`` subdirectory:

- ``function.pkl``: the function (a sweep's members share one, named by ``--function``);
- ``call.pkl``: the arguments, ``(args, kwargs)``;
- ``outcome.pkl``: written by rank 0 when the function returned or raised (see
  :func:`write_outcome`): a plain pickle of a dict of builtins, so the submitter reads it
  even when the value or the exception cannot be unpickled there.

Every rank runs the function (``RANK`` says which one it is, as torch expects); only rank
0 writes the outcome. The outcome of an earlier execution is removed before the function
runs again, so what is left is the last execution's.

The runner refuses an interpreter whose major.minor is not the submitter's (``--python``):
cloudpickle's output loads only under the Python that wrote it. That refusal, and a
function or arguments that do not load (a module the interpreter cannot import), are
written to the outcome too, with their reason, and printed on standard error (``dispatch
logs``); the runner then exits 2. A function that raises exits 1 after printing its
traceback, as ``python`` does; one that returns exits 0.

This module imports only the standard library (and cloudpickle when it runs), so the
interpreter on the cluster needs ``dispatch-core[functions]`` and what the function needs,
nothing more.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from pathlib import Path
from typing import Any

#: The subdirectory of the job's checkpoint directory holding the call and its outcome.
SUBDIR = "dispatch-function"
FUNCTION = "function.pkl"
CALL = "call.pkl"
OUTCOME = "outcome.pkl"

#: The outcome's format; a reader refuses another.
FORMAT = 1

#: Exit codes: the function raised; the runner could not run it.
RAISED = 1
REFUSED = 2

#: Outcome stages: where it ended.
RETURNED = "returned"
STAGE_PYTHON = "python"  # the interpreter is not the submitter's major.minor
STAGE_LOAD = "load"  # the function or its arguments did not load
STAGE_CALL = "call"  # the function raised
STAGE_VALUE = "value"  # the function returned a value that cannot be pickled


def version_text(info: Any = None) -> str:
    """``major.minor`` of ``info`` (default: this interpreter)."""
    info = info or sys.version_info
    return f"{info[0]}.{info[1]}"


def call_dir(checkpoint_dir: str | os.PathLike[str]) -> Path:
    """Where a function job's files are, in its checkpoint directory."""
    return Path(checkpoint_dir) / SUBDIR


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (0600), so a reader
    sees the whole file or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_outcome(directory: Path, outcome: dict[str, Any]) -> None:
    """Write the outcome: ``{"format", "stage", "value"}`` when the function returned
    (``value``: its cloudpickle bytes), else ``{"format", "stage", "type", "message",
    "traceback", "exception"}`` (``exception``: the exception's cloudpickle bytes, or None
    when it cannot be pickled)."""
    write_atomically(directory / OUTCOME, pickle.dumps({"format": FORMAT, **outcome}))


def _failure(stage: str, exc: BaseException, text: str | None = None) -> dict[str, Any]:
    import cloudpickle  # type: ignore[import-untyped]

    try:
        pickled: bytes | None = cloudpickle.dumps(exc)
    except Exception:
        pickled = None
    kind = type(exc)
    frames = exc.__traceback__
    if stage == STAGE_CALL and frames is not None:
        frames = frames.tb_next  # from the function's own frame down, not the runner's
    return {
        "stage": stage,
        "type": kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}",
        "message": str(exc) if text is None else text,
        "traceback": "".join(traceback.format_exception(kind, exc, frames)),
        "exception": pickled,
    }


def _refused(directory: Path, rank: int, stage: str, why: str) -> int:
    print(f"dispatch.function_runner: {why}", file=sys.stderr)
    if rank == 0 and directory.is_dir():
        write_outcome(
            directory,
            {"stage": stage, "type": "", "message": why, "traceback": "", "exception": None},
        )
    return REFUSED


def run(argv: list[str]) -> int:
    """Run the job's function once (see the module); the process's exit code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dispatch.function_runner")
    parser.add_argument("--python", required=True, help="the submitter's major.minor")
    parser.add_argument("--function", help="the pickled function (default: the job's own)")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK") or 0)
    checkpoint = os.environ.get("DISPATCH_CHECKPOINT_DIR")
    if not checkpoint:
        print(
            "dispatch.function_runner: DISPATCH_CHECKPOINT_DIR is not set: run it as a "
            "dispatch job (Client.submit_function)",
            file=sys.stderr,
        )
        return REFUSED
    directory = call_dir(checkpoint)
    if rank == 0:
        (directory / OUTCOME).unlink(missing_ok=True)  # an earlier execution's
    here = version_text()
    if args.python != here:
        return _refused(
            directory,
            rank,
            STAGE_PYTHON,
            f"the function was pickled by Python {args.python} and this interpreter "
            f"({sys.executable}) is Python {here}: a pickled function loads only under the "
            f"Python that pickled it; give submit_function python= an interpreter of Python "
            f"{args.python} that the cluster's nodes run",
        )
    try:
        import cloudpickle
    except ImportError as exc:
        return _refused(
            directory,
            rank,
            STAGE_LOAD,
            f"{sys.executable} cannot import cloudpickle ({exc}): install "
            "dispatch-core[functions] into the interpreter the job runs",
        )
    function_path = Path(args.function) if args.function else directory / FUNCTION
    try:
        function = cloudpickle.loads(function_path.read_bytes())
        call_args, call_kwargs = cloudpickle.loads((directory / CALL).read_bytes())
    except Exception as exc:
        why = (
            f"the function or its arguments did not load in {sys.executable}: "
            f"{type(exc).__name__}: {exc} (the interpreter the job runs must import "
            "every module the function needs)"
        )
        print(f"dispatch.function_runner: {why}", file=sys.stderr)
        traceback.print_exc()
        if rank == 0:
            write_outcome(directory, _failure(STAGE_LOAD, exc, why))
        return REFUSED
    try:
        value = function(*call_args, **call_kwargs)
    except Exception as exc:
        traceback.print_exc()
        if rank == 0:
            write_outcome(directory, _failure(STAGE_CALL, exc))
        return RAISED
    if rank != 0:
        return 0
    try:
        pickled = cloudpickle.dumps(value)
    except Exception as exc:
        why = f"the function returned a {type(value).__name__} that cannot be pickled: {exc}"
        print(f"dispatch.function_runner: {why}", file=sys.stderr)
        write_outcome(directory, _failure(STAGE_VALUE, exc, why))
        return RAISED
    write_outcome(directory, {"stage": RETURNED, "value": pickled})
    return 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
