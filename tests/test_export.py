"""`capplan plan --emit`: the `vllm serve` lines and the Kubernetes manifests are the plan they
came from (flags, replicas, GPUs, the predicted p99s and SLOs), and every manifest validates
against the Kubernetes schemas (kubernetes-validate, strict: no unknown fields)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from planner import api
from planner.errors import Infeasible, InvalidInput
from planner.export import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    VLLM_IMAGE,
    VLLM_PORT,
    k8s_manifests,
    k8s_yaml,
    vllm_commands,
)
from planner.schema.plan_report import PlanReport
from tests.cli_helpers import run_cli
from tests.plan_helpers import chat_request

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
K8S_VERSION = "1.31.0"  # as tests/test_deploy.py: the oldest minor in upstream support


@pytest.fixture(scope="module")
def colocated() -> PlanReport:
    return api.plan(chat_request(), base_dir=EXAMPLES, workers=1)


@pytest.fixture(scope="module")
def disaggregated() -> PlanReport:
    req = chat_request(gpus=["h100-sxm"], tensor_parallel_sizes=[1, 2], disaggregation="always")
    report = api.plan(req, base_dir=EXAMPLES, workers=1)
    assert {d.role for d in report.deployments} == {"prefill", "decode"}
    return report


@pytest.fixture(scope="module")
def week() -> PlanReport:
    return api.plan(
        yaml.safe_load((EXAMPLES / "week-forecast.yaml").read_text()), base_dir=EXAMPLES, workers=1
    )


def _split(text: str) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    return [x for x in lines if x.startswith("#")], [x for x in lines if x and not x.startswith("#")]


@pytest.mark.parametrize("which", ["colocated", "disaggregated", "week"])
def test_vllm_args_are_the_plans_flags_exactly(which: str, request: pytest.FixtureRequest) -> None:
    report: PlanReport = request.getfixturevalue(which)
    comments, commands = _split(vllm_commands(report))
    assert len(commands) == len(comments) == len(report.deployments)
    for dep, comment, line in zip(report.deployments, comments, commands, strict=True):
        argv = shlex.split(line)
        assert argv[:3] == ["vllm", "serve", report.model]
        assert argv[3:] == dep.vllm_args
        assert line == dep.vllm_command
        assert dep.role in comment
        assert f"{dep.replicas_peak} replica" in comment


def _docs(report: PlanReport) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(k8s_yaml(report)))
    assert docs == k8s_manifests(report)  # the YAML stream is the manifests, nothing lost
    return docs


@pytest.mark.parametrize("which", ["colocated", "disaggregated", "week"])
def test_every_manifest_validates_strictly(which: str, request: pytest.FixtureRequest) -> None:
    for doc in _docs(request.getfixturevalue(which)):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _pairs(report: PlanReport) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    docs = _docs(report)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    services = [d for d in docs if d["kind"] == "Service"]
    assert len(deployments) == len(services) == len(report.deployments)
    return list(zip(report.deployments, deployments, services, strict=True))


@pytest.mark.parametrize("which", ["colocated", "disaggregated", "week"])
def test_manifests_match_the_plan(which: str, request: pytest.FixtureRequest) -> None:
    report: PlanReport = request.getfixturevalue(which)
    names = set()
    for dep, dm, svc in _pairs(report):
        spec = dm["spec"]
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert spec["replicas"] == dep.replicas_peak
        assert container["image"] == VLLM_IMAGE and ":" in VLLM_IMAGE and not VLLM_IMAGE.endswith(":latest")
        assert container["command"] == ["vllm", "serve", report.model]
        assert container["args"] == dep.vllm_args
        assert container["resources"]["limits"][GPU_RESOURCE] == dep.tensor_parallel_size
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        (expr,) = term["matchExpressions"]
        assert expr["key"] == GPU_PRODUCT_LABEL and expr["operator"] == "In"
        assert expr["values"] and all(v.startswith("NVIDIA-") for v in expr["values"])
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        assert {"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"} in container["ports"]
        (shm,) = pod["volumes"]
        assert shm["emptyDir"]["medium"] == "Memory"
        assert {"name": shm["name"], "mountPath": "/dev/shm"} in container["volumeMounts"]
        # The Service reaches exactly these pods.
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        assert svc["spec"]["selector"].items() <= labels.items()
        assert svc["spec"]["ports"][0]["port"] == VLLM_PORT
        assert len(dm["metadata"]["name"]) <= 63
        names.add(dm["metadata"]["name"])
    assert len(names) == len(report.deployments)


def _watch(dm: dict[str, Any], key: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(dm["metadata"]["annotations"][f"capplan/watch.{key}"])
    return value


@pytest.mark.parametrize("which", ["colocated", "disaggregated"])
def test_annotations_carry_the_slo_and_the_predictions(which: str, request: pytest.FixtureRequest) -> None:
    report: PlanReport = request.getfixturevalue(which)
    for dep, dm, _ in _pairs(report):
        at = dep.at_peak
        assert at is not None
        plan = json.loads(dm["metadata"]["annotations"]["capplan/plan"])
        assert plan["replicas_by_bucket"] == dep.replicas_by_bucket
        assert plan["replicas_peak"] == dep.replicas_peak
        for key, metric, target in (
            ("ttft", "vllm:time_to_first_token_seconds", report.slo.ttft_p99_ms),
            ("itl", "vllm:inter_token_latency_seconds", report.slo.itl_p99_ms),
        ):
            p99 = getattr(at, f"{key}_p99_ms")
            if p99 is None:
                continue
            assert target is not None  # chat.yaml sets both targets
            w = _watch(dm, key)
            assert w["metric"] == metric and w["type"] == "histogram"
            assert w["slo_p99_s"] == pytest.approx(target / 1e3, rel=1e-6)
            assert w["predicted_p99_s"] == pytest.approx(p99 / 1e3, rel=1e-5)
            assert f"{metric}_bucket" in w["alert_promql"] and w["alert_promql"].endswith(
                f"> {target / 1e3:g}"
            )
        kv = _watch(dm, "kv-cache-usage")
        assert kv["metric"] == "vllm:kv_cache_usage_perc"
        assert kv["predicted_at_peak"] == pytest.approx(at.kv_cache_usage, rel=1e-5)
        assert _watch(dm, "num-requests-waiting")["metric"] == "vllm:num_requests_waiting"
        assert _watch(dm, "num-requests-running")["max_num_seqs"] == dep.max_num_seqs


def test_colocated_plan_watches_both_histograms(colocated: PlanReport) -> None:
    ((_, dm, _),) = _pairs(colocated)
    assert {"ttft", "itl"} <= {k.split(".", 1)[1] for k in dm["metadata"]["annotations"] if "watch." in k}


def test_disaggregated_pools_carry_the_kv_connector(disaggregated: PlanReport) -> None:
    roles = {}
    for dep, dm, _ in _pairs(disaggregated):
        (container,) = dm["spec"]["template"]["spec"]["containers"]
        args = container["args"]
        config = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert config["kv_connector"] == "NixlConnector"
        # vLLM's NixlConnector guide ("Multi-Instance Setup"): kv_producer on prefill instances,
        # kv_consumer on decode instances (planner.vllm_defaults).
        assert config == {
            "kv_connector": "NixlConnector",
            "kv_role": f"kv_{'producer' if dep.role == 'prefill' else 'consumer'}",
        }
        env = {e["name"]: e for e in container["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert any(p["name"] == "nixl" for p in container["ports"])
        annotations = dm["metadata"]["annotations"]
        # A prefill pool emits no tokens after the first; a decode pool's TTFT is not the user's.
        assert ("capplan/watch.itl" in annotations) == (dep.role == "decode")
        assert ("capplan/watch.ttft" in annotations) == (dep.role == "prefill")
        roles[dep.role] = dm
    assert roles.keys() == {"prefill", "decode"}
    assert "NixlConnector" in k8s_yaml(disaggregated).split("---", 1)[0]  # the header cites the guide
    # NixlConnector pairs a decode pod only with prefill pods whose TP divides its own
    pre = {d.tensor_parallel_size for d in disaggregated.deployments if d.role == "prefill"}
    dec = {d.tensor_parallel_size for d in disaggregated.deployments if d.role == "decode"}
    assert all(d % p == 0 for p in pre for d in dec), (pre, dec)


def test_infeasible_plan_has_nothing_to_emit(colocated: PlanReport) -> None:
    empty = colocated.model_copy(update={"status": "INFEASIBLE", "deployments": []})
    with pytest.raises(Infeasible, match="INFEASIBLE"):
        vllm_commands(empty)
    with pytest.raises(Infeasible):
        k8s_manifests(empty)


def test_amd_gpu_is_refused_for_k8s(colocated: PlanReport) -> None:
    dep = colocated.deployments[0].model_copy(update={"gpu": "mi300x"})
    with pytest.raises(InvalidInput, match=r"nvidia\.com/gpu"):
        k8s_manifests(colocated.model_copy(update={"deployments": [dep]}))
    # The command line does not depend on the vendor.
    assert dep.vllm_command in vllm_commands(colocated.model_copy(update={"deployments": [dep]}))


def test_cli_emit(colocated: PlanReport, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(
        ["plan", str(EXAMPLES / "chat.yaml"), "--emit", "vllm-args", "--workers", "1"], capsys
    )
    assert rc == 0, err
    assert out == vllm_commands(colocated)
    rc, out, err = run_cli(["plan", str(EXAMPLES / "chat.yaml"), "--emit", "k8s", "--workers", "1"], capsys)
    assert rc == 0, err
    assert out == k8s_yaml(colocated)
    rc, out, err = run_cli(
        ["plan", str(EXAMPLES / "chat.yaml"), "--emit", "k8s", "--json", "--workers", "1"], capsys
    )
    assert rc == 2 and err.startswith("capplan: error: --emit:")
