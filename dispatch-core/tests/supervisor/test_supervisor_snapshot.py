"""The snapshot of a supervisor's folded jobs is a cache: it never changes a decision.

The differential test runs two identical worlds (a simulated scheduler, a SQLite record,
one supervisor) through the same random course of faults, clock steps and supervisor
restarts. In one world every restarted supervisor starts from the snapshot on disk, which
is first damaged at random (truncated, of another format, dispatch version or model shape,
pointing past the jobs it holds, garbage, an older one, removed, or left as it is); the
other world never has one. After every tick the two reports and the two records must be
the same, and so must the jobs each supervisor holds after its first tick.

The other tests check that a snapshot another user could have written is never unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import pickle
import random
from pathlib import Path
from types import ModuleType

import pytest
from dispatch.store.snapshot import MAGIC, load, save, snapshot_path
from dispatch.supervisor import Supervisor, TickReport


def _sibling(name: str) -> ModuleType:
    """The differential world of the quiet-decision test, shared rather than copied."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_quiet = _sibling("test_supervisor_quiet_decisions")
STEPS, World, _fault, _plan_outcomes = (
    _quiet.STEPS,
    _quiet.World,
    _quiet._fault,
    _quiet._plan_outcomes,
)

DAMAGE = (
    "keep",
    "keep",
    "truncated",
    "other-version",
    "other-format",
    "other-models",
    "position-ahead",
    "garbage",
    "older",
    "removed",
)


def _comparable(report: TickReport) -> dict[str, object]:
    shown = dataclasses.asdict(report)
    del shown["decided"]  # a restarted supervisor decides every job afresh, in both worlds
    return shown


def _restart(world: World, snapshot: Path | None) -> None:
    world.sup.release()
    world.sup = Supervisor(
        world.store,
        world.registry,
        owner="sup",
        clock=world.sched.now,
        lease_ttl=world.sup.lease_ttl,
        snapshot=snapshot,
    )


def _damage(path: Path, how: str, older: bytes | None, rng: random.Random) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    magic, header, body = data.split(b"\n", 2)
    fields = json.loads(header)
    if how == "truncated":
        data = data[: rng.randrange(1, len(data))]
    elif how == "other-version":
        data = b"\n".join([magic, json.dumps({**fields, "dispatch": "0.0.1"}).encode(), body])
    elif how == "other-models":  # pickled by a build whose models had other fields
        data = b"\n".join([magic, json.dumps({**fields, "models": "0" * 16}).encode(), body])
    elif how == "other-format":
        data = b"\n".join([magic, json.dumps({**fields, "format": 999}).encode(), body])
    elif how == "position-ahead":
        ahead = {**fields, "position": fields["position"] + rng.randrange(1, 40)}
        data = b"\n".join([magic, json.dumps(ahead).encode(), body])
    elif how == "garbage":
        data = b"\n".join([magic, header, bytes(rng.randrange(256) for _ in range(200))])
    elif how == "older" and older is not None:
        data = older
    elif how == "removed":
        path.unlink()
        return
    path.write_bytes(data)


@pytest.mark.parametrize("seed", range(8))
def test_a_snapshot_damaged_or_not_changes_no_report_and_no_record(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    cached, plain = World(tmp_path / "cached", True), World(tmp_path / "plain", True)
    worlds = [cached, plain]
    path = snapshot_path(cached.store)
    assert path is not None and path.parent == tmp_path / "cached"
    _restart(cached, path)
    n_jobs = [0]
    for _ in range(6):
        n_jobs[0] += 1
        nodes = rng.choice([1, 1, 2, 3])
        for w in worlds:
            w.add_job(n_jobs[0], nodes)
        _plan_outcomes(rng, worlds, f"job-{n_jobs[0]}")
    older: bytes | None = None
    used = 0
    for tick in range(50):
        restarted = tick > 0 and rng.random() < 0.3
        if restarted:
            if path.exists() and rng.random() < 0.5:
                older = path.read_bytes()
            _damage(path, rng.choice(DAMAGE), older, rng)
            _restart(cached, path)
            _restart(plain, None)
        for _ in range(rng.choice([0, 1, 1, 2])):
            _fault(rng, worlds, n_jobs)
        step = rng.choice(STEPS)
        reports = []
        for w in worlds:
            w.sched.advance(step)
            reports.append(w.sup.tick())
        if restarted:
            used += cached.sup._saved_at is not None  # started from the snapshot
            assert cached.sup._jobs == plain.sup._jobs, f"tick {tick}"
            assert cached.sup._broken == plain.sup._broken, f"tick {tick}"
        cached.sup.save_snapshot()
        assert _comparable(reports[0]) == _comparable(reports[1]), f"tick {tick}"
        assert cached.record() == plain.record(), f"tick {tick}"
    assert used > 0, "no restarted supervisor ever started from the snapshot"
    for w in worlds:
        w.store.close()


class _Planted:
    """Unpickling this creates the marker file: proof the pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def _plant(path: Path, world: World, marker: Path) -> None:
    """A snapshot whose pickle runs code, with a header that matches the record."""
    save(path, world.store, 0, {})
    magic, header, _ = path.read_bytes().split(b"\n", 2)
    body = pickle.dumps(_Planted(marker))
    fields = {**json.loads(header), "sha256": hashlib.sha256(body).hexdigest()}
    path.write_bytes(b"\n".join([magic, json.dumps(fields).encode(), body]))


def test_a_planted_snapshot_is_unpickled_when_it_is_ours_alone(tmp_path: Path) -> None:
    # the check below can fail: the same planted file, private, is unpickled
    world = World(tmp_path / "w", True)
    path, marker = tmp_path / "w" / "record.db.snapshot", tmp_path / "ran"
    _plant(path, world, marker)
    load(path, world.store)
    assert marker.exists()


@pytest.mark.parametrize("how", ["file-writable-by-group", "dir-writable-by-others", "symlink"])
def test_a_snapshot_others_could_write_is_never_unpickled_S51(tmp_path: Path, how: str) -> None:
    world = World(tmp_path / "w", True)
    path, marker = tmp_path / "w" / "record.db.snapshot", tmp_path / "ran"
    if how == "symlink":
        elsewhere = tmp_path / "elsewhere.snapshot"
        _plant(elsewhere, world, marker)
        path.symlink_to(elsewhere)
    else:
        _plant(path, world, marker)
        if how == "file-writable-by-group":
            path.chmod(0o620)
        else:
            path.parent.chmod(0o777)
    try:
        assert load(path, world.store) is None
        assert not marker.exists()
    finally:
        path.parent.chmod(0o700)
        world.store.close()


def test_the_snapshot_is_written_private_and_a_supervisor_starts_from_it(
    tmp_path: Path,
) -> None:
    world = World(tmp_path / "w", True)
    for n in range(1, 4):
        world.add_job(n, 1)
    path = snapshot_path(world.store)
    assert path is not None
    _restart(world, path)
    world.sup.tick()
    assert world.sup.save_snapshot()
    assert (os.stat(path).st_mode & 0o777) == 0o600
    assert path.read_bytes().startswith(MAGIC)
    held = dict(world.sup._jobs)
    _restart(world, path)
    world.sup.tick()
    assert world.sup._saved_at is not None
    assert world.sup._jobs == held
    world.store.close()
