"""Stopping jobs in the server's pool: a deadline, a cancelled call, a drain and the per-job
limits each free the worker within 2 s (cooperatively, or by killing it after
pool.KILL_AFTER_S); a queued call past its deadline is DEADLINE_EXCEEDED; a Plan's validity does
not depend on the call's deadline.

The slow job is a Simulate of the chat example with many requests: 200,000 take about 10 s of
CPU here, far past every deadline used (a second or less)."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_helpers import CHAT_PLAN, running_server, stub

from planner.server import convert, jobs
from planner.server.job_pool import JobPool
from planner.v1 import planner_service_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SIM = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
SLOW = {**SIM, "requests": 200_000}
FREED_S = 2.0  # the bound issue #33 sets on a stopped job's worker


def _cpu_s(pid: int) -> float | None:
    """CPU seconds of a live process (None: gone or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_or_gone(pid: int) -> bool:
    """The process is gone, or used no CPU over 0.2 s."""
    before = _cpu_s(pid)
    time.sleep(0.2)
    after = _cpu_s(pid)
    return before is None or after is None or after - before < 0.02


def _busy(pool: JobPool, timeout_s: float = 30.0) -> int:
    """Wait until the pool's one worker runs a job; its pid."""
    end = time.monotonic() + timeout_s
    while pool.running < 1 or not pool.pids():
        assert time.monotonic() < end, "the job never started"
        time.sleep(0.01)
    return pool.pids()[0]


@pytest.fixture
def pool() -> Iterator[JobPool]:
    p = JobPool(1, 4, limits=jobs.WorkerLimits(memory_bytes=2**30, cpu_s=None))
    p.warm()()
    yield p
    p.close(wait=False)


def test_a_deadline_stops_the_running_job(pool: JobPool) -> None:
    start = time.monotonic()
    result = pool.submit("Simulate", SLOW, {}, time.time() + 0.5).result(timeout=10)
    assert result["error"]["kind"] == "stopped" and result["error"]["reason"] == "deadline"
    with pytest.raises(Exception, match="deadline"):
        jobs.raise_error(result["error"])
    assert time.monotonic() - start < 0.5 + FREED_S
    assert pool.running == 0 and _idle_or_gone(pool.pids()[0])


def test_a_deadline_stops_a_plans_candidate_search(pool: JobPool) -> None:
    many = {
        **CHAT_PLAN,
        "candidates": {**CHAT_PLAN["candidates"], "max_num_batched_tokens": list(range(2048, 22048))},
    }
    start = time.monotonic()
    result = pool.submit("Plan", many, {}, time.time() + 0.5).result(timeout=10)  # 20,000 budgets: minutes
    assert result["error"]["reason"] == "deadline" and time.monotonic() - start < 0.5 + FREED_S
    assert pool.running == 0 and _idle_or_gone(pool.pids()[0])


def test_cancelling_a_running_job_stops_it_and_keeps_the_worker(pool: JobPool) -> None:
    future = pool.submit("Simulate", SLOW, {}, None)
    pid = _busy(pool)
    asked = time.monotonic()
    assert future.cancel() is False  # running: not cancellable as a Future, but stopped
    result = future.result(timeout=10)
    assert time.monotonic() - asked < FREED_S
    assert result["error"] == {**result["error"], "kind": "stopped", "reason": "cancelled"}
    assert pool.pids() == [pid] and _idle_or_gone(pid)  # stopped cooperatively: same worker
    ok = pool.submit("Simulate", {**SIM, "requests": 200}, {}, None).result(timeout=30)
    assert "response" in ok and ok["pid"] == pid


def test_a_worker_that_does_not_stop_is_killed_and_replaced(pool: JobPool) -> None:
    future = pool.submit("Simulate", SLOW, {}, None)
    pid = _busy(pool)
    os.kill(pid, signal.SIGSTOP)  # a worker that answers no stop request (as inside the MILP)
    asked = time.monotonic()
    future.cancel()
    result = future.result(timeout=10)
    assert time.monotonic() - asked < FREED_S
    assert result["error"]["reason"] == "cancelled" and "killed" in result["error"]["message"]
    assert _cpu_s(pid) is None  # gone
    (new,) = pool.pids()
    assert new != pid
    ok = pool.submit("Simulate", {**SIM, "requests": 200}, {}, None).result(timeout=30)
    assert ok["pid"] == new


def test_close_without_waiting_stops_a_busy_worker() -> None:
    p = JobPool(1, 4)
    future = p.submit("Simulate", SLOW, {}, None)
    queued = p.submit("Simulate", SLOW, {}, None)
    pid = _busy(p)
    start = time.monotonic()
    p.close(wait=False)
    assert time.monotonic() - start < FREED_S
    assert future.result(timeout=1)["error"]["reason"] == "shutdown"
    with pytest.raises(Exception, match="shutting down"):
        queued.result(timeout=1)
    assert _cpu_s(pid) is None and p.pids() == []


def test_per_job_memory_and_cpu_limits_are_resource_exhausted() -> None:
    small = JobPool(1, 1, limits=jobs.WorkerLimits(memory_bytes=30 * 2**20, cpu_s=None))
    try:
        pid = small.warm()() or small.pids()[0]
        result = small.submit("Simulate", SLOW, {}, None).result(timeout=60)
        assert result["error"]["kind"] == "limit" and result["error"]["limit"] == "memory"
        with pytest.raises(Exception, match="memory limit of 30 MiB") as err:
            jobs.raise_error(result["error"])
        assert convert_code(err.value) is grpc.StatusCode.RESOURCE_EXHAUSTED
        ok = small.submit("Simulate", {**SIM, "requests": 200}, {}, None).result(timeout=30)
        assert "response" in ok and ok["pid"] != pid  # the worker was replaced
    finally:
        small.close(wait=False)
    brief = JobPool(1, 1, limits=jobs.WorkerLimits(memory_bytes=None, cpu_s=0.5))
    try:
        start = time.monotonic()
        result = brief.submit("Simulate", SLOW, {}, None).result(timeout=60)
        # RLIMIT_CPU counts whole seconds: SIGXCPU within 1 s of CPU after the job starts
        assert time.monotonic() - start < 1.0 + FREED_S
        assert result["error"]["limit"] == "cpu" and "0.5 s" in result["error"]["message"]
    finally:
        brief.close(wait=False)


def convert_code(exc: BaseException) -> grpc.StatusCode:
    from planner.server.service_errors import status_of

    number = status_of(exc).code
    return next(c for c in grpc.StatusCode if c.value[0] == number)


def test_queued_past_its_deadline_is_deadline_exceeded_and_cancel_frees_the_worker() -> None:
    with running_server(workers=1, warm=True, interactive_workers=0) as (server, address):
        channel, s = stub(address)
        slow = s.Simulate.future(convert.to_message(SLOW, pb.SimulateRequest), timeout=30)
        _busy(server.pool)
        with pytest.raises(grpc.RpcError) as err:  # queued behind the simulation (no interactive worker)
            s.Evaluate(convert.to_message(SIM, pb.EvaluateRequest), timeout=0.3)
        assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        end = time.monotonic() + 5  # the interceptor counts once the handler returns
        while server.metrics.rpcs.labels("Evaluate", "DEADLINE_EXCEEDED")._value.get() < 1:
            assert time.monotonic() < end, "no DEADLINE_EXCEEDED counted"
            time.sleep(0.01)
        assert server.metrics.rpcs.labels("Evaluate", "INTERNAL")._value.get() == 0
        pid = server.pool.pids()[0]
        asked = time.monotonic()
        slow.cancel()  # the client cancels: its running job stops
        end = time.monotonic() + FREED_S
        while server.pool.running and time.monotonic() < end:
            time.sleep(0.01)
        assert server.pool.running == 0 and time.monotonic() - asked < FREED_S and _idle_or_gone(pid)
        channel.close()


@pytest.mark.parametrize("limit", [math.nan, math.inf, 1e9, -1.0])
def test_a_plans_validity_does_not_depend_on_the_deadline(limit: float) -> None:
    request: dict[str, Any] = {**CHAT_PLAN, "solver": {"time_limit_s": limit}}
    answers = [
        jobs.run_job("Plan", request, {}, deadline) for deadline in (None, time.time() + 5, time.time() + 1e6)
    ]
    assert [a["error"]["kind"] for a in answers] == ["invalid"] * 3
    assert answers[0]["error"] == answers[1]["error"] == answers[2]["error"]
    assert answers[0]["error"]["violations"][0][0] == "solver.time_limit_s"
