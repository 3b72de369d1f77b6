"""The ``local`` backend: dispatch on one machine, with no cluster.

Each submission becomes a process group on this host, run by a small detached *runner*
process, so a later ``dispatch status`` in another process finds it by reading files.

State directory (``DISPATCH_LOCAL_DIR``, default ``$XDG_STATE_HOME/dispatch/local``)::

    objects/<object id>/        one submission; the object id is local-<12 hex digits>
        meta.json               job id, submission, spec, gated, created_at, cwd, grace
        script                  the spec's script, when it has one
        runner.json             the runner's pid, start time (/proc), boot id and host,
                                written by the runner once it is ready
        gate-open               present once the gate is open
        started.json            the command's pid, start time, boot id, host; started_at;
                                its keeper's identity
        exit.json               the command's wait status, written by its keeper
        stop.json               dispatch asked to stop it, and why (the first ask wins)
        end.json                how it ended: cause, exit code, times
        stdout, stderr          the command's output; runner.log the runner's own
    jobs/<job key>/<object id>  the index discovery reads: content is the submission
    jobs/<job key>/submission-N the one object published for submission N (its claim)
    environments/<job key>.json the submitter's environment, kept at submit (0600)

Decisions the requirements leave open:

- A submit goes in four steps, each recoverable if the submitting process dies after it,
  so a submit killed half way never leaves a second object: the files are drafted under
  ``objects/.draft-<id>``, moved into place, the runner is started, and only then is the
  object published: it claims its submission under its job (a file made once, naming it)
  and is indexed there. A draft or an unpublished object is invisible (the next
  supervisor submits anew) and is removed by garbage collection; the runner waits up to 60
  s for the publication and ends the object unrun (``abandoned``) if it never comes, or
  at once if another object holds the claim (a submit held up past its supervisor's
  lease, after the supervisor that took over submitted anew: that submit is refused and
  nothing of it runs); a published object's runner is already going. Only the first
  runner recorded in ``runner.json`` runs the object.
- Life of an object: ``gated`` (waiting for ``gate-open``) → ``starting`` → ``running``
  (``stopping`` once a stop is asked) → ``ended``. Every file is written whole (temporary
  name, then rename or link), and ``end.json`` only once: the first writer wins.
- Endings: exit 0 → ``none``; exit N → ``non-zero-exit`` with code N (provenance
  application); killed by a signal S not sent by dispatch → ``non-zero-exit`` with code
  128+S and the signal named in ``detail``; past ``resources.time_limit`` → SIGTERM to the
  group, SIGKILL after the grace → ``time-limit``; a stop → the same signals →
  ``cancelled`` with provenance actor and the stop cause's actor and words; the command not
  found, not executable or a bad working directory → ``launch-failed`` with the OS error
  verbatim. SIGTERM, SIGINT or SIGHUP sent to the runner itself stops the command too:
  from a user's process (``kill <runner pid>``, the local ``scancel``) it ends
  ``cancelled`` with provenance scheduler and the sender's pid and uid in ``detail``; from
  the kernel or init (a host shutdown) it ends ``unknown``, since it says nothing about
  the job. The runner's pid is in ``runner.json``.
- Leftovers: when the command's leader exits, whatever else is still in its process group
  is killed (as Slurm ends a job step), before the leader is reaped so the group id
  cannot have been reused.
- The command's parent is a *keeper* forked from the runner (its own session; the
  command in a process group of its own): it records the exit status in ``exit.json``,
  so a command that ends after its runner was killed is reported as it ended (exit 0 is
  ``none``), not ``unknown``. A runner that died without recording an ending (the machine
  rebooted, the runner and keeper were SIGKILLed) is detected by pid + start time + boot
  id and reported ended ``unknown`` with what was found (a runner not on record 30 s
  after the submission too: it never got going; see its ``runner.log``). If its command
  is still running, it is reported running, and a stop kills it directly.
- A deleted object directory (its job index entry left) is found by what survives it,
  since its command may still run: the processes carrying its ``DISPATCH_OBJECT_ID`` (the
  command) or its path in their argv (runner, keeper), one scan of ``/proc`` per
  discovery, made only then. While any lives the object is reported running, so nothing
  replaces it beside them; a stop SIGTERMs the command's process groups, SIGKILLs after
  the grace; with none left it is ended ``unknown``. A state directory shared between
  hosts (NFS) works: processes of another host are not checked from here, and their runner
  sees stop and gate files there.
- The command runs in the submitter's environment (kept at submit in
  ``environments/<job key>.json``, 0600), never with dispatch's own ``DISPATCH_*``
  configuration, plus ``spec.env``, plus what dispatch sets: ``DISPATCH_JOB_ID``,
  ``DISPATCH_SUBMISSION``, ``DISPATCH_EXECUTION``, ``DISPATCH_RESUMED``,
  ``DISPATCH_OBJECT_ID``, ``PYTHONUNBUFFERED=1`` and the one-node torch.distributed
  contract (``MASTER_ADDR``, ``MASTER_PORT`` per job, ``WORLD_SIZE``... and torchrun's
  ``PET_*``): see :mod:`dispatch.local.environment` (S-44). It runs in ``spec.workdir``
  (relative to the submitting directory) or the submitting directory. A script that
  starts with ``#!`` is executed as is, any other with /bin/sh.
- Resources: more than one node, more than one task per node, or GPUs are refused at
  submit (``SubmitRefused``): this backend does not provide them. ``cpus_per_task`` and
  ``memory_mb`` are accepted and not enforced, so an out-of-memory kill shows as
  ``non-zero-exit`` killed by SIGKILL.
- Causes it cannot report: ``preempted``, ``node-lost``, ``out-of-memory``, ``no-capacity``
  (nothing here preempts, loses a node, or tells an OOM kill from another SIGKILL). Its
  ``node_loss_window`` (30 s) is declared because every backend must; it is never used.
- Discovery reads ``jobs/<job key>/`` for each job asked, then those objects' files: its
  cost follows the objects of the jobs asked, never every object on the machine (S-32).
  Unknown job ids are absent. Discovery only reads; stop and open_gate are idempotent, and
  a stop waits up to the grace plus a margin for the ending to be recorded.
- Unreachable (S-5): a state directory that exists but cannot be read (replaced by a
  file, an unmounted share, an I/O error) makes every hook raise ``Unreachable``; one that
  does not exist yet simply holds no objects. A runner that cannot write its records
  keeps retrying for ten minutes, so an ending during a passing outage is not lost.
- Garbage collection (:mod:`dispatch.local.collect`, at most once an hour from a submit,
  or ``LocalBackend.collect_garbage(active)``): drafts, temporary files and objects never
  indexed (a killed submit's) go once an hour old and without a live runner; ended
  objects go with their index entry 14 days after their ending
  (``DISPATCH_LOCAL_RETENTION_DAYS``), unless the caller names their job active; nothing
  without an ending is ever removed.
"""
