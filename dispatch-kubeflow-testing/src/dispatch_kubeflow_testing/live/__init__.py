"""The live tier: a real Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, KWOK, JobSet, Kubeflow Trainer) built from Go
modules and started on loopback by ``scripts/start-kube.sh``, and a driver that provokes
each ending on it the way a cluster would produce it.

- :mod:`.kubeapi` — a small stdlib HTTPS client for the driver and the installer (the
  adapter under test keeps its own ``kubernetes`` client; nothing here patches it);
- :mod:`.install` — installs CRDs, webhooks, runtimes and KWOK nodes (run by the script);
- :mod:`.cluster` — starts the control plane through the script and reads its endpoint;
- :mod:`.driver` — provokes endings: exits, OOM kills, pull failures, preemption through
  the real scheduler, lost nodes, a frozen API server.
- :mod:`.flapping` — the campaign that stops and freezes a plane's kube-apiserver under
  TrainJobs and a supervisor (on a plane of its own: :func:`.cluster.own_plane`).
"""
