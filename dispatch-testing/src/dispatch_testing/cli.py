"""``dispatch-conformance BACKEND [--live] [pytest args]``: the kit in one command.

The same as ``pytest --dispatch-backend BACKEND [--dispatch-live]`` on the kit's suite,
with the kit's own settings (``xfail_strict = true``, no ini file of the current
directory) so an adapter's project configuration cannot loosen it. Exit status is pytest's.
"""

from __future__ import annotations

import os
import sys

import pytest

from dispatch_testing.kit.plugin import SUITE

#: The console script lives in dispatch_testing, so pytest finds the package imported
#: before it could rewrite its asserts; the kit's messages do not need rewriting.
SETTINGS = (
    "-o",
    "xfail_strict=true",
    "-p",
    "no:cacheprovider",
    # the kit's suite uses no hypothesis; its plugin costs seconds at start-up
    "-p",
    "no:hypothesispytest",
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
    "-rxXf",
)

USAGE = """\
usage: dispatch-conformance BACKEND [--live] [pytest args...]

Run the dispatch conformance kit against the backend registered as BACKEND
(entry points dispatch.backends and dispatch.harnesses). --live uses a real
scheduler through the harness's live tier; the default is the offline tier.
"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0].startswith("-"):
        sys.stdout.write(USAGE)
        return 0 if args and args[0] in ("-h", "--help") else 2
    backend, rest = args[0], args[1:]
    live = ["--dispatch-live"] if "--live" in rest else []
    rest = [a for a in rest if a != "--live"]
    return int(
        pytest.main(
            [
                "-c",
                os.devnull,
                "--rootdir",
                str(SUITE.parent),
                *SETTINGS,
                "--dispatch-backend",
                backend,
                *live,
                *rest,
                str(SUITE),
            ]
        )
    )


if __name__ == "__main__":
    sys.exit(main())
