"""CPU-bound work off the serving threads: a process pool sized to the cores behind a bounded
queue. A request that finds every worker busy and the queue full fails at once (Overloaded:
RESOURCE_EXHAUSTED) rather than waiting while latency grows without bound.

Workers are forked from a forkserver that has imported planner.api, so a replacement worker
(after a crash) starts in milliseconds and the gRPC threads of the server are never forked.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from planner.server import jobs
from planner.server.errors import Overloaded, ShuttingDown

__all__ = ["JobPool", "default_workers"]


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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
            running = min(self._admitted, self.workers)
            self._on_depth(running, self._admitted - running)

    def warm(self) -> Callable[[], None]:
        """Start every worker now (the forkserver imports planner.server.preload, then forks)
        instead of on the first requests; returns a function that waits until they are up."""
        started = [self._executor.submit(jobs.init_worker) for _ in range(self.workers)]

        def wait() -> None:
            for f in started:
                f.result()

        return wait

    def _acquire(self, timeout_s: float | None) -> None:
        """Admit one job: at once (timeout 0) or waiting up to `timeout_s` (None: forever)."""
        with self._cond:
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
        self._report()

    def _release(self) -> None:
        with self._cond:
            self._admitted -= 1
            self._cond.notify()
        self._report()

    def submit(
        self,
        rpc: str,
        data: dict[str, Any],
        options: dict[str, Any],
        deadline: float | None,
        wait_s: float | None = 0,
    ) -> Future[dict[str, Any]]:
        """Queue one job (see jobs.run_job). `wait_s` 0: fail fast when full (a unary call);
        else wait that long for room (a sweep's next scenario)."""
        self._acquire(wait_s)
        try:
            executor = self._executor
            future = executor.submit(jobs.run_job, rpc, data, options, deadline)
        except BrokenProcessPool:
            self._replace(executor)
            try:
                executor = self._executor
                future = executor.submit(jobs.run_job, rpc, data, options, deadline)
            except BaseException:
                self._release()
                raise
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda f: self._done(f, executor))
        return future

    def _done(self, future: Future[dict[str, Any]], executor: ProcessPoolExecutor) -> None:
        self._release()
        if not future.cancelled() and isinstance(future.exception(), BrokenProcessPool):
            self._replace(executor)

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A worker died (killed, out of memory) and took its executor with it: start a new one
        (once, however many jobs saw the breakage). The jobs it held fail as INTERNAL."""
        with self._cond:
            if self._closed or self._executor is not broken:
                return
            self._executor = self._new_executor()
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self, wait: bool = True) -> None:
        """Refuse new jobs; with `wait`, let admitted ones finish."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._executor.shutdown(wait=wait, cancel_futures=not wait)
