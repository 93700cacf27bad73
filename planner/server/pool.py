"""CPU-bound work off the serving threads: a process pool sized to the cores behind a bounded
queue. A request that finds every worker busy and the queue full fails at once (Overloaded:
RESOURCE_EXHAUSTED) rather than waiting while latency grows without bound.

The queue is ours, not the executor's: at most one job per worker is handed to the processes,
the rest wait here by priority (cheap interactive calls before plans, plans before simulations
and sweep scenarios; first come first served within a priority). A cheap Evaluate is then not
stuck behind a queue of plans, and a queued job of a cancelled call is dropped before it runs.

Workers are forked from a forkserver that has imported planner.server.preload, so a replacement
worker (after a crash) starts in milliseconds and the gRPC threads of the server are never forked.
"""

from __future__ import annotations

import heapq
import itertools
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from planner.server import jobs
from planner.server.errors import Overloaded, ShuttingDown

__all__ = ["PRIORITY", "JobPool", "default_workers"]

# Lower runs first. Interactive and cheap (milliseconds), then plans, then long or batch work.
PRIORITY = {
    "ListCatalog": 0,
    "Analyze": 0,
    "Evaluate": 0,
    "Plan": 1,
    "Calibrate": 1,
    "Simulate": 2,
    "Sweep": 2,
}


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(order=True)
class _Job:
    priority: int
    seq: int
    args: tuple[Any, ...] = field(compare=False)
    future: Future[dict[str, Any]] = field(compare=False)


class JobPool:
    """`workers` processes; at most `workers + queue_size` jobs admitted at once.
    `on_depth(running, queued)` is told every change (the metrics' gauges)."""

    def __init__(
        self,
        workers: int,
        queue_size: int,
        on_depth: Callable[[int, int], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        self.workers = workers
        self.capacity = workers + queue_size
        self._on_depth = on_depth
        self._cond = threading.Condition()
        self._admitted = 0
        self._running = 0
        self._waiting: list[_Job] = []
        self._seq = itertools.count()
        self._closed = False
        self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["planner.server.preload"])
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=jobs.init_worker)

    @property
    def admitted(self) -> int:
        return self._admitted

    def _report(self) -> None:
        if self._on_depth is not None:
            self._on_depth(self._running, len(self._waiting))

    def warm(self) -> Callable[[], None]:
        """Start every worker now (the forkserver imports planner.server.preload, then forks)
        instead of on the first requests; returns a function that waits until they are up."""
        started = [self._executor.submit(jobs.init_worker) for _ in range(self.workers)]

        def wait() -> None:
            for f in started:
                f.result()

        return wait

    def _acquire(self, timeout_s: float | None) -> None:
        """Admit one job: at once (timeout 0) or waiting up to `timeout_s` (None: forever).
        Called with the lock held."""
        if self._closed:
            raise ShuttingDown("the server is shutting down")
        if self._admitted >= self.capacity:
            if timeout_s == 0:
                raise Overloaded(
                    f"server busy: {self._admitted} requests running or queued (limit {self.capacity}); "
                    "retry with backoff or add replicas"
                )
            if not self._cond.wait_for(
                lambda: self._closed or self._admitted < self.capacity, timeout=timeout_s
            ):
                raise Overloaded(f"server busy: no worker freed within {timeout_s:g} s")
            if self._closed:
                raise ShuttingDown("the server is shutting down")
        self._admitted += 1

    def submit(
        self,
        rpc: str,
        data: dict[str, Any],
        options: dict[str, Any],
        deadline: float | None,
        wait_s: float | None = 0,
        priority: int | None = None,
    ) -> Future[dict[str, Any]]:
        """Queue one job (see jobs.run_job). `wait_s` 0: fail fast when full (a unary call);
        else wait that long for room (a sweep's next scenario). `priority`: PRIORITY[rpc] unless
        given. The future can be cancelled until a worker takes the job."""
        future: Future[dict[str, Any]] = Future()
        job = _Job(
            PRIORITY.get(rpc, 1) if priority is None else priority,
            next(self._seq),
            (rpc, data, options, deadline),
            future,
        )
        with self._cond:
            self._acquire(wait_s)
            heapq.heappush(self._waiting, job)
        self._dispatch()
        return future

    def _dispatch(self) -> None:
        """Hand waiting jobs to idle workers, best priority first."""
        while True:
            with self._cond:
                if self._closed or self._running >= self.workers or not self._waiting:
                    break
                job = heapq.heappop(self._waiting)
                if not job.future.set_running_or_notify_cancel():  # cancelled while it waited
                    self._admitted -= 1
                    self._cond.notify()
                    continue
                self._running += 1
                executor = self._executor
            try:
                inner = executor.submit(jobs.run_job, *job.args)
            except BrokenProcessPool as exc:
                self._replace(executor)
                self._finish(job, executor, None, exc)
                continue
            except RuntimeError as exc:  # shut down meanwhile
                self._finish(job, executor, None, ShuttingDown(str(exc)))
                continue
            inner.add_done_callback(self._on_done(job, executor))
        self._report()

    def _on_done(self, job: _Job, executor: ProcessPoolExecutor) -> Callable[[Future[dict[str, Any]]], None]:
        return lambda inner: self._finish(job, executor, inner, None)

    def _finish(
        self,
        job: _Job,
        executor: ProcessPoolExecutor,
        inner: Future[dict[str, Any]] | None,
        error: BaseException | None,
    ) -> None:
        if inner is not None:
            error = inner.exception() if not inner.cancelled() else ShuttingDown("the job was cancelled")
        if error is None and inner is not None:
            job.future.set_result(inner.result())
        else:
            job.future.set_exception(error or RuntimeError("job failed"))
        if isinstance(error, BrokenProcessPool):
            self._replace(executor)
        with self._cond:
            self._running -= 1
            self._admitted -= 1
            self._cond.notify()
        self._dispatch()

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A worker died (killed, out of memory) and took its executor with it: start a new one
        (once, however many jobs saw the breakage). The jobs it held fail as INTERNAL."""
        with self._cond:
            if self._closed or self._executor is not broken:
                return
            self._executor = self._new_executor()
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self, wait: bool = True) -> None:
        """Refuse new jobs and drop the waiting ones; with `wait`, let running ones finish."""
        with self._cond:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            self._cond.notify_all()
        for job in waiting:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ShuttingDown("the server is shutting down"))
        self._executor.shutdown(wait=wait, cancel_futures=not wait)
