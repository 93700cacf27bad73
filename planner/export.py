"""A plan as something a deployment pipeline applies (`capplan plan FILE --emit ...`): the exact
`vllm serve` command lines, or Kubernetes manifests for the vLLM servers. Both take the flags
from the plan's `vllm_args` untouched, so what runs is the operating point the plan modelled.

    from planner import api, export
    report = api.plan(request)
    print(export.vllm_commands(report))        # one `vllm serve` line per deployment
    print(export.k8s_yaml(report))             # Deployment + Service per deployment (+ HTTPRoute)
    print(export.emit(report, "bench"))        # `vllm bench serve` per deployment (planner/export_bench.py)

The manifests pin vLLM's image (VLLM_IMAGE), ask `nvidia.com/gpu` = tensor_parallel_size per pod
(NVIDIA's device plugin), place pods on the catalog GPU through GPU Feature Discovery's
`nvidia.com/gpu.product` label, probe vLLM's `/health`, mount a memory-backed /dev/shm (NCCL
between tensor-parallel workers), and carry the plan's metrics to watch as annotations.

A plan whose traffic is served by several parts at once (mixed GPU types: colocated
configurations side by side, or beside prefill/decode pools) assumes a router that sends each
part a share in proportion to the capacity it provides (planner/plan/peak.py `shares`; what
`--verify` simulates). Separate Services behind no router, or one Service over every pod, split
evenly instead and overload the slower parts, so those plans also get a Gateway API HTTPRoute
whose backendRefs carry those shares as integer weights (`route_weights`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import yaml

from planner.errors import InvalidInput
from planner.export_bench import bench_commands, deployments_of
from planner.export_multinode import LWS_ROLE_LABEL, leader_worker_set, ray_launch, replica_nodes
from planner.export_route import (
    GATEWAY_API_VERSION,
    GATEWAY_NAME,
    PD_PROXY_COMPONENT,
    ROUTE_WEIGHT_TOTAL,
    Backend,
    backends_of,
    httproute,
    proxy_service,
    route_rule,
    route_weights,
)
from planner.vllm_defaults import VLLM_RELEASE

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanDeployment, PlanReport

__all__ = [
    "GATEWAY_API_VERSION",
    "GATEWAY_NAME",
    "GPU_PRODUCT_LABELS",
    "ROUTE_WEIGHT_TOTAL",
    "VLLM_IMAGE",
    "VLLM_PORT",
    "Emit",
    "deployments_of",
    "emit",
    "k8s_manifests",
    "k8s_yaml",
    "route_backends",
    "route_weights",
    "vllm_commands",
]

Emit = Literal["vllm-args", "k8s", "bench"]

# The vLLM release the shipped calibrated profiles were measured on (docs/calibration.md: vLLM
# 0.11.0), which serves every flag a plan emits and the metrics annotated below
# (`vllm:inter_token_latency_seconds` is new in 0.11). Docker Hub: vllm/vllm-openai:v0.11.0.
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_RELEASE}"
VLLM_PORT = 8000  # `vllm serve`'s default --port
# NixlConnector's handshake port (VLLM_NIXL_SIDE_CHANNEL_PORT, default 5600): vLLM's
# docs/features/nixl_connector_usage.md, "Environment Variables".
NIXL_SIDE_CHANNEL_PORT = 5600
SHM_SIZE_LIMIT = "2Gi"
DISAGGREGATED_NOTE = (
    "# prefill/decode pools: --kv-transfer-config is NixlConnector's, kv_role kv_producer on prefill and\n"
    "# kv_consumer on decode pods, as vLLM's NixlConnector usage guide (docs/features/nixl_connector_usage.md)\n"
    "# names them; the decode TP is a multiple of the prefill TP, as NixlConnector requires. NixlConnector\n"
    "# does not act on the role: a proxy in front (its toy_proxy_server.py, or a P/D router) picks the\n"
    "# prefill pod, then the decode pod, which pulls the KV cache over NIXL (VLLM_NIXL_SIDE_CHANNEL_HOST/PORT\n"
    "# set below). The image needs NIXL: vLLM's Dockerfile installs it with --build-arg\n"
    "# INSTALL_KV_CONNECTORS=true.\n"
)

# `nvidia.com/gpu.product` as NVIDIA GPU Feature Discovery sets it: the name nvidia-smi reports,
# spaces replaced by dashes (a MIG or shared GPU gets a suffix and is not matched). Values as
# found on clusters running these GPUs; a cluster that labels differently needs its own value.
GPU_PRODUCT_LABELS: Mapping[str, tuple[str, ...]] = {
    "a100-80gb-sxm": ("NVIDIA-A100-SXM4-80GB",),
    "b200": ("NVIDIA-B200",),
    "h100-pcie": ("NVIDIA-H100-PCIe",),
    "h100-sxm": ("NVIDIA-H100-80GB-HBM3",),
    "h200-sxm": ("NVIDIA-H200",),
    "l40s": ("NVIDIA-L40S",),
}
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
ANNOTATION_PREFIX = "capplan/"
MAX_NAME = 63  # a Service name is a DNS-1035 label


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _replicas_text(reps: list[int]) -> str:
    lo, hi = min(reps), max(reps)
    return str(hi) if lo == hi else f"{lo}-{hi} over {len(reps)} buckets"


def vllm_command(model: str, dep: PlanDeployment) -> list[str]:
    """`vllm serve MODEL` and the plan's flags, exactly."""
    return ["vllm", "serve", model, *dep.vllm_args]


