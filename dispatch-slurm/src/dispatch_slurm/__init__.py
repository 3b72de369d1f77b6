"""dispatch-slurm: the Slurm backend of dispatch.

It drives Slurm's own commands (``sbatch``, ``squeue``, ``sacct``, ``scontrol``,
``scancel``, ``sinfo``) with argument lists and timeouts, and maps what they print to
dispatch's phases and causes through one table (:mod:`dispatch_slurm.classify`).
"""

__version__ = "0.1.0"
