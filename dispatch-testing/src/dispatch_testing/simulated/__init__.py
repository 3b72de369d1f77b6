"""The simulated scheduler (:mod:`.scheduler`), its adapter (:mod:`.backend`) and its
kit harness (:mod:`.harness`)."""

from dispatch_testing.simulated.backend import SimulatedBackend
from dispatch_testing.simulated.scheduler import Clock, Outcome, SchedulerDown, SimScheduler

__all__ = ["Clock", "Outcome", "SchedulerDown", "SimScheduler", "SimulatedBackend"]