def vllm_commands(report: PlanReport) -> str:
    """One shell line per deployment (shlex-quoted), each after a comment naming its role, GPU
    and replicas at the peak (and, for a replica beyond one node, the Ray launch: `ray_launch`)."""
    lines = []
    for dep in deployments_of(report):
        pp = dep.pipeline_parallel_size or 1
        lines.append(
            f"# {dep.role}: {_plural(dep.replicas_peak, 'replica')} at the peak on {dep.gpu} x TP"
            f"{dep.tensor_parallel_size}{f' x PP{pp}' if pp > 1 else ''} (replicas by bucket: "
            f"{_replicas_text(dep.replicas_by_bucket)})"
        )
        lines += ray_launch(dep)
        lines.append(shlex.join(vllm_command(report.served_model or report.model, dep)))
    return "\n".join(lines) + "\n"


# --- Kubernetes ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _names(report: PlanReport) -> list[str]:
    """`vllm-<model>-<role>-<gpu>-tp<n>` (`-pp<n>` with PP), a DNS-1035 label (63 chars; the model part shortened
    first), with the configuration appended where two deployments would share a name."""
    deps = report.deployments
    model = _slug(report.model.rsplit("/", 1)[-1]) or "model"
    tails = [
        f"{d.role}-{_slug(d.gpu)}-tp{d.tensor_parallel_size}"
        + (f"-pp{d.pipeline_parallel_size}" if (d.pipeline_parallel_size or 1) > 1 else "")
        for d in deps
    ]
    if len(set(tails)) < len(tails):
        tails = [
            f"{t}-b{d.max_num_batched_tokens}-s{d.max_num_seqs}" for t, d in zip(tails, deps, strict=True)
        ]
    out = []
    for tail in tails:
        room = MAX_NAME - len("vllm--") - len(tail)
        head = model[: max(room, 0)].strip("-")
        name = f"vllm-{head}-{tail}" if head else f"vllm-{tail}"
        out.append(name[:MAX_NAME].rstrip("-"))
    return out


def _gpu_products(gpu: str) -> list[str]:
    from planner.catalog.gpus import get_gpu

    spec = get_gpu(gpu, "deployments.gpu")
    if spec.vendor != "nvidia" or gpu not in GPU_PRODUCT_LABELS:
        raise InvalidInput(
            "--emit",
            f"k8s manifests request {GPU_RESOURCE} (NVIDIA's device plugin); {gpu} ({spec.display_name}) "
            "has no such resource: use --emit vllm-args",
        )
    return list(GPU_PRODUCT_LABELS[gpu])


def _num(x: float) -> float:
    """Six significant digits: annotations are read by people and alert rules, not recomputed."""
    return float(f"{x:.6g}")


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _p99_alert(metric: str, name: str, slo_s: float) -> str:
    """PromQL: the pods' p99 over 5 minutes above the target. The `pod` label is the one a
    PodMonitor (or the usual kubernetes_sd relabelling) attaches."""
    return (
        f'histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{{pod=~"{name}-.*"}}[5m]))) > {slo_s:g}'
    )


