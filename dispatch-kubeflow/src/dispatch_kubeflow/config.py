"""The backend's configuration, read from the environment (the backend is built with no
arguments by the registry, so the environment is its only channel).

Every variable is optional; a bad value is refused with the variable's name and value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from dispatch.model.errors import BadInput

PREFIX = "DISPATCH_KUBEFLOW_"


@dataclass(frozen=True)
class KubeflowConfig:
    """Where the cluster is and how this backend uses it.

    - ``kubeconfig``/``context``: which kubeconfig and context; ``in_cluster`` uses the
      pod's service account instead (the default when ``KUBERNETES_SERVICE_HOST`` is set
      and no kubeconfig is given).
    - ``namespace``: where TrainJobs go; default: the context's namespace, else ``default``.
    - ``runtime``/``runtime_kind``/``image``: defaults for a job that names none.
    - ``queue``: a Kueue LocalQueue; Kueue then owns ``spec.suspend`` (see gating).
    - ``trainer_version``: the Trainer API shape to send (2.2+ uses ``runtimePatches``).
    - ``native_restart``: the runtime's JobSet failurePolicy restarts; declare ``restart``.
    - ``runtime_copy``: run each submission on its own copy of the runtime with
      Kubernetes' retries off and the warning as grace period (``manifest``); off, the
      runtime is used as it is.
    - ``connect_timeout``/``read_timeout``/``retries``: every call is bounded.
    - ``selector_limit``: most job ids discovery puts in one ``in (...)`` selector.
    """

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    namespace: str | None = None
    runtime: str = "torch-distributed"
    runtime_kind: str = "ClusterTrainingRuntime"
    image: str | None = None
    queue: str | None = None
    trainer_version: tuple[int, int] = (2, 2)
    native_restart: bool = False
    runtime_copy: bool = True
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 2
    selector_limit: int = 200
    node_loss_window: timedelta = timedelta(minutes=10)
    pending_windows: dict[str, timedelta] = field(
        default_factory=lambda: {
            "launch-failed": timedelta(minutes=10),
            "preempted": timedelta(hours=1),
        }
    )

    @property
    def timeout(self) -> tuple[float, float]:
        return (self.connect_timeout, self.read_timeout)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KubeflowConfig:
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(PREFIX + name)
            return value if value not in (None, "") else None

        def number(name: str, default: float, *, minimum: float = 0) -> float:
            raw = get(name)
            if raw is None:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise BadInput(f"{PREFIX}{name}={raw!r}: not a number") from None
            if value < minimum:
                raise BadInput(f"{PREFIX}{name}={raw!r}: must be at least {minimum}")
            return value

        def flag(name: str) -> bool:
            raw = (get(name) or "0").lower()
            if raw not in ("0", "1", "true", "false", "yes", "no"):
                raise BadInput(f"{PREFIX}{name}={raw!r}: use 1/0, true/false or yes/no")
            return raw in ("1", "true", "yes")

        version_raw = get("TRAINER_VERSION") or "2.2"
        try:
            major, minor = (int(p) for p in version_raw.split(".")[:2])
        except ValueError:
            raise BadInput(
                f"{PREFIX}TRAINER_VERSION={version_raw!r}: expected MAJOR.MINOR, e.g. 2.2"
            ) from None
        if (major, minor) < (2, 0):
            raise BadInput(
                f"{PREFIX}TRAINER_VERSION={version_raw!r}: TrainJob needs Trainer 2.0 or later"
            )
        kind = get("RUNTIME_KIND") or "ClusterTrainingRuntime"
        if kind not in ("ClusterTrainingRuntime", "TrainingRuntime"):
            raise BadInput(
                f"{PREFIX}RUNTIME_KIND={kind!r}: use ClusterTrainingRuntime or TrainingRuntime"
            )
        kubeconfig = get("KUBECONFIG") or env.get("KUBECONFIG") or None
        in_cluster = flag("IN_CLUSTER") or (
            kubeconfig is None
            and bool(env.get("KUBERNETES_SERVICE_HOST"))
            and not os.path.exists(os.path.expanduser("~/.kube/config"))
        )
        return cls(
            kubeconfig=kubeconfig,
            context=get("CONTEXT"),
            in_cluster=in_cluster,
            namespace=get("NAMESPACE"),
            runtime=get("RUNTIME") or "torch-distributed",
            runtime_kind=kind,
            image=get("IMAGE"),
            queue=get("QUEUE"),
            trainer_version=(major, minor),
            native_restart=flag("NATIVE_RESTART"),
            runtime_copy=(get("RUNTIME_COPY") is None) or flag("RUNTIME_COPY"),
            connect_timeout=number("CONNECT_TIMEOUT", 5.0, minimum=0.1),
            read_timeout=number("READ_TIMEOUT", 30.0, minimum=0.1),
            retries=int(number("RETRIES", 2)),
            selector_limit=int(number("SELECTOR_LIMIT", 200, minimum=1)),
            node_loss_window=timedelta(seconds=number("NODE_LOSS_WINDOW", 600)),
            pending_windows={
                "launch-failed": timedelta(seconds=number("LAUNCH_WINDOW", 600)),
                "preempted": timedelta(seconds=number("REQUEUE_WINDOW", 3600)),
            },
        )
