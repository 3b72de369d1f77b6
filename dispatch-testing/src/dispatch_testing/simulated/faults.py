"""The operator's hand on the simulated scheduler: scripted endings, duplicates, an
unreachable controller, objects vanishing from listings, unmappable answers, preemption,
node loss, an admin's cancel or hold. None of these is a client call: they are not
counted and work while the scheduler is down."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from dispatch_testing.simulated.engine import Engine
from dispatch_testing.simulated.objects import SimObject
from dispatch_testing.simulated.outcomes import Outcome, node_loss


class OperatorHand(Engine):
    """Faults and the operator's actions, on top of the engine."""

    def plan(self, job_id: str, submission: int, *outcomes: Outcome) -> None:
        """Script how each execution of that submission's object will end, in order; once
        the script is spent, an execution runs as its command says (see the class)."""
        self._plans[(job_id, submission)] = list(outcomes)

    def duplicate_next(self, job_id: str, submission: int, extra: int = 1) -> None:
        """The next submit of that submission creates ``extra`` more objects with the same tags."""
        self._duplicates[(job_id, submission)] = extra

    def go_down(self, seconds: float | None = None) -> None:
        """The controller stops answering for ``seconds`` of clock time, or until
        :meth:`come_up`."""
        if seconds is None:
            self._down = True
        else:
            self._down_until = self.clock.now() + timedelta(seconds=seconds)

    def come_up(self) -> None:
        self._down = False
        self._down_until = None

    @contextmanager
    def down(self) -> Iterator[None]:
        self.go_down()
        try:
            yield
        finally:
            self.come_up()

    def hide(self, object_id: str, seconds: float | None = None) -> None:
        """The object vanishes from listings (for ``seconds``, or until :meth:`unhide`)."""
        obj = self._objects[object_id]
        obj.hidden_until = (
            datetime.max.replace(tzinfo=UTC)
            if seconds is None
            else self.clock.now() + timedelta(seconds=seconds)
        )
        self._changed(obj)

    def unhide(self, object_id: str) -> None:
        obj = self._objects[object_id]
        obj.hidden_until = None
        self._changed(obj)

    def garble(self, object_id: str, raw: str) -> None:
        """From now on the scheduler answers ``raw`` for this object's state."""
        obj = self._objects[object_id]
        obj.garbled, obj.garbled_at = raw, self.clock.now()
        self._changed(obj)

    def preempt(self, object_id: str, reason: str = "Preempted by a higher priority job") -> None:
        self._end_now(self._objects[object_id], "PREEMPTED", reason, None)

    def lose_node(
        self, object_id: str, keeps_running: bool = False, node: str | None = None
    ) -> str:
        """A node of the running execution dies (default: its last node); returns its name.

        Its tasks end ``NODE_FAIL`` and the others are killed in its wake, unless
        ``keeps_running``: then the object keeps reporting RUNNING, saying the node is lost.
        """
        obj = self._objects[object_id]
        execution = obj.current
        nodes = execution.nodes or obj.held_nodes
        index = nodes.index(node) if node is not None else None
        outcome = node_loss(0.0, keeps_running, node=index)
        return self._lose(obj, outcome)

    def nodes_of(self, object_id: str) -> tuple[str, ...]:
        """The nodes the object's current execution runs on (or has reserved)."""
        obj = self._objects[object_id]
        return obj.current.nodes or obj.held_nodes

    def admin_cancel(self, object_id: str, who: str = "root") -> None:
        self._end_now(self._objects[object_id], "CANCELLED", f"cancelled by {who}", None)

    def admin_hold(self, object_id: str, reason: str = "JobHeldAdmin") -> None:
        obj = self._objects[object_id]
        if obj.current.state in ("PENDING", "GATED"):
            obj.admin_hold, obj.admin_hold_at = reason, self.clock.now()
            self._changed(obj)
            obj.epoch += 1
            if obj.object_id in self._queue:
                self._queue.remove(obj.object_id)
            self._release_nodes(obj)

    def admin_release(self, object_id: str) -> None:
        obj = self._objects[object_id]
        obj.admin_hold = None
        self._changed(obj)
        self._try_start(obj)

    def objects(self) -> Iterable[SimObject]:
        return self._objects.values()
