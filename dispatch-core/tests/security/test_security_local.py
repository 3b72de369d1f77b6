"""The local backend's state directory (S-51): files holding a job's
environment are the owner's alone, and no symlink or other user's directory is written
through."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from dispatch.local.layout import (
    InsecureState,
    StateDir,
    create_once,
    private_mkdir,
    write_atomic,
)
from dispatch.model.errors import BadInput


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_prepare_creates_the_state_directories_0700_S51(tmp_path, umask_022):
    state = StateDir(tmp_path / "local")
    state.prepare()
    for path in (state.root, state.objects, state.jobs):
        assert mode(path) == 0o700, path
    state.prepare()  # again: nothing to do, nothing refused


def test_files_written_are_0600_and_their_directory_0700_whatever_the_umask_S51(
    tmp_path, umask_022
):
    """meta.json holds the job's --env values: never world-readable."""
    state = StateDir(tmp_path / "local")
    state.prepare()
    obj = state.objects / ".draft-local-0123456789ab"
    obj.mkdir()  # as a caller that forgot: the umask gives 0755
    assert mode(obj) == 0o755
    write_atomic(obj / "meta.json", '{"env": {"TOKEN": "s3cret"}}')
    assert create_once(obj / "end.json", "{}")
    assert mode(obj / "meta.json") == 0o600
    assert mode(obj / "end.json") == 0o600
    assert mode(obj) == 0o700
    assert sorted(p.name for p in obj.iterdir()) == ["end.json", "meta.json"]


def test_a_symlinked_objects_directory_is_refused_and_nothing_written_there_S51(tmp_path):
    """The attack: ``local/objects`` points elsewhere, and the job's env would follow."""
    state = StateDir(tmp_path / "local")
    state.root.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state.objects.symlink_to(elsewhere)
    with pytest.raises(InsecureState, match="objects is a symbolic link"):
        state.prepare()
    with pytest.raises(InsecureState, match="objects is a symbolic link"):
        state.check()
    (elsewhere / "local-0123456789ab").mkdir(mode=0o700)
    obj = state.object_dir("local-0123456789ab")
    with pytest.raises(InsecureState, match="symbolic link"):
        write_atomic(obj.meta, '{"env": {"TOKEN": "s3cret"}}')
    with pytest.raises(InsecureState, match="symbolic link"):
        create_once(obj.end, "{}")
    assert list((elsewhere / "local-0123456789ab").iterdir()) == []


def test_a_symlinked_object_directory_is_refused_S51(tmp_path):
    state = StateDir(tmp_path / "local")
    state.prepare()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (state.objects / "local-0123456789ab").symlink_to(elsewhere)
    with pytest.raises(InsecureState):
        write_atomic(state.object_dir("local-0123456789ab").meta, "{}")
    with pytest.raises(InsecureState):
        private_mkdir(state.objects / "local-0123456789ab")
    assert list(elsewhere.iterdir()) == []


def test_a_planted_symlink_in_place_of_a_file_is_never_followed_S51(tmp_path):
    """create_once links a fresh 0600 file into place: a symlink already there stays a
    link and its target is not written."""
    state = StateDir(tmp_path / "local")
    state.prepare()
    obj = state.objects / "local-0123456789ab"
    private_mkdir(obj)
    target = tmp_path / "target"
    (obj / "end.json").symlink_to(target)
    assert create_once(obj / "end.json", "{}") is False
    assert not target.exists()


def test_a_state_directory_created_by_another_user_is_refused_S51(nobody, as_nobody, shared_dir):
    os.chmod(shared_dir, 0o1777)
    as_nobody("import os; os.mkdir('local', 0o777); os.chmod('local', 0o777)", cwd=shared_dir)
    state = StateDir(shared_dir / "local")
    with pytest.raises(InsecureState) as refused:
        state.prepare()
    assert isinstance(refused.value, BadInput)
    assert f"owned by uid {nobody.pw_uid}" in str(refused.value)
    with pytest.raises(InsecureState):
        state.check()
    assert list(state.root.iterdir()) == []


def test_writing_into_a_directory_another_user_owns_is_refused_S51(nobody, as_nobody, shared_dir):
    os.chmod(shared_dir, 0o1777)
    as_nobody("import os; os.makedirs('local/objects/local-0123456789ab', 0o755)", cwd=shared_dir)
    obj = shared_dir / "local" / "objects" / "local-0123456789ab"
    with pytest.raises(InsecureState, match=f"owned by uid {nobody.pw_uid}"):
        write_atomic(obj / "meta.json", '{"env": {"TOKEN": "s3cret"}}')
    assert list(obj.iterdir()) == []


def test_a_state_directory_writable_by_others_is_refused_S51(tmp_path):
    state = StateDir(tmp_path / "local")
    state.prepare()
    os.chmod(state.jobs, 0o777)
    with pytest.raises(InsecureState, match=r"jobs is writable by others"):
        state.prepare()
    index = state.job_index("job-a")
    index.mkdir(mode=0o700)
    with pytest.raises(InsecureState, match=r"jobs is writable by others"):
        write_atomic(index / "local-0123456789ab", "1")
