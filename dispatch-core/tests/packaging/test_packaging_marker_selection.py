"""The repository's conftest keeps live tests selectable one way: a test of a
``test_*_live_*.py`` file without ``live(server=...)``, or with an unknown server, or a
``live`` test elsewhere, stops the collection with a usage error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[3] / "conftest.py"
INI = "[pytest]\nmarkers =\n    live(server): a real scheduler\naddopts = -p no:dispatch_testing\n"


@pytest.fixture
def tests(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(INI)
    return pytester


def test_marked_live_files_collect(tests: pytest.Pytester) -> None:
    tests.makepyfile(
        test_slurm_live_a="import pytest\n"
        'pytestmark = pytest.mark.live(server="slurm")\n'
        "def test_a(): pass\n",
        test_offline="def test_b(): pass\n",
    )
    result = tests.runpytest("--collect-only", "-q", "-m", "not live")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*1/2 tests collected (1 deselected)*"])


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"test_slurm_live_b": "def test_a(): pass\n"}, "*test_slurm_live_b.py: a live file*"),
        (
            {
                "test_kube_live_c": "import pytest\n"
                'pytestmark = pytest.mark.live(server="k8s")\n'
                "def test_a(): pass\n"
            },
            "*must name one of slurm, kubeflow*",
        ),
        (
            {"test_d": "import pytest\n@pytest.mark.live(server='slurm')\ndef test_a(): pass\n"},
            "*test_d.py::test_a: marked live outside*",
        ),
    ],
    ids=["unmarked-live-file", "unknown-server", "live-elsewhere"],
)
def test_a_wrong_live_marker_stops_the_collection(
    tests: pytest.Pytester, files: dict[str, str], said: str
) -> None:
    tests.makepyfile(**files)
    result = tests.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*live marker:*", said])
