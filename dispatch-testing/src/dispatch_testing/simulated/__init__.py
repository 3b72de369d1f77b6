"""The simulated scheduler (:mod:`.scheduler`), its adapter (:mod:`.backend`) and its
kit harness (:mod:`.harness`).

The backend is no production backend: its ``dispatch.backends`` entry point exists only
after :func:`register` (the kit's simulated harness calls it), see :mod:`.registration`."""

from dispatch_testing.simulated.backend import SimulatedBackend
from dispatch_testing.simulated.registration import register, registered, unregister
from dispatch_testing.simulated.scheduler import Clock, Outcome, SchedulerDown, SimScheduler

__all__ = [
    "Clock",
    "Outcome",
    "SchedulerDown",
    "SimScheduler",
    "SimulatedBackend",
    "register",
    "registered",
    "unregister",
]
