"""dispatch backend for Kubeflow Trainer v2 TrainJobs.

Importing this package is cheap: the ``kubernetes`` client is imported only when the
backend talks to a cluster (see :mod:`dispatch_kubeflow.backend`).
"""
