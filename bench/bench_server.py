"""Load benchmark of `capplan serve` (docs/service.md has the figures).

1. Load: `--clients` concurrent clients (closed loop, no think time) for `--duration-s`, half
   Plan and half Evaluate calls, against one server (`--workers` processes). Twice: with the
   response cache off (every call computed), and on with `--fresh` of the calls new requests and
   the rest repeats from a pool of 64 (what dashboards and pipelines re-asking send).
   Throughput, p50/p99 per method, errors by status code, peak RSS of the server's processes.
2. Sweep: `--sweep` plan scenarios (traffic growth x price x SLO variants) through one server,
   then through two (each `--workers`), with planner.client's chunked Sweep: scenarios/s.
3. Hostile mix: the uncached load twice on fresh servers, clean and with `--hostile` of the calls
   replaced by abusive ones (in equal shares: Plans of many budgets over many buckets with 1 s
   deadlines, Sweeps with 1 s deadlines, over-limit requests, 1 MiB strings), while a prober on
   its own connection sends a health Check every 20 ms. Health p50/p99 and Evaluate p99 of each
   run; the targets: health p99 under 100 ms, Evaluate p99 within 2x of the clean run.

    python3 bench/bench_server.py                       # smoke: 5 s, 100 scenarios
    python3 bench/bench_server.py --duration-s 30 --sweep 1000
    python3 bench/bench_server.py --phases hostile --duration-s 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.client import PlannerClient  # noqa: E402
from planner.server import convert  # noqa: E402
from planner.v1 import planner_service_pb2 as pb  # noqa: E402
from planner.v1 import planner_service_pb2_grpc as pb_grpc  # noqa: E402

PLAN: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
    "workload": {
        "arrivals": {"requests_per_s": 20},
        "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
        "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
    },
    "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]},
}
EVALUATE: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "chat-qwen3-8b-h100.yaml").read_text())


def plan_request(rate: float) -> pb.PlanRequest:
    data = json.loads(json.dumps(PLAN))
    data["workload"]["arrivals"]["requests_per_s"] = rate
    return convert.to_message(data, pb.PlanRequest)


def evaluate_request(rate: float) -> pb.EvaluateRequest:
    return convert.to_message({**EVALUATE, "requests_per_s": rate}, pb.EvaluateRequest)


# --- a server process ------------------------------------------------------------------------------


class Server:
    """`capplan serve` on a free port; `peak_rss_mib` of it and its workers, sampled."""

    def __init__(self, workers: int, cache_mib: int) -> None:
        cmd = [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", "0",
               "--workers", str(workers), "--cache-mib", str(cache_mib), "--log-format", "json", "--queue", "256"]  # fmt: skip
        self.proc = subprocess.Popen(  # its own process group: its workers are stopped with it
            cmd,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            start_new_session=True,
        )
        assert self.proc.stderr is not None
        self.port = 0
        for line in self.proc.stderr:
            entry = json.loads(line)
            if entry.get("event") == "serving":
                self.port = int(entry["port"])
                break
        if not self.port:
            raise SystemExit("server did not start")
        threading.Thread(target=self._drain_log, daemon=True).start()
        self.peak_rss_mib = 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._sample_rss, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _drain_log(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def _tree_rss_mib(self) -> float:
        total = 0
        pids = [self.proc.pid]
        seen = set()
        while pids:
            pid = pids.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                for task in Path(f"/proc/{pid}/task").iterdir():
                    children = (task / "children").read_text().split()
                    pids.extend(int(c) for c in children)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
        return total / 1024

    def _sample_rss(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_rss_mib = max(self.peak_rss_mib, self._tree_rss_mib())

    def stop(self) -> None:
        """SIGTERM (the drain); a server still busy after 60 s is killed with its workers."""
        self._stop.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


# --- the load test ---------------------------------------------------------------------------------


def load(
    address: str, clients: int, duration_s: float, fresh: float, seed: int, hostile: float = 0.0
) -> dict[str, Any]:
    """Closed-loop clients for `duration_s`; `hostile`: the share of calls that are abusive
    (hostile_call), the rest Plan and Evaluate in turn."""
    rng = random.Random(seed)
    pool_rates = [round(2 + 62 * rng.random(), 2) for _ in range(64)]
    pool = {
        "Plan": [plan_request(r) for r in pool_rates],
        "Evaluate": [evaluate_request(r / 8) for r in pool_rates],
    }
    results: list[tuple[str, float, str]] = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + duration_s

    def client(i: int) -> None:
        r = random.Random(seed * 1000 + i)
        channel = grpc.insecure_channel(address)
        stub = pb_grpc.PlannerServiceStub(channel)
        n = 0
        while time.perf_counter() < stop_at:
            if hostile and r.random() < hostile:
                kind, code, took = hostile_call(stub, r)
                with lock:
                    results.append((kind, took, code))
                continue
            method = "Plan" if (n + i) % 2 == 0 else "Evaluate"
            n += 1
            if r.random() < fresh:
                rate = 2 + 62 * r.random()
                request: Any = plan_request(rate) if method == "Plan" else evaluate_request(rate / 8)
            else:
                request = r.choice(pool[method])
            start = time.perf_counter()
            try:
                getattr(stub, method)(request, timeout=60)
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name
            with lock:
                results.append((method, time.perf_counter() - start, code))
        channel.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    normal = [(m, d, c) for m, d, c in results if m in ("Plan", "Evaluate")]
    out: dict[str, Any] = {
        "calls": len(normal),
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(normal) / wall, 1),
        "errors": dict(Counter(code for _, _, code in normal if code != "OK")),
    }
    if hostile:
        out["hostile"] = dict(Counter(f"{m}:{c}" for m, _, c in results if m not in ("Plan", "Evaluate")))
    for method in ("Plan", "Evaluate"):
        lat = sorted(d for m, d, c in results if m == method and c == "OK")
        if lat:
            out[method] = {
                "calls": len(lat),
                "p50_ms": round(1e3 * statistics.median(lat), 1),
                "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
                "max_ms": round(1e3 * lat[-1], 1),
            }
    return out


# --- the hostile mix -------------------------------------------------------------------------------

# Many listed budgets over 96 hourly buckets: ~2.4 s of one worker (240 configurations), asked
# with a 1 s deadline.
_RNG = random.Random(7)
BIG_PLAN: dict[str, Any] = {
    **PLAN,
    "workload": {
        **PLAN["workload"],
        "arrivals": {
            "buckets": [
                {"duration_s": 3600, "requests_per_s": round(4 + 36 * _RNG.random(), 2)} for _ in range(96)
            ]
        },
    },
    "candidates": {
        "gpus": ["h100-sxm", "a100-80gb-sxm", "l40s", "h200-sxm"],
        "tensor_parallel_sizes": [1, 2, 4],
        "max_num_seqs": [32, 64, 128, 256, 512],
        "max_num_batched_tokens": [2048, 4096, 8192, 16384],
    },
}
HOSTILE_KINDS = ("expiring_plan", "expiring_sweep", "over_limit", "huge_string")


def hostile_call(stub: Any, r: random.Random) -> tuple[str, str, float]:
    """One abusive call, each kind equally often: (kind, status code, seconds)."""
    kind = r.choice(HOSTILE_KINDS)
    start = time.perf_counter()
    try:
        if kind == "expiring_plan":  # a new request each time: never answered from the cache
            data = json.loads(json.dumps(BIG_PLAN))
            data["slo"]["ttft_p99_ms"] = 400 + r.randrange(400)
            stub.Plan(convert.to_message(data, pb.PlanRequest), timeout=1.0)
        elif kind == "expiring_sweep":
            base = r.random()
            rates = [round(5 + 30 * base + 0.1 * k, 3) for k in range(50)]
            request = pb.SweepRequest(
                scenarios=[pb.SweepScenario(name=f"s{k}", plan=plan_request(x)) for k, x in enumerate(rates)]
            )
            for _ in stub.Sweep(request, timeout=1.0):
                pass
        elif kind == "over_limit":  # more buckets than the service takes (10,000)
            data = json.loads(json.dumps(PLAN))
            data["workload"]["arrivals"] = {"buckets": [{"duration_s": 60, "requests_per_s": 1}] * 10_001}
            stub.Plan(convert.to_message(data, pb.PlanRequest), timeout=10)
        else:  # a 1 MiB model name
            request = evaluate_request(2.0)
            request.deployment.model = "x" * 2**20
            stub.Evaluate(request, timeout=10)
        code = "OK"
    except grpc.RpcError as exc:
        code = exc.code().name
    return kind, code, time.perf_counter() - start


class HealthProbe:
    """A health Check every `period_s` on a connection of its own, as a kubelet probe: the
    latencies (failures count as their time, and separately)."""

    def __init__(self, address: str, period_s: float = 0.02) -> None:
        self.address, self.period_s = address, period_s
        self.latencies_s: list[float] = []
        self.failures: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with grpc.insecure_channel(self.address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            check(health_pb2.HealthCheckRequest(), timeout=5)  # connected before the clock starts
            while not self._stop.wait(self.period_s):
                start = time.perf_counter()
                try:
                    check(health_pb2.HealthCheckRequest(), timeout=2)
                except grpc.RpcError as exc:
                    self.failures[exc.code().name] += 1
                self.latencies_s.append(time.perf_counter() - start)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        lat = sorted(self.latencies_s)
        return {
            "checks": len(lat),
            "p50_ms": round(1e3 * statistics.median(lat), 2),
            "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2),
            "max_ms": round(1e3 * lat[-1], 2),
            "failures": dict(self.failures),
        }


def hostile_mix(args: argparse.Namespace) -> dict[str, Any]:
    """The clean and the hostile run, each on a fresh uncached server with a health prober."""
    out: dict[str, Any] = {}
    for label, share in (("clean", 0.0), ("hostile", args.hostile)):
        server = Server(args.workers, 0)
        try:
            probe = HealthProbe(server.address)
            run = load(server.address, args.clients, args.duration_s, 1.0, args.seed, hostile=share)
            run["health"] = probe.stop()
        finally:
            server.stop()
        run["peak_rss_mib"] = round(server.peak_rss_mib, 1)
        out[label] = run
        print(f"mix_{label}", json.dumps(run), flush=True)
    clean, bad = out["clean"].get("Evaluate"), out["hostile"].get("Evaluate")
    out["targets"] = {
        "health_p99_under_100ms": all(out[k]["health"]["p99_ms"] < 100 for k in ("clean", "hostile")),
        "evaluate_p99_ratio": round(bad["p99_ms"] / clean["p99_ms"], 2) if clean and bad else None,
    }
    return out


# --- the sweep -------------------------------------------------------------------------------------


def scenarios(n: int) -> list[tuple[str, dict[str, Any]]]:
    """A budget run: traffic growth x GPU price x SLO variants, all distinct."""
    out = []
    for i in range(n):
        growth = 1 + (i % 25) * 0.1
        price = 2.0 + ((i // 25) % 8) * 0.25
        ttft = (300, 500, 800, 1200, 2000)[(i // 200) % 5]
        data = json.loads(json.dumps(PLAN))
        data["workload"]["arrivals"]["requests_per_s"] = round(10 * growth, 3)
        data["pricing"] = {"h100-sxm": {"usd_per_gpu_hour": price}}
        data["slo"]["ttft_p99_ms"] = ttft
        out.append((f"growth={growth:.1f},price={price:.2f},ttft={ttft}", data))
    return out


def sweep(addresses: list[str], n: int) -> dict[str, Any]:
    items = scenarios(n)
    start = time.perf_counter()
    errors = 0
    with PlannerClient(addresses, timeout_s=3600) as client:
        done = 0
        for r in client.sweep(items):
            done += 1
            errors += r.error is not None
    wall = time.perf_counter() - start
    return {"servers": len(addresses), "scenarios": done, "errors": errors, "wall_s": round(wall, 2),
            "scenarios_per_s": round(done / wall, 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration-s", type=float, default=5.0)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--fresh", type=float, default=0.1, help="share of new requests in the cached run")
    p.add_argument("--sweep", type=int, default=100, help="scenarios (0: skip the sweep)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hostile", type=float, default=0.1, help="share of abusive calls in the hostile mix")
    p.add_argument(
        "--phases", nargs="+", choices=("load", "sweep", "hostile"), default=["load", "sweep", "hostile"]
    )
    args = p.parse_args(argv)
    report: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)),
        "workers": args.workers,
        "clients": args.clients,
    }

    loads = (("load_uncached", 0, 1.0), ("load_cached", 64, args.fresh)) if "load" in args.phases else ()
    for label, cache_mib, fresh in loads:
        server = Server(args.workers, cache_mib)
        try:
            report[label] = load(server.address, args.clients, args.duration_s, fresh, args.seed)
        finally:
            server.stop()
        report[label]["peak_rss_mib"] = round(server.peak_rss_mib, 1)
        print(label, json.dumps(report[label]), flush=True)

    if args.sweep and "sweep" in args.phases:
        servers = [Server(args.workers, 0), Server(args.workers, 0)]
        try:
            report["sweep_one_server"] = sweep([servers[0].address], args.sweep)
            print("sweep_one_server", json.dumps(report["sweep_one_server"]), flush=True)
            report["sweep_two_servers"] = sweep([s.address for s in servers], args.sweep)
            print("sweep_two_servers", json.dumps(report["sweep_two_servers"]), flush=True)
        finally:
            for s in servers:
                s.stop()
    if "hostile" in args.phases:
        report["hostile_mix"] = hostile_mix(args)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
