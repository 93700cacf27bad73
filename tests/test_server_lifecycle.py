"""`capplan serve` as a process: it logs where it listens, and on SIGTERM health goes to
NOT_SERVING, new calls are refused, the call in flight completes, and the process exits 0."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_helpers import free_port, stub

from planner.server import convert
from planner.v1 import planner_service_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class _Lines:
    """The server's stderr, one JSON log line at a time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        assert proc.stderr is not None
        stream = proc.stderr

        def read() -> None:
            for line in stream:
                try:
                    self.q.put(json.loads(line))
                except json.JSONDecodeError:
                    self.q.put({"event": "text", "text": line})

        threading.Thread(target=read, daemon=True).start()

    def wait_for(self, event: str, timeout_s: float = 60) -> dict[str, Any]:
        end = time.monotonic() + timeout_s
        while True:
            entry = self.q.get(timeout=max(0.01, end - time.monotonic()))
            self.seen.append(entry)
            if entry.get("event") == event:
                return entry


def _metric(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_sigterm_drains_in_flight_calls() -> None:
    metrics_port = free_port()
    cmd = [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "1",
           "--grace-s", "30", "--drain-delay-s", "1", "--metrics-port", str(metrics_port), "--log-format", "json"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        lines = _Lines(proc)
        port = lines.wait_for("serving")["port"]
        address = f"127.0.0.1:{port}"
        channel, s = stub(address)
        data = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
        slow = s.Simulate.future(
            convert.to_message({**data, "requests": 6000}, pb.SimulateRequest), timeout=120
        )
        end = time.monotonic() + 30
        while _metric(metrics_port, "capplan_jobs_running") < 1:
            assert time.monotonic() < end, "the simulation never started"
            time.sleep(0.02)

        proc.send_signal(signal.SIGTERM)
        lines.wait_for("draining")
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service="planner.v1.PlannerService"), timeout=5)
        assert status.status == health_pb2.HealthCheckResponse.NOT_SERVING  # load balancers look away first
        time.sleep(1.2)  # past the drain delay: the server refuses new calls
        with grpc.insecure_channel(address) as fresh:
            late = health_pb2_grpc.HealthStub(fresh)
            try:
                late.Check(health_pb2.HealthCheckRequest(), timeout=3)
                refused = None
            except grpc.RpcError as exc:
                refused = exc.code()
        assert refused is grpc.StatusCode.UNAVAILABLE

        report = slow.result(timeout=120).report  # the call in flight finished
        assert report.requests == 6000
        assert proc.wait(timeout=60) == 0
        lines.wait_for("stopped", timeout_s=5)
        rpc = [e for e in lines.seen if e.get("event") == "rpc"]
        assert any(e["method"] == "Simulate" and e["code"] == "OK" for e in rpc)
        channel.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
