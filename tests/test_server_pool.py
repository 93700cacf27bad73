"""The pool's interactive workers (JobPool's `interactive_workers`, `capplan serve
--interactive-workers`): an Evaluate never waits behind the long jobs holding every regular
worker, and a long job never takes an interactive worker."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from planner.server import jobs
from planner.server.job_pool import JobPool

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SIM = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
EVALUATE = {k: v for k, v in SIM.items() if k in ("deployment", "workload", "slo")}
SLOW = {**SIM, "requests": 200_000}  # ~10 s of CPU: far longer than the test waits


def _wait_running(pool: JobPool, n: int) -> None:
    end = time.monotonic() + 30
    while pool.running < n:
        assert time.monotonic() < end, "the jobs never started"
        time.sleep(0.01)


def test_an_evaluate_is_answered_while_long_jobs_hold_every_regular_worker() -> None:
    pool = JobPool(1, 8, limits=jobs.WorkerLimits(memory_bytes=None, cpu_s=None), interactive_workers=1)
    pool.warm()()
    try:
        assert len(pool.pids()) == 2
        slow = pool.submit("Simulate", SLOW, {}, time.time() + 30)
        _wait_running(pool, 1)
        queued = pool.submit("Simulate", SLOW, {}, time.time() + 30)
        answer = pool.submit("Evaluate", EVALUATE, {}, time.time() + 30).result(timeout=20)
        assert "response" in answer, answer
        # The second long job waited for the regular worker: the interactive one took no long job.
        assert not slow.done() and not queued.running() and not queued.done()
        assert pool.running == 1
    finally:
        pool.close(wait=False)


def test_without_interactive_workers_the_evaluate_waits_for_the_long_job() -> None:
    """The contrast the interactive worker is for: with none, the Evaluate waits (here for the
    long job's deadline, 1.5 s)."""
    pool = JobPool(1, 8, limits=jobs.WorkerLimits(memory_bytes=None, cpu_s=None))
    pool.warm()()
    try:
        pool.submit("Simulate", SLOW, {}, time.time() + 1.5)
        _wait_running(pool, 1)
        start = time.monotonic()
        answer = pool.submit("Evaluate", EVALUATE, {}, time.time() + 30).result(timeout=20)
        assert "response" in answer, answer
        assert time.monotonic() - start > 0.5
    finally:
        pool.close(wait=False)


def test_default_workers_follow_the_cgroup_cpu_quota(tmp_path: Path) -> None:
    import os

    from planner.server.job_pool import default_workers

    cores = len(os.sched_getaffinity(0))
    quota = tmp_path / "cpu.max"
    quota.write_text("max 100000\n")
    assert default_workers(str(quota)) == cores
    quota.write_text("150000 100000\n")  # 1.5 CPUs: two workers (the second gets half a CPU)
    assert default_workers(str(quota)) == min(cores, 2)
    quota.write_text("50000 100000\n")
    assert default_workers(str(quota)) == 1
    assert default_workers(str(tmp_path / "absent")) == cores
    quota.write_text("garbage\n")
    assert default_workers(str(quota)) == cores


def test_a_drain_without_a_grace_limit_lets_the_running_call_finish() -> None:
    """stop(grace_s=None) means "wait for the calls in flight however long" (gRPC's own
    stop(None) aborts them at once, which it used to pass through)."""
    import threading

    from grpc_helpers import stub

    from planner.server import convert
    from planner.server.app import create_server
    from planner.v1 import planner_service_pb2 as pb

    server, port = create_server("127.0.0.1:0", workers=1, interactive_workers=0)
    channel, s = stub(f"127.0.0.1:{port}")
    try:
        request = convert.to_message({**SIM, "requests": 30_000}, pb.SimulateRequest)  # ~1 s of CPU
        call = s.Simulate.future(request, timeout=60)
        _wait_running(server.pool, 1)
        stopper = threading.Thread(target=server.stop, kwargs={"grace_s": None})
        stopper.start()
        assert call.result(timeout=60).report.requests > 0
        stopper.join(30)
        assert not stopper.is_alive()
    finally:
        channel.close()
        server.stop(grace_s=0)
