"""The pure core: what a job's record means and what to do about it (S-20, S-21, S-22).

Everything here is a function of its arguments: no store, no scheduler, no clock, no
process, no file (``tests/core/test_core_boundary.py`` parses every import and fails
otherwise). Time and ids are passed in. The shell around it (supervisor, stores, CLI,
backends) reads the world, calls ``fold``/``decide``/``project`` and carries out the
effects ``decide`` returns.

- :mod:`dispatch.core.table`: the three tables (ending, execution, shown state), as rows.
- :mod:`dispatch.core.folding`: ``fold(events) -> Job``.
- :mod:`dispatch.core.decisions`: ``decide(job, discovery, plan, now) -> effects``.
- :mod:`dispatch.core.projection`: ``project(job, discovery, now) -> Status``.
- :mod:`dispatch.core.policy`, :mod:`~dispatch.core.job`, :mod:`~dispatch.core.status`,
  :mod:`~dispatch.core.effects`, :mod:`~dispatch.core.cause`: the models they exchange.
- :mod:`dispatch.core.interventions`: what a person asks (cancel, resubmit...), as events.

The models shared with the shell (events, spec, discovery...) are in :mod:`dispatch.model`.
"""
