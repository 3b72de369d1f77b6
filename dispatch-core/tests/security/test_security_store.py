"""The SQLite record's directory and file (S-51): never another user's,
never through a symlink, never a foreign file; a read-only record can still be read."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch.model.errors import BadInput, Unreachable
from dispatch.store import InsecureState, open_store
from dispatch.store.sqlite import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_state_directory_created_first_by_another_user_is_refused_S51(
    nobody, as_nobody, shared_dir, monkeypatch, ev
):
    """A ``nobody`` who creates ``$XDG_STATE_HOME/dispatch`` 0777 first gets nothing used."""
    os.chmod(shared_dir, 0o1777)
    as_nobody(
        "import os; os.mkdir('dispatch'); os.chmod('dispatch', 0o777)",
        cwd=shared_dir,
    )
    planted = shared_dir / "dispatch"
    assert os.stat(planted).st_uid == nobody.pw_uid
    monkeypatch.setenv("XDG_STATE_HOME", str(shared_dir))
    monkeypatch.delenv("DISPATCH_STORE", raising=False)
    with pytest.raises(InsecureState) as refused:
        open_store()
    assert isinstance(refused.value, BadInput)
    assert str(planted) in str(refused.value)
    assert f"owned by uid {nobody.pw_uid}" in str(refused.value)
    assert list(planted.iterdir()) == []


def test_record_file_of_another_user_is_refused_S51(nobody, as_nobody, shared_dir):
    directory = shared_dir / "state"
    directory.mkdir(mode=0o700)
    os.chmod(shared_dir, 0o1777)
    os.chmod(directory, 0o1777)
    as_nobody("open('state/record.db', 'w').close()", cwd=shared_dir)
    os.chmod(directory, 0o700)
    with pytest.raises(InsecureState, match=f"owned by uid {nobody.pw_uid}"):
        SQLiteStore(directory / "record.db")
    assert (directory / "record.db").read_bytes() == b""


def test_state_directory_writable_by_others_is_refused_S51(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir()
    os.chmod(directory, 0o777)
    with pytest.raises(InsecureState, match=r"writable by others \(mode 0777\).*chmod 700"):
        SQLiteStore(directory / "record.db")
    assert list(directory.iterdir()) == []


def test_dangling_record_symlink_is_refused_and_its_target_never_created_S51(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    target = tmp_path / "elsewhere" / "stolen.db"
    target.parent.mkdir()
    (directory / "record.db").symlink_to(target)
    with pytest.raises(InsecureState, match=r"record\.db is a symbolic link"):
        SQLiteStore(directory / "record.db")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_record_symlink_to_a_real_store_is_refused_too_S51(tmp_path, ev):
    real = tmp_path / "real" / "record.db"
    with SQLiteStore(real) as store:
        store.append("job-a", 0, ev.record("job-a", 1))
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    (directory / "record.db").symlink_to(real)
    with pytest.raises(InsecureState, match="symbolic link"):
        SQLiteStore(directory / "record.db")


def test_symlinked_state_directory_is_refused_S51(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(real)
    with pytest.raises(InsecureState, match=r"state is a symbolic link"):
        SQLiteStore(tmp_path / "state" / "record.db")
    assert list(real.iterdir()) == []


def test_an_existing_record_readable_by_others_is_made_private_S51(tmp_path, ev):
    path = tmp_path / "state" / "record.db"
    with SQLiteStore(path) as store:
        store.append("job-a", 0, ev.record("job-a", 1))
    os.chmod(path, 0o644)
    with SQLiteStore(path) as store:
        assert [s.job_id for s in store.jobs()] == ["job-a"]
    assert mode(path) == 0o600


def test_foreign_sqlite_file_is_refused_and_left_untouched_S36(tmp_path):
    path = tmp_path / "state" / "photos.db"
    path.parent.mkdir(mode=0o700)
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE albums (name TEXT)")
        db.execute("INSERT INTO albums VALUES ('holiday')")
    db.close()
    before = path.read_bytes()
    with pytest.raises(BadInput) as refused:
        SQLiteStore(path)
    message = str(refused.value)
    assert "not a dispatch record store" in message and "albums" in message
    assert "untouched" in message
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["photos.db"]


def test_store_path_that_is_a_directory_is_bad_input_with_advice_S36(tmp_path):
    directory = tmp_path / "state" / "record.db"
    directory.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "state", 0o700)
    with pytest.raises(BadInput) as refused:
        SQLiteStore(directory)
    assert not isinstance(refused.value, Unreachable)
    assert "is a directory" in str(refused.value)
    assert f"sqlite://{directory}/record.db" in str(refused.value)


@pytest.fixture
def read_only_mount(tmp_path):
    """A real read-only file system: a tmpfs written to, then remounted read-only."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {done.stderr}", pytrace=False)

    def remount_read_only() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)

    yield mount, remount_read_only
    subprocess.run(["umount", str(mount)], check=False)


