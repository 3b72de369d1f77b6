"""Reading what a submission printed back from its log directory (S-46).

The launch wrapper (:mod:`dispatch_slurm.launch`) leaves, per submission: ``batch.out``
(the batch script and srun's own words), ``<node>.<local rank>.out``/``.err`` per node
and local rank (appended across executions), and ``layout``, one line per execution
(``execution=E nodes=A B tasks_per_node=K``) saying which node each rank ran on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from dispatch import BadInput, LogSelection, Stream

CHUNK = 64 * 1024
_EXTENSIONS = {Stream.STDOUT: "out", Stream.STDERR: "err"}


def _layout(directory: Path) -> list[tuple[list[str], int]]:
    """Every execution's (nodes, tasks per node), in order."""
    path = directory / "layout"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        fields = dict(re.findall(r"(\w+)=([^=]*?)(?=\s+\w+=|$)", line))
        nodes = fields.get("nodes", "").split()
        try:
            per_node = int(fields.get("tasks_per_node", "1"))
        except ValueError:
            continue
        if nodes and per_node >= 1:
            rows.append((nodes, per_node))
    return rows


def _selected(directory: Path, stream: Stream, node: str | None, rank: int | None) -> list[Path]:
    ext = _EXTENSIONS[stream]
    layout = _layout(directory)
    files: list[Path] = []
    if rank is not None:
        for nodes, per_node in layout:
            if 0 <= rank < len(nodes) * per_node:
                files.append(directory / f"{nodes[rank // per_node]}.{rank % per_node}.{ext}")
        if not files:
            size = max((len(n) * k for n, k in layout), default=0)
            raise BadInput(
                f"rank {rank}: this submission ran ranks 0..{size - 1}"
                if size
                else f"rank {rank}: this submission has not run yet"
            )
    else:
        seen = list(dict.fromkeys(n for nodes, _ in layout for n in nodes))
        if node is not None:
            if node not in seen:
                raise BadInput(
                    f"node {node!r}: this submission ran on {', '.join(seen) or 'no node yet'}"
                )
            seen = [node]
        elif stream is Stream.STDOUT:
            files.append(directory / "batch.out")
        per_node = max((k for _, k in layout), default=1)
        files += [directory / f"{n}.{local}.{ext}" for n in seen for local in range(per_node)]
    return list(dict.fromkeys(files))


def read_logs(directory: Path, selection: LogSelection) -> Iterator[bytes]:
    """The selection's bytes from its offset on, in chunks; missing files are empty.

    The node or rank is checked against the layout now (a bad one raises at once); the
    bytes are read lazily, so a large log streams with flat memory.
    """
    chosen = _selected(directory, selection.stream, selection.node, selection.rank)
    return _chunks([f for f in chosen if f.is_file()], selection.offset)


def _chunks(files: list[Path], offset: int) -> Iterator[bytes]:
    skip = offset
    for path in files:
        size = path.stat().st_size
        if skip >= size:
            skip -= size
            continue
        with path.open("rb") as handle:
            handle.seek(skip)
            skip = 0
            while chunk := handle.read(CHUNK):
                yield chunk
