"""deploy/: the container and the Kubernetes manifests, checked without Docker or a cluster.

`docker build` is not available where the tests run, so the Dockerfile is read as text: its
stages, user, ports and entry command. The manifests are parsed, checked against each other and
validated against the Kubernetes OpenAPI schemas that `kubernetes-validate` ships.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from planner.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "k8s" / "base"
K8S_VERSION = "1.31.0"  # oldest minor still in upstream support at the time of writing


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def manifests() -> dict[str, dict[str, Any]]:
    kust = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    docs = {}
    for name in kust["resources"]:
        (doc,) = list(yaml.safe_load_all((BASE / name).read_text()))
        docs[doc["kind"]] = doc
    return docs


def _json_array(text: str) -> list[str]:
    value = yaml.safe_load(text)  # a JSON array is valid YAML
    assert isinstance(value, list), f"exec form expected, got {text}"
    return [str(v) for v in value]


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    ins = dockerfile()
    froms = [a for w, a in ins if w == "FROM"]
    assert len(froms) == 2
    assert all("slim" in f for f in froms)
    assert froms[0].endswith("AS build") and froms[1].endswith("AS runtime")
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][1] :]
    assert any(w == "COPY" and a.startswith("--from=build") for w, a in runtime)
    users = [a for w, a in runtime if w == "USER"]
    assert users and not users[-1].startswith(("0", "root"))
    env = " ".join(a for w, a in runtime if w == "ENV")
    assert "PYTHONUNBUFFERED=1" in env


def test_dockerfile_ports_and_command_match_the_deployment() -> None:
    ins = dockerfile()
    exposed = {int(p) for w, a in ins if w == "EXPOSE" for p in a.split()}
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert exposed == {p["containerPort"] for p in container["ports"]}
    entry = _json_array(next(a for w, a in ins if w == "ENTRYPOINT"))
    cmd = _json_array(next(a for w, a in ins if w == "CMD"))
    assert entry == ["capplan", "serve"]
    assert cmd == container["args"]  # the pod runs exactly the image's default command
    grpc_port = int(cmd[cmd.index("--port") + 1])
    assert grpc_port == next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    # `capplan` is the project's console script, and `serve` accepts those flags.
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'capplan = "planner.cli:run"' in pyproject
    from planner.cli import build_parser

    args = build_parser().parse_args([*entry[1:], *cmd])
    assert int(args.port) == grpc_port
    assert shlex.join(entry + cmd).startswith("capplan serve --host")


def test_the_pod_serves_its_security_choices_deliberately() -> None:
    """The pod listens on every address (Services, probes, Prometheus reach it there), which a
    plaintext server refuses without an explicit --plaintext; the kubelet's gRPC probes speak
    plaintext only. Reflection stays off; metrics follow the serving host."""
    from planner.cli import build_parser
    from planner.server.transport import host_of, is_loopback, require_safe_transport

    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(["serve", *container["args"]])
    assert not is_loopback(host_of(f"{args.host}:{args.port}"))
    with pytest.raises(InvalidInput, match="--plaintext"):
        require_safe_transport(f"{args.host}:{args.port}", tls=False, plaintext=False)
    assert args.plaintext and args.tls_cert is None
    assert not args.reflection and args.metrics_host is None


def test_probes_are_native_grpc_on_the_serving_port() -> None:
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    grpc_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["grpc"]["port"] == grpc_port
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]


def test_grace_period_outlasts_the_servers_drain() -> None:
    from planner.cli import build_parser

    spec = manifests()["Deployment"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = build_parser().parse_args(["serve", *container["args"]])
    drain_s = float(args.grace_s) + float(args.drain_delay_s)
    assert drain_s > 0
    assert spec["terminationGracePeriodSeconds"] > drain_s


def test_selectors_services_hpa_and_pdb_agree() -> None:
    m = manifests()
    labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert m["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for svc in (d for d in yaml.safe_load_all((BASE / "service-headless.yaml").read_text())):
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"].items() <= labels.items()
    assert m["Service"]["spec"]["selector"].items() <= labels.items()
    assert m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = m["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", m["Deployment"]["metadata"]["name"])
    hpa = m["HorizontalPodAutoscaler"]["spec"]
    assert hpa["minReplicas"] > m["PodDisruptionBudget"]["spec"]["minAvailable"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
)
def test_manifest_validates_against_the_kubernetes_schema(name: str) -> None:
    for doc in yaml.safe_load_all((BASE / name).read_text()):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


# Measured here (VmRSS of create_server(workers=2) after warm-up): the server process 77 MiB, each
# worker 71 MiB (planner.server.preload's imports). Their caches grow with use (answers, catalog,
# memoized capacities), hence about 3x margins.
SERVER_RSS_MIB = 256
WORKER_START_RSS_MIB = 200


def _mib(quantity: str) -> float:
    units = {"Ki": 2**-10, "Mi": 1, "Gi": 2**10}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**20


def test_workers_and_job_memory_fit_the_pods_limits() -> None:
    """Workers match the CPU limit, and every worker holding a job at --job-memory-mib (the
    regular ones and the interactive one) fits the memory limit: a job over its limit is then
    refused RESOURCE_EXHAUSTED, never the pod OOM-killed."""
    import math

    from planner.cli import build_parser

    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(["serve", *container["args"]])
    limits = container["resources"]["limits"]
    assert int(args.workers) == math.ceil(float(limits["cpu"]))
    processes = int(args.workers) + int(args.interactive_workers)
    worst_mib = SERVER_RSS_MIB + processes * (WORKER_START_RSS_MIB + int(args.job_memory_mib))
    assert int(args.job_memory_mib) > 0 and worst_mib <= _mib(limits["memory"]), worst_mib
