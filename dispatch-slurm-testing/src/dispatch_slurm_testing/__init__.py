"""dispatch-slurm-testing: what proves dispatch-slurm, kept out of the product wheel.

- :mod:`dispatch_slurm_testing.cluster`: the start script shipped as package data (a real
  multi-node Slurm on one host) and the one way to lose a node for real and bring it back;
- :mod:`dispatch_slurm_testing.provoke`: the scenario driver (every ending provoked for real);
- :mod:`dispatch_slurm_testing.harness`: the conformance kit's harness (``dispatch-conformance
  slurm --live``), with a non-destructive mode for a platform team's own cluster.
"""

__version__ = "0.1.0"