def _annotations(report: PlanReport, dep: PlanDeployment, name: str) -> dict[str, str]:
    """What the plan expects of this deployment at its peak, next to the vLLM metric that shows it
    (docs/report.md lists them): TTFT/ITL histograms with the SLO and the predicted p50/p99,
    KV-cache use, running and waiting requests."""
    slo, at = report.slo, dep.at_peak
    plan = {
        "model": report.model,
        "role": dep.role,
        "gpu": dep.gpu,
        "tensor_parallel_size": dep.tensor_parallel_size,
        **(
            {}
            if dep.pipeline_parallel_size is None
            else {"pipeline_parallel_size": dep.pipeline_parallel_size}
        ),
        "replicas_peak": dep.replicas_peak,
        "replicas_by_bucket": dep.replicas_by_bucket,
        "requests_per_s_per_replica_capacity": _num(dep.requests_per_s_per_replica),
        "binding_limit": dep.binding_limit,
        "usd_per_gpu_hour": _num(dep.usd_per_gpu_hour),
        "plan_status": report.status,
    }
    out = {ANNOTATION_PREFIX + "plan": _json(plan)}
    watch: dict[str, dict[str, Any]] = {}
    hist = (
        ("ttft", "vllm:time_to_first_token_seconds", slo.ttft_p99_ms, "decode"),
        ("itl", "vllm:inter_token_latency_seconds", slo.itl_p99_ms, "prefill"),
    )
    for key, metric, target_ms, skip_role in hist:
        if dep.role == skip_role:
            continue  # a prefill pool emits no ITL; a decode pool's TTFT is not the user's
        p50 = None if at is None else getattr(at, f"{key}_p50_ms")
        p99 = None if at is None else getattr(at, f"{key}_p99_ms")
        entry: dict[str, Any] = {"metric": metric, "type": "histogram"}
        if target_ms is not None:
            entry["slo_p99_s"] = _num(target_ms / 1e3)
            entry["alert_promql"] = _p99_alert(metric, name, entry["slo_p99_s"])
        if p50 is not None:
            entry["predicted_p50_s"] = _num(p50 / 1e3)
        if p99 is not None:
            entry["predicted_p99_s"] = _num(p99 / 1e3)
        watch[key] = entry
    kv: dict[str, Any] = {"metric": "vllm:kv_cache_usage_perc", "type": "gauge", "unit": "fraction"}
    if at is not None and at.kv_cache_usage is not None:
        kv["predicted_at_peak"] = _num(at.kv_cache_usage)
    if at is not None and at.preemption_risk is not None:
        kv["predicted_preemption_risk"] = _num(at.preemption_risk)
    watch["kv-cache-usage"] = kv
    running: dict[str, Any] = {
        "metric": "vllm:num_requests_running",
        "type": "gauge",
        "max_num_seqs": dep.max_num_seqs,
    }
    if at is not None and at.running_requests is not None:
        running["predicted_at_peak"] = _num(at.running_requests)
    watch["num-requests-running"] = running
    waiting: dict[str, Any] = {
        "metric": "vllm:num_requests_waiting",
        "type": "gauge",
        "meaning": "a queue that stays above zero means more than the planned load per replica",
        "requests_per_s_per_replica_capacity": _num(dep.requests_per_s_per_replica),
    }
    if at is not None:
        waiting["requests_per_s_per_replica_at_peak"] = _num(at.requests_per_s_per_replica)
    watch["num-requests-waiting"] = waiting
    for key, entry in watch.items():
        out[f"{ANNOTATION_PREFIX}watch.{key}"] = _json(entry)
    return out


def _container(report: PlanReport, dep: PlanDeployment, image: str) -> dict[str, Any]:
    gpus = dep.tensor_parallel_size
    health = {"path": "/health", "port": "http"}
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}]
    env: list[dict[str, Any]] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
        }
    ]
    if dep.role != "colocated":
        # NixlConnector: the decode pod reads the prompt's KV blocks from the prefill pod that
        # computed them, after a handshake on this host and port (vLLM's NixlConnector usage guide).
        ports.append({"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"})
        env += [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
        ]
    return {
        "name": "vllm",
        "image": image,
        "command": ["vllm", "serve", report.served_model or report.model],
        "args": list(dep.vllm_args),
        "ports": ports,
        "env": env,
        "resources": {"limits": {GPU_RESOURCE: gpus}, "requests": {GPU_RESOURCE: gpus}},
        # Loading (and downloading) weights takes minutes: the startup probe holds the others off.
        "startupProbe": {"httpGet": health, "periodSeconds": 10, "failureThreshold": 180},
        "readinessProbe": {"httpGet": health, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": health, "periodSeconds": 15, "failureThreshold": 4},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _deployment(
    report: PlanReport, dep: PlanDeployment, name: str, image: str, labels: dict[str, str]
) -> dict[str, Any]:
    products = _gpu_products(dep.gpu)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": GPU_PRODUCT_LABEL, "operator": "In", "values": products}]}
                ]
            }
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "annotations": _annotations(report, dep, name)},
        "spec": {
            "replicas": dep.replicas_peak,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            # A new pod comes up before an old one goes: the planned capacity holds during a
            # rollout (it needs one replica's GPUs spare).
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(VLLM_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "affinity": affinity,
                    "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [_container(report, dep, image)],
                    # NCCL between tensor-parallel workers uses shared memory; a container's
                    # default /dev/shm is 64 MiB.
                    "volumes": [
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE_LIMIT}}
                    ],
                },
            },
        },
    }


