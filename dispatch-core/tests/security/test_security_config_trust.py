"""Settings another user can write are refused (S-51), as git's ``safe.directory`` does.

``dispatch.toml`` is looked for in every directory upward from the working directory, so a
file planted by another user in a shared directory (``/tmp``) could set ``notify.command``,
which the supervisor runs as whoever runs dispatch below it. A config, profile or policy
file owned by another user (root excepted) or writable by group or others is refused with
its path, its owner and what to do; nothing is recorded and nothing is run. The other user
is a real one (``nobody``), who writes the file themselves.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable
from pathlib import Path

import pytest
from cli.cli_shell import Shell, sh

__all__ = ["sh"]

PLANTED = """
[profile.default]
backend = "local"

[profile.default.notify]
command = ["sh", "-c", "touch {marker}"]
"""


def test_a_dispatch_toml_planted_by_another_user_above_the_working_directory_is_refused_S51(
    sh: Shell,
    shared_dir: Path,
    nobody: pwd.struct_passwd,
    as_nobody: Callable[..., str],
) -> None:
    os.chmod(shared_dir, 0o1777)  # a shared directory, as /tmp is
    marker = shared_dir / "ran-as-the-victim"
    planted = shared_dir / "dispatch.toml"
    as_nobody(
        f"open({str(planted)!r}, 'w').write({PLANTED.format(marker=marker)!r})", cwd=shared_dir
    )
    assert os.stat(planted).st_uid == nobody.pw_uid  # written by the other user
    work = shared_dir / "victim" / "project"
    work.mkdir(parents=True)
    for args in (("config",), ("list",), ("submit", "--", "true"), ("supervise", "--once")):
        out = sh.run(*args, cwd=work, timeout=120)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert str(planted) in out.stderr, out.stderr
        assert f"owned by nobody (uid {nobody.pw_uid})" in out.stderr, out.stderr
        assert "copy it to a file of your own" in out.stderr, out.stderr
    error = json.loads(sh.run("config", "--json", cwd=work, timeout=120).stdout)["error"]
    assert str(planted) in error["message"] and error["exit_code"] == 2
    assert not marker.exists()
    assert sh.recorded() == []


def test_a_policy_file_another_user_owns_is_refused_S51(
    sh: Shell, shared_dir: Path, as_nobody: Callable[..., str]
) -> None:
    os.chmod(shared_dir, 0o1777)
    policy = shared_dir / "policy.toml"
    rule = '[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 50\n'
    as_nobody(f"open({str(policy)!r}, 'w').write({rule!r})", cwd=shared_dir)
    out = sh.run("plan", "--policy", str(policy))
    assert out.returncode == 2 and str(policy) in out.stderr, out.stderr
    assert "owned by nobody" in out.stderr
    # named by a profile of the user's own file: refused the same way
    sh.write("dispatch.toml", f'[profile.default]\npolicy = "{policy}"\n')
    out = sh.run("submit", "--", "true")
    assert out.returncode == 2 and str(policy) in out.stderr, out.stderr
    assert sh.recorded() == []


@pytest.mark.parametrize(("mode", "words"), [(0o664, "its group"), (0o646, "others")])
@pytest.mark.parametrize("which", ["project", "user", "policy"])
def test_a_settings_file_of_ones_own_that_others_can_write_is_refused_S51(
    sh: Shell, mode: int, words: str, which: str
) -> None:
    profile = '[profile.default]\nbackend = "local"\n'
    if which == "project":
        target = sh.write("dispatch.toml", profile)
    elif which == "user":
        target = sh.write("config/dispatch/config.toml", profile)
    else:
        target = sh.write(
            "policy.toml", '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n'
        )
        sh.write("dispatch.toml", f'[profile.default]\npolicy = "{target}"\n')
    os.chmod(target, mode)
    out = sh.run("submit", "--", "true")
    assert out.returncode == 2, out.stderr
    assert f"{target}: writable by {words} (mode 0{mode:o})" in out.stderr, out.stderr
    assert f"chmod go-w {target}" in out.stderr
    assert sh.recorded() == []
    os.chmod(target, 0o644)  # the advice followed: the same command goes on
    assert sh.run("submit", "--no-start", "--", "true").returncode == 0


def test_a_root_owned_config_is_trusted_by_another_user_S51(
    shared_dir: Path, as_nobody: Callable[..., str]
) -> None:
    (shared_dir / "dispatch.toml").write_text('[profile.default]\nbackend = "slurm"\n')
    work = shared_dir / "team"
    work.mkdir()
    os.chmod(work, 0o777)
    code = (
        "from dispatch.config import load_config\n"
        f"print(load_config(cwd={str(work)!r}).source('backend'))\n"
    )
    shown = as_nobody(code, cwd=work)
    assert f"project file {shared_dir / 'dispatch.toml'}" in shown, shown
