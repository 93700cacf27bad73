"""The router a plan of several parts assumes, as `--emit k8s` writes it (planner/export.py).

A plan whose traffic several parts serve at once (mixed GPU types: colocated configurations
side by side, or beside prefill/decode pools) sizes each part for a share of the traffic in
proportion to the capacity it provides (planner/plan/peak.py `shares`; what `--verify`
simulates). Separate Services behind no router, or one Service over every pod, split evenly
instead and overload the slower parts, so those plans also get a Gateway API HTTPRoute whose
backendRefs carry the shares as integer weights (`route_weights`), and, beside prefill/decode
pools, the Service their share goes to (the pools' proxy, which the operator runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.errors import Infeasible

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanDeployment

__all__ = [
    "GATEWAY_API_VERSION",
    "GATEWAY_NAME",
    "ROUTE_WEIGHT_TOTAL",
    "Backend",
    "backends_of",
    "httproute",
    "proxy_service",
    "route_rule",
    "route_weights",
]

# Gateway API (gateway.networking.k8s.io/v1, GA since Gateway API v1.0): the HTTPRoute of a plan
# served by several parts attaches to this Gateway (`k8s_manifests(report, gateway=...)`).
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
GATEWAY_NAME = "vllm-gateway"
# Route weights are parts of this total (an HTTPRoute weight may be 0 .. 1,000,000): each part's
# share is off the plan's by less than one part in 10,000 of the whole traffic.
ROUTE_WEIGHT_TOTAL = 10_000
PD_PROXY_COMPONENT = "pd-proxy"


@dataclass(frozen=True)
class Backend:
    """One part of the plan behind the route: a colocated deployment's Service, or the
    prefill/decode pools' proxy Service. `requests_per_s` is the capacity within the SLOs it
    provides with the manifests' replicas (each Deployment's `replicas_peak`)."""

    service: str
    deployments: tuple[str, ...]
    requests_per_s: float


def _part_capacity(deps: Sequence[PlanDeployment], replicas: Sequence[int]) -> float:
    """What a part serves: colocated replicas add up; prefill/decode pools the smaller pool (as
    the plan's `shares`)."""
    cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
    for d, n in zip(deps, replicas, strict=True):
        cap[d.role] += d.requests_per_s_per_replica * n
    return cap["colocated"] + min(cap["prefill"], cap["decode"])


def backends_of(deployments: Sequence[PlanDeployment], services: Sequence[str], proxy: str) -> list[Backend]:
    """The parts that share the plan's traffic, in the plan's order: each colocated deployment
    behind its Service (`services`, one per deployment), then the prefill/decode pools, if
    any, behind their proxy's Service `proxy`."""
    out = [
        Backend(name, (d.id,), _part_capacity([d], [d.replicas_peak]))
        for d, name in zip(deployments, services, strict=True)
        if d.role == "colocated"
    ]
    pools = [d for d in deployments if d.role != "colocated"]
    if pools:
        cap = _part_capacity(pools, [d.replicas_peak for d in pools])
        out.append(Backend(proxy, tuple(d.id for d in pools), cap))
    return out


def route_weights(requests_per_s: Sequence[float], total: int = ROUTE_WEIGHT_TOTAL) -> list[int]:
    """Integer weights in proportion to each part's capacity, summing to `total`: each part's
    exact share x total rounded down, the parts left over given one more each in order of the
    largest remainder (ties: the earlier part). So each weight / total is off the exact share by
    less than 1 / total."""
    whole = math.fsum(requests_per_s)
    if not whole > 0:
        raise Infeasible("the plan's parts have no capacity to route to")
    exact = [total * r / whole for r in requests_per_s]
    out = [math.floor(x) for x in exact]
    left = total - sum(out)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:left]:
        out[i] += 1
    return out


def route_rule(backends: Sequence[Backend]) -> dict[str, Any]:
    """What the route's weights are, for the `capplan/route` annotation (and for a scaler that
    moves the replicas by bucket)."""
    return {
        "rule": "weight = the part's share of the capacity, capacity = requests_per_s_per_replica_capacity "
        "x replicas (prefill/decode pools: the smaller pool), in parts of "
        f"{ROUTE_WEIGHT_TOTAL}; a scaler that follows replicas_by_bucket sets the weights the same way",
        "backends": [
            {
                "service": b.service,
                "deployments": list(b.deployments),
                "requests_per_s": float(f"{b.requests_per_s:.6g}"),
            }
            for b in backends
        ],
    }


def httproute(
    backends: Sequence[Backend],
    name: str,
    gateway: str,
    port: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The HTTPRoute: every path to the backends' Services on `port`, weighted by capacity,
    attached to the Gateway `gateway`."""
    weights = route_weights([b.requests_per_s for b in backends])
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations)},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"group": "", "kind": "Service", "name": b.service, "port": port, "weight": w}
                        for b, w in zip(backends, weights, strict=True)
                    ],
                }
            ],
        },
    }


def proxy_service(name: str, part_of: str, port: int) -> dict[str, Any]:
    """The Service the route sends the prefill/decode pools' share to: it selects the pods of
    the P/D proxy the operator runs (labelled `app.kubernetes.io/component: pd-proxy`); the proxy
    itself is not emitted (docs/report.md)."""
    labels = {"app.kubernetes.io/component": PD_PROXY_COMPONENT, "app.kubernetes.io/part-of": part_of}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {**labels, "app.kubernetes.io/managed-by": "capplan"}},
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