def _service(name: str, labels: dict[str, str], leaders_only: bool = False) -> dict[str, Any]:
    selector = {"app.kubernetes.io/instance": name}
    if leaders_only:  # a LeaderWorkerSet: only the leader pods serve HTTP
        selector[LWS_ROLE_LABEL] = "leader"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def k8s_manifests(
    report: PlanReport, *, image: str = VLLM_IMAGE, gateway: str = GATEWAY_NAME
) -> list[dict[str, Any]]:
    """A Deployment and a Service per plan deployment, in the plan's order (a replica beyond one
    node: a LeaderWorkerSet and a Service over its leaders, planner/export_multinode.py). Disaggregated plans
    get prefill and decode Deployments whose flags carry the plan's `--kv-transfer-config`; the
    proxy that sends each request to a prefill and then a decode pod is not part of them. A plan
    of several parts (`route_backends`) ends with the HTTPRoute that splits the traffic by their
    capacity, attached to the Gateway `gateway` (and, beside prefill/decode pools, the Service
    its share goes to: the pools' proxy)."""
    deps = deployments_of(report)
    model = _slug(report.model.rsplit("/", 1)[-1])[:MAX_NAME].strip("-") or "model"
    docs: list[dict[str, Any]] = []
    for dep, name in zip(deps, _names(report), strict=True):
        labels = {
            "app.kubernetes.io/name": "vllm",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": dep.role,
            "app.kubernetes.io/part-of": model,
            "app.kubernetes.io/managed-by": "capplan",
        }
        if replica_nodes(dep) > 1:  # a replica beyond one node (docs/multi-node.md)
            deployment = _deployment(report, dep, name, image, labels)
            docs += [leader_worker_set(deployment, dep), _service(name, labels, True)]
        else:
            docs += [_deployment(report, dep, name, image, labels), _service(name, labels)]
    return docs + _route_documents(report, gateway, model)


# --- the router a plan of several parts assumes (planner/export_route.py) -------------------------


def _proxy_name(report: PlanReport) -> str:
    model = _slug(report.model.rsplit("/", 1)[-1]) or "model"
    tail = f"-{PD_PROXY_COMPONENT}"
    return f"vllm-{model[: MAX_NAME - len('vllm-') - len(tail)].strip('-')}{tail}"


def route_backends(report: PlanReport) -> list[Backend]:
    """The parts that share the plan's traffic and the Services they sit behind."""
    return backends_of(deployments_of(report), _names(report), _proxy_name(report))


def _route_documents(report: PlanReport, gateway: str, model: str) -> list[dict[str, Any]]:
    """Nothing for a plan of one part; else the pools' proxy Service (if the plan has pools)
    and the HTTPRoute."""
    backends = route_backends(report)
    if len(backends) < 2:
        return []
    docs = []
    if any(d.role != "colocated" for d in report.deployments):
        docs.append(proxy_service(_proxy_name(report), model, VLLM_PORT))
    labels = {
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/part-of": model,
        "app.kubernetes.io/managed-by": "capplan",
    }
    name = f"vllm-{model}"[:MAX_NAME].rstrip("-")
    annotations = {ANNOTATION_PREFIX + "route": _json(route_rule(backends))}
    return [*docs, httproute(backends, name, gateway, VLLM_PORT, labels, annotations)]


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no `&id001` anchors for the labels and probes the documents repeat."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def k8s_yaml(report: PlanReport, *, image: str = VLLM_IMAGE, gateway: str = GATEWAY_NAME) -> str:
    """The manifests as one multi-document YAML stream (`kubectl apply -f -`)."""
    header = (
        f"# capplan plan for {report.model}: {report.status}, {_plural(report.gpu_count_peak, 'GPU')} at the peak"
        + ("" if report.usd_per_month is None else f", ${report.usd_per_month:,.0f}/month")
        + f"\n# image {image}; container args exactly the plan's vllm_args (docs/report.md)\n"
    )
    if any(d.role != "colocated" for d in report.deployments):
        header += DISAGGREGATED_NOTE
    if len(route_backends(report)) > 1:
        header += (
            f"# several parts share the traffic: the HTTPRoute (Gateway API) sends each its share of the plan\n"
            f"# by weight; it attaches to the Gateway {gateway!r} (parentRefs), which a Gateway API\n"
            "# implementation must serve. An even split (no router, or one Service over every pod) overloads\n"
            "# the slower parts.\n"
        )
    docs = k8s_manifests(report, image=image, gateway=gateway)
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=2**16) for d in docs)
    return header + "---\n" + body


def emit(report: PlanReport, kind: Emit) -> str:
    if kind == "vllm-args":
        return vllm_commands(report)
    if kind == "bench":
        return bench_commands(report)
    return k8s_yaml(report)
