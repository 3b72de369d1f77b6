"""One submission, one run (S-34): a submit held up between starting its object's runner
and publishing the object (its supervisor frozen past its lease) while the supervisor that
took its jobs over found nothing published and submitted the same submission anew. Only
one object is ever published for a submission (its claim is made once), and the other is
ended unrun, whenever its submit goes on.

The frozen submit is the real backend's, held at the publication step by an event the
test sets; the commands are real processes, each appending its object id to a file."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch import JobSpec, ObjectView, Phase
from dispatch.local.backend import LocalBackend
from dispatch.local.records import Ending
from dispatch.model.errors import SubmitRefused
from dispatch_testing.waiting import eventually
from local.conftest import GRACE


class HeldUp(LocalBackend):
    """A submit that stops just before publishing its object until ``go`` is set (as a
    supervisor SIGSTOPped in the middle of a submit does)."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir=state_dir, stop_grace=GRACE)
        self.reached = threading.Event()
        self.go = threading.Event()

    def _publish(self, meta):  # type: ignore[no-untyped-def]
        self.reached.set()
        self.go.wait(120)
        return super()._publish(meta)


@pytest.mark.parametrize("late", ["before-the-runner-looks", "after-the-runner-looks"])
def test_a_submit_held_up_past_its_lease_never_runs_beside_the_one_after_it_S34(
    state_dir: Path,
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    tmp_path: Path,
    late: str,
) -> None:
    runs = tmp_path / "runs"
    spec = JobSpec(command=("sh", "-c", f'echo "$DISPATCH_OBJECT_ID" >> {runs}'))
    held = HeldUp(state_dir)
    outcome: list[BaseException | str] = []

    def first_submit() -> None:
        try:
            outcome.append(held.dispatch_submit("job-r", 1, spec, False))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=first_submit, daemon=True)
    thread.start()
    try:
        assert held.reached.wait(60), "the first submit never reached its publication"
        objects = state_dir / "objects"
        (first,) = [p.name for p in objects.iterdir() if p.name.startswith("local-")]
        eventually((objects / first / "runner.json").exists, what="the first runner started")
        assert backend.dispatch_discover(["job-r"]).objects == ()  # nothing published yet

        second = backend.dispatch_submit("job-r", 1, spec, False)  # the supervisor after it
        assert settle("job-r", lambda v: v.phase is Phase.ENDED).object_id == second
        if late == "before-the-runner-looks":
            held.go.set()  # published at once: the first runner may not have looked yet
        ended = eventually(
            lambda: (objects / first / "end.json").exists(), what="the first object ended"
        )
        assert ended
    finally:
        held.go.set()
        thread.join(60)
    ending = Ending.model_validate_json((objects / first / "end.json").read_text())
    assert (ending.state, ending.launched) == ("abandoned", False), ending
    assert "published by another submit; nothing was run" in ending.cause.detail
    (refused,) = outcome
    assert isinstance(refused, SubmitRefused), refused
    assert f"already object {second}" in str(refused)
    assert runs.read_text().split() == [second]  # one run: the published object's
    seen = backend.dispatch_discover(["job-r"]).objects
    assert [v.object_id for v in seen] == [second]
    index = state_dir / "jobs" / "job-r"
    assert (index / "submission-1").read_text() == second
    assert not (index / first).exists()
    assert json.loads((objects / first / "meta.json").read_text())["submission"] == 1