def test_record_on_a_read_only_file_system_can_be_listed_and_read_S36(read_only_mount, ev):
    mount, remount_read_only = read_only_mount
    path = mount / "record.db"
    with SQLiteStore(path) as store:
        store.append("job-a", 0, ev.record("job-a", 2))
        store.append("job-b", 0, ev.record("job-b", 1))
    remount_read_only()
    with SQLiteStore(path) as store:
        assert store.read_only
        assert sorted(s.job_id for s in store.jobs()) == ["job-a", "job-b"]
        assert store.read("job-a") == ev.record("job-a", 2)
        assert [e.job_id for e in store.read_feed(0).events] == ["job-a", "job-a", "job-b"]
        with pytest.raises(BadInput, match=r"read-only \(read-only file system\).*listed and read"):
            store.append("job-a", 2, [ev.hold("job-a", 3)])
        with pytest.raises(BadInput, match="read-only"):
            store.acquire_leases(["job-a"], "sup", timedelta(seconds=5), datetime.now(UTC))


def test_creating_a_record_on_a_read_only_file_system_is_bad_input_S36(read_only_mount):
    mount, remount_read_only = read_only_mount
    remount_read_only()
    with pytest.raises(BadInput) as refused:
        SQLiteStore(mount / "record.db")
    assert not isinstance(refused.value, Unreachable)
    assert "read-only file system" in str(refused.value)
    assert "DISPATCH_STORE" in str(refused.value)
    with pytest.raises(BadInput) as refused:
        SQLiteStore(mount / "state" / "dispatch" / "record.db")
    assert not isinstance(refused.value, Unreachable)
    assert "Read-only file system" in str(refused.value)


def test_dispatch_list_of_a_read_only_record_exits_0_and_a_write_exits_2_S36(read_only_mount, ev):
    mount, remount_read_only = read_only_mount
    path = mount / "record.db"
    with SQLiteStore(path) as store:
        store.append("job-a", 0, ev.record("job-a", 1))
    remount_read_only()
    env = {**os.environ, "DISPATCH_STORE": f"sqlite://{path}"}
    dispatch = Path(sys.executable).parent / "dispatch"
    listed = subprocess.run(
        [str(dispatch), "list", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert "job-a" in listed.stdout
    cancel = subprocess.run(
        [str(dispatch), "cancel", "job-a"], capture_output=True, text=True, env=env, timeout=120
    )
    assert cancel.returncode == 2, (cancel.stdout, cancel.stderr)
    assert "read-only" in cancel.stderr
    assert "Traceback" not in cancel.stderr


def test_dispatch_list_in_a_state_directory_of_another_user_exits_2_S51(
    nobody, as_nobody, shared_dir
):
    os.chmod(shared_dir, 0o1777)
    as_nobody("import os; os.mkdir('dispatch', 0o777); os.chmod('dispatch', 0o777)", cwd=shared_dir)
    env = {k: v for k, v in os.environ.items() if k != "DISPATCH_STORE"}
    env["XDG_STATE_HOME"] = str(shared_dir)
    dispatch = Path(sys.executable).parent / "dispatch"
    listed = subprocess.run(
        [str(dispatch), "list"], capture_output=True, text=True, env=env, timeout=120
    )
    assert listed.returncode == 2, (listed.stdout, listed.stderr)
    assert "owned by uid" in listed.stderr and "Traceback" not in listed.stderr
    assert list((shared_dir / "dispatch").iterdir()) == []


def test_record_read_only_by_its_mode_can_be_listed_by_its_owner_S36(
    nobody, as_nobody, shared_dir, ev
):
    """As ``nobody`` (root ignores file modes): a 0400 record in a 0500 directory."""
    os.chmod(shared_dir, 0o1777)
    script = """
import json, os
from datetime import UTC, datetime
from dispatch.model.errors import BadInput
from dispatch.store.sqlite import SQLiteStore
from dispatch.model.events import decode_event
events = json.loads(os.environ["EVENTS"])
created = decode_event(events[0])
os.mkdir("mine", 0o700)
path = os.path.abspath("mine/record.db")
with SQLiteStore(path) as store:
    store.append(created.job_id, 0, [created])
os.chmod(path, 0o400)
os.chmod("mine", 0o500)
out = {}
with SQLiteStore(path) as store:
    out["read_only"] = store.read_only
    out["jobs"] = [s.job_id for s in store.jobs()]
    out["seqs"] = [e.seq for e in store.read(created.job_id)]
    try:
        store.append(created.job_id, 1, [decode_event(events[1])])
    except BadInput as exc:
        out["write"] = str(exc)
os.chmod("mine", 0o700)
print(json.dumps(out))
"""
    events = [e.model_dump_json() for e in (ev.created("job-ro"), ev.hold("job-ro", 2))]
    out = json.loads(as_nobody(script, cwd=shared_dir, env={"EVENTS": json.dumps(events)}))
    assert out["read_only"] is True
    assert out["jobs"] == ["job-ro"] and out["seqs"] == [1]
    assert "read-only (permission denied)" in out["write"]
