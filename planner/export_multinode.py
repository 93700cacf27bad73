"""A plan's replicas beyond one node as vLLM launches them (docs/multi-node.md): the Ray
cluster per replica that `--emit vllm-args` describes, and the LeaderWorkerSet that `--emit k8s`
makes of the Deployment it would write for one node (planner/export.py)."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanDeployment

RAY_PORT = 6379  # `ray start --head`'s default GCS port, as vLLM's multi-node examples use it
LWS_ROLE_LABEL = "capplan/lws-role"  # leader | worker pods of a multi-node replica's group


def replica_nodes(dep: PlanDeployment) -> int:
    """Nodes one replica of `dep` spans (TP x PP GPUs over the GPU's node size)."""
    from planner.catalog.gpus import get_gpu
    from planner.costmodel.multinode import nodes

    return nodes(
        get_gpu(dep.gpu, "deployments.gpu"), dep.tensor_parallel_size, dep.pipeline_parallel_size or 1
    )


def ray_launch(dep: PlanDeployment) -> list[str]:
    """The multi-node launch vLLM documents for a replica beyond one node (docs/serving/
    parallelism_scaling.md, "Running vLLM on multiple nodes"; examples/online_serving/
    multi-node-serving.sh): a Ray head on one node, the others joining it, then `vllm serve` on
    the head. As comments: each line runs on a different machine. Empty for one node."""
    n = replica_nodes(dep)
    if n == 1:
        return []
    return [
        f"# each replica spans {n} nodes ({dep.tensor_parallel_size * (dep.pipeline_parallel_size or 1)} GPUs): "
        "a Ray cluster per replica, vLLM's multi-node launch",
        f"#   on the head node:            ray start --head --port={RAY_PORT}",
        f"#   on {'the other node' if n == 2 else f'each of the other {n - 1} nodes'}: "
        f"ray start --address=<head-node-ip>:{RAY_PORT}",
        "#   then on the head node (after `ray status` shows every node):",
    ]


def leader_worker_set(deployment: dict[str, Any], dep: PlanDeployment) -> dict[str, Any]:
    """A replica beyond one node as the LeaderWorkerSet vLLM documents for multi-node serving
    (docs/deployment/frameworks/lws.md), from the single-node `deployment` manifest export.py
    writes for it: per replica a group of `nodes` pods of one node's GPUs each; the leader starts
    the Ray head, then `vllm serve` with the plan's flags (vLLM waits for the Ray placement group
    of every GPU), the workers join the head at the address LWS gives them (LWS_LEADER_ADDRESS)."""
    n = replica_nodes(dep)
    per_pod = dep.tensor_parallel_size * (dep.pipeline_parallel_size or 1) // n
    template, meta = deployment["spec"]["template"], deployment["metadata"]
    labels = meta["labels"]
    leader_spec = json.loads(json.dumps(template["spec"]))  # a deep copy of plain data
    leader = leader_spec["containers"][0]
    limits = {resource: per_pod for resource in leader["resources"]["limits"]}  # one node's GPUs a pod
    serve = shlex.join([*leader.pop("command"), *leader.pop("args")])
    leader["command"] = ["sh", "-c", f"ray start --head --port={RAY_PORT} && exec {serve}"]
    leader["ports"].append({"name": "ray", "containerPort": RAY_PORT, "protocol": "TCP"})
    leader["resources"] = {"limits": limits, "requests": limits}
    worker_spec = json.loads(json.dumps(template["spec"]))
    worker = worker_spec["containers"][0]
    for key in ("command", "args", "ports", "startupProbe", "readinessProbe", "livenessProbe"):
        worker.pop(key)
    worker["command"] = ["sh", "-c", f"ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"]
    worker["resources"] = {"limits": limits, "requests": limits}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {
            "replicas": dep.replicas_peak,
            # as the Deployment: a new group comes up before an old one goes
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "leaderWorkerTemplate": {
                "size": n,
                "restartPolicy": "RecreateGroupOnPodRestart",  # a lost node restarts its replica
                "leaderTemplate": {
                    "metadata": {**template["metadata"], "labels": {**labels, LWS_ROLE_LABEL: "leader"}},
                    "spec": leader_spec,
                },
                "workerTemplate": {
                    "metadata": {"labels": {**labels, LWS_ROLE_LABEL: "worker"}},
                    "spec": worker_spec,
                },
            },
        },
    }
