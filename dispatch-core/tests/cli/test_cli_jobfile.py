"""Job files (``dispatch submit job.toml``, ``--save``): flags over the file, the merged
result in the dry run, a saved file that submits the same spec, and a bad file refused
naming the file, the key and its line with nothing recorded (S-36)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli.cli_shell import Shell
from dispatch import Client
from dispatch.jobfile import dumps, line_of, load_job_file
from dispatch.model.errors import BadInput

JOB = """\
name = "from-file"
command = ["sh", "-c", "echo from the file"]
progress_window = "20m"
warn = "USR1@30s"

[resources]
time = "10m"
cpus_per_task = 1

[env]
WHO = "file"
KEEP = "kept"
"""


def _spec(sh: Shell, *args: str) -> dict[str, Any]:
    out = sh.run("submit", "--dry-run", "--json", *args)
    assert out.returncode == 0, out.stderr
    spec: dict[str, Any] = json.loads(out.stdout)["spec"]
    spec.pop("heartbeat")  # a fresh path per spec
    return spec


def test_the_file_is_the_job_and_flags_override_it_key_by_key(sh: Shell) -> None:
    sh.write("job.toml", JOB)
    spec = _spec(sh, "job.toml")
    assert spec["name"] == "from-file"
    assert spec["command"] == ["sh", "-c", "echo from the file"]
    assert spec["resources"]["time_limit"] == "PT10M"
    assert spec["env"] == {"WHO": "file", "KEEP": "kept"}
    assert spec["progress_window"] == "PT20M"
    assert spec["warn"]["signal"] == "USR1"
    for args in (
        ("--time", "5m", "--env", "WHO=flag", "job.toml"),  # flags before the file
        ("job.toml", "--time", "5m", "--env", "WHO=flag"),  # and after it
    ):
        over = _spec(sh, *args)
        assert over["resources"]["time_limit"] == "PT5M"
        assert over["resources"]["cpus_per_task"] == 1
        assert over["env"] == {"WHO": "flag", "KEEP": "kept"}
        assert over["name"] == "from-file"


def test_a_command_after_the_file_replaces_its_command(sh: Shell) -> None:
    sh.write("job.toml", JOB)
    spec = _spec(sh, "job.toml", "--", "echo", "other")
    assert spec["command"] == ["echo", "other"]
    assert spec["name"] == "from-file"


def test_the_dry_run_shows_the_merged_job(sh: Shell) -> None:
    sh.write("job.toml", JOB)
    out = sh.run("submit", "--dry-run", "job.toml", "--time", "5m")
    assert out.returncode == 0, out.stderr
    merged = out.stdout.split("=== job.toml with the flags over it ===\n")[1].split("dry run:")[0]
    assert 'time = "5m"' in merged and "cpus_per_task = 1" in merged
    assert 'name = "from-file"' in merged
    assert sh.recorded() == []


def test_a_job_file_submits_and_runs(sh: Shell) -> None:
    sh.write("job.toml", JOB)
    out = sh.run("submit", "job.toml", "--wait", "--interval", "0.2", timeout=120)
    assert out.returncode == 0, out.stderr
    job = out.stdout.split()[0]
    assert sh.run("logs", job).stdout.strip() == "from the file"
    (row,) = sh.recorded()
    assert isinstance(row, dict) and row["name"] == "from-file"


def test_save_then_submit_gives_the_same_spec(sh: Shell) -> None:
    sh.write("project/train.sh", "#!/bin/sh\necho trained\n")
    sh.write("project/policy.toml", '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    flags = (
        "--name",
        "saved",
        "--script",
        "project/train.sh",
        "--policy",
        "project/policy.toml",
        "--time",
        "1:00:00",
        "--mem",
        "1G",
        "--env",
        "A=two words",
        "--env",
        'B=quote " and \\ backslash',
        "--warn",
        "USR1@90s",
        "--checkpoint-dir",
        "/scratch/ckpt",
        "--progress-window",
        "15m",
    )
    direct = json.loads(sh.run("submit", "--dry-run", "--json", *flags).stdout)
    (sh.home / "jobs").mkdir()
    out = sh.run("submit", "--save", "jobs/saved.toml", *flags)
    assert out.returncode == 0, out.stderr
    assert sh.recorded() == []
    text = (sh.home / "jobs" / "saved.toml").read_text()
    assert 'script = "../project/train.sh"' in text and 'policy = "../project/policy.toml"' in text
    # submitted from another directory: the paths are the file's
    elsewhere = sh.home / "elsewhere"
    elsewhere.mkdir()
    out = sh.run("submit", "--dry-run", "--json", str(sh.home / "jobs/saved.toml"), cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    saved = json.loads(out.stdout)
    for dry in (direct, saved):
        dry["spec"].pop("heartbeat")
    assert saved["spec"] == direct["spec"]
    assert saved["plan"] == direct["plan"]


def test_save_of_a_command_round_trips_through_submit(sh: Shell) -> None:
    flags = ("--time", "2m", "--launcher", "torchrun")
    command = ("--", "python3", "-c", "print('a\\tb \\u00e9')", "--flag=1")
    direct = _spec(sh, *flags, *command)
    assert sh.run("submit", "--save", "c.toml", *flags, *command).returncode == 0
    assert _spec(sh, "c.toml") == direct


def test_save_never_writes_over_a_file(sh: Shell) -> None:
    sh.write("there.toml", "# mine\n")
    out = sh.run("submit", "--save", "there.toml", "--", "true")
    assert out.returncode == 2
    assert "there.toml" in out.stderr and "exists" in out.stderr
    assert (sh.home / "there.toml").read_text() == "# mine\n"


def test_an_inline_policy_is_the_jobs_policy(sh: Shell) -> None:
    sh.write(
        "job.toml",
        JOB + '\n[policy]\n[[policy.rule]]\non = ["non-zero-exit"]\naction = "hold"\n',
    )
    out = sh.run("submit", "--dry-run", "--json", "job.toml")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    assert [r["action"] for r in plan["rules"]] == ["hold"]


def test_the_files_profile_fills_in_and_a_flag_wins(sh: Shell) -> None:
    sh.write(
        "config/dispatch/config.toml",
        '[profile.small.resources]\ncpus_per_task = 2\ntime = "3m"\n',
    )
    sh.write("job.toml", 'profile = "small"\ncommand = ["true"]\n')
    spec = _spec(sh, "job.toml")
    assert spec["resources"]["cpus_per_task"] == 2
    assert spec["resources"]["time_limit"] == "PT3M"
    missing = sh.run("--profile", "absent", "submit", "--dry-run", "job.toml")
    assert missing.returncode == 2 and "absent" in missing.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('command = ["true"]\nnodez = 2\n', ["job.toml", "line 2", "nodez", "unknown key"]),
        ('command = ["true"]\n[resources]\ngpus = 1\n', ["job.toml", "line 3", "resources.gpus"]),
        ('command = "python train.py"\n', ["job.toml", "line 1", "'command'", "array"]),
        ('command = ["true"]\n\n[resources]\nnodes = "2"\n', ["line 4", "resources.nodes"]),
        ('command = ["true"]\nresources = { nodes = 0 }\n', ["line 2", "resources.nodes"]),
        ('command = ["true"]\n[resources]\ntime = 04:00:00\n', ["line 3", "quote it"]),
        ('command = ["true"]\nwarn = 90\n', ["line 2", "'warn'", "text"]),
        ('command = ["true"]\n[env]\nN = 1\n', ["line 3", "env.N"]),
        ('command = ["true"]\npolicy = 3\n', ["line 2", "'policy'"]),
        ('command = ["true"]\nscript = "x.sh"\n', ["line 2", "not both"]),
        ('command = ["true"]\nname = \n', ["job.toml", "not valid TOML", "line 2"]),
        ('command = ["true"\n', ["job.toml", "not valid TOML"]),
        ('command = ["true"]\nwarn = "USR1@soon"\n', ["job.toml", "'warn'", "soon"]),
        (
            'command = ["true"]\n[policy]\n[[policy.rule]]\non = ["x"]\naction = "hold"\n',
            ["job.toml", "policy", "rule 1"],
        ),
    ],
)
def test_a_bad_job_file_is_refused_naming_file_key_and_line_S36(
    sh: Shell, text: str, words: list[str]
) -> None:
    sh.write("job.toml", text)
    out = sh.run("submit", "job.toml")
    assert out.returncode == 2, out.stdout + out.stderr
    for word in words:
        assert word in out.stderr, out.stderr
    assert sh.recorded() == []


def test_a_missing_job_file_is_refused_S36(sh: Shell) -> None:
    out = sh.run("submit", "absent.toml")
    assert out.returncode == 2 and "absent.toml" in out.stderr
    assert sh.recorded() == []


def test_client_submit_file_with_overrides(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(JOB)
    with Client(f"sqlite:///{tmp_path / 'record.db'}") as client:
        dry = client.dry_run_file(tmp_path / "job.toml", env={"WHO": "keyword"}, name="kw")
        assert dry.spec.env == {"WHO": "keyword", "KEEP": "kept"}
        assert dry.spec.name == "kw"
        with pytest.raises(BadInput, match="nodez"):
            client.submit_file(tmp_path / "job.toml", nodez=1)
        handle = client.submit_file(tmp_path / "job.toml", command=["sh", "-c", "echo kw"])
        assert b"".join(c.data for c in handle.logs(follow=True, interval=0.2)) == b"kw\n"
        assert client.job(handle.job_id).record().spec.name == "from-file"


def test_the_written_file_reads_back() -> None:
    values = {
        "name": 'a "name"\twith\x7f',
        "command": ["a", "b c"],
        "resources": {"nodes": 2, "mem": "4G"},
        "env": {"DOTTED.KEY": "v", "plain": "w"},
        "options": {},
    }
    import tomllib

    back = tomllib.loads(dumps(values))
    assert back == {k: v for k, v in values.items() if v != {}}


def test_line_of_finds_keys_in_tables_dotted_keys_and_inline_tables() -> None:
    text = 'a = 1\nresources.nodes = 2\n[env]\nX = "1"\n[options]\n"q.k" = "v"\n'
    assert line_of(text, ("a",)) == 1
    assert line_of(text, ("resources", "nodes")) == 2
    assert line_of(text, ("env", "X")) == 4
    assert line_of(text, ("options", "q.k")) is None or line_of(text, ("options", "q.k")) == 6
    assert line_of(text, ("missing",)) is None


def test_load_job_file_resolves_paths_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "job.toml"
    path.write_text('script = "run.sh"\npolicy = "../p.toml"\n')
    job = load_job_file(path)
    assert job.values["script_file"] == str(tmp_path / "sub" / "run.sh")
    assert job.values["policy"] == str(tmp_path / "sub" / "../p.toml")


def test_an_option_the_backend_does_not_take_is_refused_naming_the_line_S36(
    sh: Shell, tmp_path: Path
) -> None:
    sh.write("job.toml", 'command = ["true"]\n\n[options]\npartition = "gpu"\n')
    out = sh.run("submit", "job.toml")  # local takes no options
    assert out.returncode == 2
    for word in ("job.toml", "line 4", "options.partition", "'local'"):
        assert word in out.stderr, out.stderr
    assert sh.recorded() == []
    with (
        Client(f"sqlite:///{tmp_path / 'record.db'}") as client,
        pytest.raises(BadInput, match=r"line 4: key 'options\.partition'"),
    ):
        client.submit_file(sh.home / "job.toml")
