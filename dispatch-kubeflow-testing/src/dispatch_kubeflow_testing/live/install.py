"""Install what the controllers need on the fresh API server, from the modules' own
manifests (run by ``start-kube.sh``; idempotent: every object is created or replaced).

``base``: the JobSet and Trainer CRDs (waited until Established), the KWOK nodes, the
PriorityClasses the preemption scenario uses and, for a controller that keeps its own
cert rotator on (Trainer v2.0.x), the TLS Secret it adopts (``--tls-secret``).
``webhooks``: the controllers' webhook configurations, rewritten from ``service:`` to
``url: https://127.0.0.1:PORT/...`` with the script's CA bundle (their own cert
management is off, or their rotator adopted the script's CA), then the training runtimes
(which go through the Trainer's validating webhook). ``ready``: exit 0 once the nodes are
Ready and the default ServiceAccount exists (pods are refused before it does).
``kueue`` (with Kueue running): its CRDs' conversion webhook, its webhooks (Kueue's own
objects' and the TrainJob integration's only: a webhook of an integration that is off has
no handler, and the API server would refuse every object it names), then what an
administrator sets up (:func:`kueue_setup`).
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from pathlib import Path

import yaml  # type: ignore[import-untyped]

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from dispatch_kubeflow_testing.live.kubeapi import ApiError, KubeApi, Obj
else:
    from dispatch_kubeflow_testing.live.kubeapi import ApiError, KubeApi, Obj

NODE_PREFIX = "kwok-node-"
MANAGED = ("dispatch.dev/kwok", "managed")
GPUS_PER_NODE = 8
#: the nodes' address (KWOK's --node-ip in start-kube.sh)
NODE_ADDRESS = "127.0.0.1"
PRIORITY_CLASSES = {"dispatch-low": 100, "dispatch-high": 1_000_000}

#: Kueue's queues. Two ClusterQueues in one cohort, each 16 GPUs (two of the four
#: nodes): ``team-a`` may not borrow, so a higher priority there preempts within the
#: ClusterQueue; ``team-b`` may borrow ``team-a``'s unused GPUs, and ``team-a`` reclaims
#: them by preemption (``InCohortReclamation``). CPU and memory are covered generously:
#: only GPUs are scarce.
KUEUE_COHORT = "dispatch"
KUEUE_FLAVOR = "default-flavor"
KUEUE_GPUS = 16
KUEUE_QUEUES = {"team-a": 0, "team-b": None}  # LocalQueue (= ClusterQueue) -> GPU borrowing limit
KUEUE_PRIORITIES = {"low": 100, "high": 10_000}


def kueue_setup(namespace: str = "default") -> list[Obj]:
    """The ResourceFlavor, ClusterQueues, LocalQueues and WorkloadPriorityClasses."""
    group = "kueue.x-k8s.io/v1beta2"
    out: list[Obj] = [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": KUEUE_FLAVOR}}
    ]
    for name, borrowing in KUEUE_QUEUES.items():
        gpu: Obj = {"name": "nvidia.com/gpu", "nominalQuota": KUEUE_GPUS}
        if borrowing is not None:
            gpu["borrowingLimit"] = borrowing
        out.append(
            {
                "apiVersion": group,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "cohortName": KUEUE_COHORT,
                    "namespaceSelector": {},
                    "queueingStrategy": "BestEffortFIFO",
                    "preemption": {
                        "withinClusterQueue": "LowerPriority",
                        "reclaimWithinCohort": "Any",
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": KUEUE_FLAVOR,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": 256},
                                        {"name": "memory", "nominalQuota": "2Ti"},
                                        gpu,
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        out.append(
            {
                "apiVersion": group,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": name},
            }
        )
    for name, value in KUEUE_PRIORITIES.items():
        out.append(
            {
                "apiVersion": group,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": "dispatch live tier",
            }
        )
    return out


def documents(path: Path) -> list[Obj]:
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    out: list[Obj] = []
    for file in files:
        if file.name == "kustomization.yaml":
            continue
        out.extend(d for d in yaml.safe_load_all(file.read_text()) if d)
    return out


def node(index: int) -> Obj:
    name = f"{NODE_PREFIX}{index}"
    resources = {
        "cpu": "32",
        "memory": "256Gi",
        "pods": "110",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                MANAGED[0]: MANAGED[1],
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def install_base(api: KubeApi, crd_dirs: list[Path], nodes: int) -> None:
    names = []
    for directory in crd_dirs:
        for crd in documents(directory):
            api.apply(crd)
            names.append(crd["metadata"]["name"])
            print(f"crd {crd['metadata']['name']}")
    for name in names:
        api.wait(
            f"CRD {name} Established",
            lambda name=name: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (api.get("CustomResourceDefinition", name).get("status") or {}).get(
                    "conditions"
                )
                or []
            ),
        )
    for index in range(nodes):
        try:
            api.create(node(index))
            print(f"node {NODE_PREFIX}{index}")
        except ApiError as exc:
            if exc.status != 409:
                raise
            api.merge_patch(
                "Node", f"{NODE_PREFIX}{index}", {"metadata": {"labels": {MANAGED[0]: MANAGED[1]}}}
            )
    for index in range(nodes):
        # where the API server would reach this node's kubelet (logs, exec): loopback,
        # where nothing answers, also for nodes KWOK addressed otherwise before
        name = f"{NODE_PREFIX}{index}"
        api.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": NODE_ADDRESS},
                        {"type": "Hostname", "address": name},
                    ]
                }
            },
            content_type="application/merge-patch+json",
        )
    for name, value in PRIORITY_CLASSES.items():
        api.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": "dispatch live tier",
            }
        )


def install_tls_secret(api: KubeApi, where: str, files: list[Path]) -> None:
    """The Secret a cert rotator reads (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``):
    given one it finds valid, it keeps it instead of minting its own."""
    namespace, _, name = where.partition("/")
    if not namespace or not name:
        raise SystemExit(f"--tls-secret wants NAMESPACE/NAME, not {where!r}")
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    keys = ("ca.crt", "ca.key", "tls.crt", "tls.key")
    data = {k: base64.b64encode(f.read_bytes()).decode() for k, f in zip(keys, files, strict=True)}
    secret: Obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": data,
    }
    # (Secret is no kind of KubeApi's table: the path is spelt out)
    collection = f"/api/v1/namespaces/{namespace}/secrets"
    try:
        api.request("POST", collection, secret)
    except ApiError as exc:
        if exc.status != 409:
            raise
        api.request("PUT", f"{collection}/{name}", secret)
    print(f"secret {namespace}/{name}")


def rewrite_webhooks(
    doc: Obj, prefix: str, url: str, ca_bundle: str, names: dict[str, str] | None = None
) -> Obj:
    name = (names or {}).get(doc["kind"]) or f"{prefix}-{doc['metadata']['name']}"
    doc = {**doc, "metadata": {"name": name}}
    hooks = []
    for hook in doc.get("webhooks") or []:
        path = hook["clientConfig"]["service"]["path"]
        hooks.append({**hook, "clientConfig": {"url": url + path, "caBundle": ca_bundle}})
    doc["webhooks"] = hooks
    return doc


def install_webhooks(
    api: KubeApi,
    ca: Path,
    hooks: list[tuple[str, Path, str, dict[str, str], Path | None]],
    runtimes: list[Path],
) -> None:
    """``hooks``: (prefix, manifest, url, names, ca): each configuration is named
    ``prefix-<its name>`` unless ``names`` gives its kind a name (one a rotator looks for),
    and trusts ``ca`` if given (a rotator's own CA), else the script's."""
    for prefix, manifest, url, names, own_ca in hooks:
        ca_bundle = base64.b64encode((own_ca or ca).read_bytes()).decode()
        for doc in documents(manifest):
            done = api.apply(rewrite_webhooks(doc, prefix, url, ca_bundle, names))
            print(f"{doc['kind']} {done['metadata']['name']} -> {url}")
    for path in runtimes:
        for doc in documents(path):
            retrying(api, doc)
            print(f"{doc['kind']} {doc['metadata']['name']}")


def kueue_webhook(hook: Obj) -> bool:
    """Kueue's own objects' webhooks and the TrainJob integration's."""
    path = str(hook["clientConfig"]["service"]["path"])
    return "-kueue-x-k8s-io-" in path or path.endswith("-trainjob")


def conversion_patches(crd_dir: Path) -> list[Obj]:
    """The CRD patches Kueue's kustomization applies for its conversion webhook."""
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    out: list[Obj] = []
    for patch in kustomization.get("patches") or []:
        path = crd_dir / patch["path"]
        if path.name.startswith("webhook_in_"):
            out.extend(documents(path))
    return out


def retrying(api: KubeApi, doc: Obj, seconds: float = 30) -> Obj:
    """Apply ``doc``, retrying while a webhook server that is still settling refuses."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return api.apply(doc)
        except ApiError as exc:
            if exc.status < 500 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def install_kueue(api: KubeApi, ca: Path, manifest: Path, url: str, crd_dir: Path) -> None:
    ca_bundle = base64.b64encode(ca.read_bytes()).decode()
    for patch in conversion_patches(crd_dir):
        webhook = patch["spec"]["conversion"]["webhook"]
        path = webhook["clientConfig"]["service"]["path"]
        conversion = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": url + path, "caBundle": ca_bundle},
                "conversionReviewVersions": webhook["conversionReviewVersions"],
            },
        }
        name = patch["metadata"]["name"]
        api.merge_patch("CustomResourceDefinition", name, {"spec": {"conversion": conversion}})
        print(f"crd {name} conversion -> {url}{path}")
    for doc in documents(manifest):
        hooks = [h for h in doc.get("webhooks") or [] if kueue_webhook(h)]
        done = api.apply(rewrite_webhooks({**doc, "webhooks": hooks}, "kueue", url, ca_bundle))
        print(f"{doc['kind']} {done['metadata']['name']} ({len(hooks)} webhooks) -> {url}")
    for obj in kueue_setup():
        retrying(api, obj)
        print(f"{obj['kind']} {obj['metadata']['name']}")


def ready(api: KubeApi, nodes: int) -> bool:
    ok = [
        n
        for n in api.list("Node")
        if n["metadata"]["name"].startswith(NODE_PREFIX)
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n["status"].get("conditions", [])
        )
    ]
    if len(ok) < nodes:
        return False
    api.get("ServiceAccount", "default", "default")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install.py")
    parser.add_argument("--kubeconfig", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    base = sub.add_parser("base")
    base.add_argument("--crds", nargs="+", type=Path, required=True)
    base.add_argument("--nodes", type=int, default=4)
    base.add_argument("--namespaces", nargs="*", default=[], help="namespaces to create")
    base.add_argument(
        "--tls-secret",
        nargs=5,
        metavar=("NAMESPACE/NAME", "CA_CRT", "CA_KEY", "TLS_CRT", "TLS_KEY"),
    )
    hooks = sub.add_parser("webhooks")
    hooks.add_argument("--ca", type=Path, required=True)
    hooks.add_argument("--jobset", nargs=2, metavar=("MANIFEST", "URL"), required=True)
    hooks.add_argument("--trainer", nargs=2, metavar=("MANIFEST", "URL"), required=True)
    hooks.add_argument("--runtimes", nargs="+", type=Path, default=[])
    hooks.add_argument(
        "--trainer-validating-name", help="the Trainer's ValidatingWebhookConfiguration's name"
    )
    hooks.add_argument("--trainer-ca", type=Path, help="the CA the Trainer's webhook serves from")
    queues = sub.add_parser("kueue")
    queues.add_argument("--ca", type=Path, required=True)
    queues.add_argument("--webhooks", nargs=2, metavar=("MANIFEST", "URL"), required=True)
    queues.add_argument("--crd-dir", type=Path, required=True, help="config/components/crd")
    check = sub.add_parser("ready")
    check.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args(argv)
    api = KubeApi.from_kubeconfig(args.kubeconfig)
    if args.command == "base":
        for namespace in args.namespaces:
            api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        install_base(api, args.crds, args.nodes)
        if args.tls_secret:
            install_tls_secret(api, args.tls_secret[0], [Path(f) for f in args.tls_secret[1:]])
    elif args.command == "webhooks":
        install_webhooks(
            api,
            args.ca,
            [
                ("jobset", Path(args.jobset[0]), args.jobset[1], {}, None),
                (
                    "kubeflow-trainer",
                    Path(args.trainer[0]),
                    args.trainer[1],
                    {"ValidatingWebhookConfiguration": args.trainer_validating_name}
                    if args.trainer_validating_name
                    else {},
                    args.trainer_ca,
                ),
            ],
            args.runtimes,
        )
    elif args.command == "kueue":
        install_kueue(api, args.ca, Path(args.webhooks[0]), args.webhooks[1], args.crd_dir)
    else:
        try:
            return 0 if ready(api, args.nodes) else 1
        except (ApiError, OSError):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
