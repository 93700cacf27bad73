"""CPU-bound work off the serving threads: worker processes the pool owns, behind a bounded
queue. A request that finds every worker busy and the queue full fails at once (Overloaded:
RESOURCE_EXHAUSTED) rather than waiting while latency grows without bound.

The queue is ours: each worker has a thread here that takes the best waiting job (cheap
interactive calls before plans, plans before simulations and sweep scenarios; first come first
served within a priority), sends it down the worker's pipe and watches it. A queued job of a
cancelled call is dropped before it runs.

A running job stops when its future is cancelled (the call was cancelled), when its deadline
passes, when the pool closes without waiting, or when it runs past its CPU-time limit: first
cooperatively (the worker gets jobs.STOP_SIGNAL and the job ends at its next
planner.stopping.check()), and if the worker is not free within KILL_AFTER_S the process is
killed and a new one started. A worker that dies (killed, out of memory) is replaced the same
way; its job fails as INTERNAL.

Workers are forked from a forkserver that has imported planner.server.preload, so a replacement
worker starts in milliseconds and the gRPC threads of the server are never forked. Workers die
with the forkserver (jobs.init_worker), and the forkserver exits when this process does.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from planner.server import jobs
from planner.server.service_errors import Overloaded, ShuttingDown

__all__ = ["DEADLINE_SLACK_S", "KILL_AFTER_S", "PRIORITY", "JobFuture", "JobPool", "default_workers"]

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

INTERACTIVE = 0  # the priority interactive workers take (JobPool's interactive_workers)
ANY_PRIORITY = 2**31  # what the regular workers take: every job

# A job asked to stop has this long to end cooperatively before its worker is killed. The
# domain's checks come every few milliseconds; the MILP (in HiGHS/CBC) checks none, and a
# solve's time limit is cut to the call's deadline, so this bounds a solve that overruns it.
KILL_AFTER_S = 0.5
# A call cancelled this close to its deadline was cancelled by it (DEADLINE_EXCEEDED).
DEADLINE_SLACK_S = 0.05
# How often a worker's thread looks at its job's stop conditions while the job runs.
_TICK_S = 0.05
# A new worker must say it is ready within this (the first one waits for the forkserver's
# imports).
_START_TIMEOUT_S = 120.0
# An idle worker told to exit gets this long before it is killed.
_EXIT_WAIT_S = 1.0


def default_workers(cpu_max_path: str = "/sys/fs/cgroup/cpu.max") -> int:
    """One worker per core this process may use: the cores it may run on, fewer when its cgroup's
    CPU quota (cgroup v2 `cpu.max`, "QUOTA PERIOD" or "max PERIOD") allows fewer. A container
    limited to 2 CPUs on a 64-core node sees 64 cores in its affinity mask; 64 workers would
    share 2 CPUs and hold 64 processes' memory against the pod's limit."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        cores = max(1, os.cpu_count() or 1)
    try:
        with open(cpu_max_path, encoding="ascii") as f:
            quota, period = f.read(64).split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError, ZeroDivisionError):
        pass  # no cgroup v2 quota readable: the affinity mask
    return cores


class JobFuture(Future[dict[str, Any]]):
    """A job's future. `cancel()` is Future.cancel (True for a job still queued, which is then
    dropped) and, for a running job, also asks the pool to stop it: the future then completes
    with a "stopped" error (CANCELLED) within about KILL_AFTER_S."""

    def __init__(self, deadline: float | None = None) -> None:
        super().__init__()
        self.deadline = deadline
        self.stop_reason: str | None = None

    def past_deadline(self) -> bool:
        """The job's deadline has passed (give or take DEADLINE_SLACK_S: gRPC cancels a call
        at its deadline by its own clock)."""
        return self.deadline is not None and time.time() >= self.deadline - DEADLINE_SLACK_S

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def cancel(self) -> bool:
        if super().cancel():
            return True
        if self.running():
            self.request_stop("deadline" if self.past_deadline() else "cancelled")
        return False


@dataclass(order=True)
class _Job:
    priority: int
    seq: int
    args: tuple[Any, ...] = field(compare=False)
    future: JobFuture = field(compare=False)

    @property
    def deadline(self) -> float | None:
        deadline: float | None = self.args[3]
        return deadline


class _Worker:
    """One worker process and this side of its pipe."""

    def __init__(
        self, process: multiprocessing.process.BaseProcess, conn: Connection, pid: int, lifeline: Connection
    ) -> None:
        self.process, self.conn, self.pid, self.lifeline = process, conn, pid, lifeline

    def _close(self) -> None:
        self.conn.close()
        self.lifeline.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.process.join(5.0)
        self._close()

    def exit(self) -> None:
        """Ask an idle worker to exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(_EXIT_WAIT_S)
        if self.process.is_alive():
            self.kill()
        else:
            self._close()

    def cpu_s(self) -> float | None:
        """CPU time the process has used (Linux /proc), or None."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Slot:
    """A worker's place in the pool: its process (None until started), the job it runs and the
    jobs it takes (priority at most `max_priority`)."""

    def __init__(self, max_priority: int) -> None:
        self.max_priority = max_priority
        self.lock = threading.Lock()
        self.worker: _Worker | None = None
        self.job: _Job | None = None


_STOPPED = {
    "deadline": "the call's deadline passed while the job ran",
    "cancelled": "the call was cancelled while the job ran",
    "shutdown": "the server is shutting down",
    "cpu": "the job ran out of CPU time",
}


def _stopped(reason: str, message: str) -> dict[str, Any]:
    return {"error": {"kind": "stopped", "reason": reason, "message": message}}


class JobPool:
    """`workers` processes; at most `workers + queue_size` jobs admitted at once.
    `on_depth(running, queued)` is told every change (the metrics' gauges). `limits`: each
    worker's per-job memory and CPU-time limits. `interactive_workers`: processes beyond
    `workers` that take only INTERACTIVE jobs (Evaluate, Analyze): a job that started cannot be
    preempted, so without them an Evaluate waits for the end of whatever long jobs hold every
    worker (a Plan of a second or more); with one it waits for at most another Evaluate."""

    def __init__(
        self,
        workers: int,
        queue_size: int,
        on_depth: Callable[[int, int], None] | None = None,
        limits: jobs.WorkerLimits | None = None,
        interactive_workers: int = 0,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        if interactive_workers < 0:
            raise ValueError(f"interactive_workers must be >= 0, got {interactive_workers}")
        self.workers = workers
        self.interactive_workers = interactive_workers
        self.capacity = workers + queue_size
        self.limits = limits or jobs.WorkerLimits()
        self._on_depth = on_depth
        self._cond = threading.Condition()
        self._admitted = 0
        self._running = 0
        self._waiting: list[_Job] = []
        self._seq = itertools.count()
        self._closed = False
        self._stop_all = False  # close() without waiting (or after its wait), kill()
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["planner.server.preload"])
        self._slots = [_Slot(ANY_PRIORITY) for _ in range(workers)]
        self._slots += [_Slot(INTERACTIVE) for _ in range(interactive_workers)]
        self._threads = [
            threading.Thread(target=self._serve, args=(s,), name=f"capplan-pool-{i}", daemon=True)
            for i, s in enumerate(self._slots)
        ]
        for t in self._threads:
            t.start()

    @property
    def admitted(self) -> int:
        return self._admitted

    @property
    def running(self) -> int:
        return self._running

    def pids(self) -> list[int]:
        """The worker processes started and not yet gone."""
        return [s.worker.pid for s in self._slots if s.worker is not None and s.worker.process.is_alive()]

    def _report(self) -> None:
        if self._on_depth is not None:
            self._on_depth(self._running, len(self._waiting))

    # -- workers --

    def _ensure_worker(self, slot: _Slot) -> _Worker:
        with slot.lock:
            if slot.worker is None:
                slot.worker = self._start_worker()
            return slot.worker

    def _start_worker(self) -> _Worker:
        here, there = self._ctx.Pipe(duplex=True)
        life_r, life_w = self._ctx.Pipe(duplex=False)  # closes when this process exits
        process = self._ctx.Process(
            target=jobs.worker_main, args=(there, self.limits, life_r), name="capplan-worker", daemon=True
        )
        process.start()
        there.close()
        life_r.close()
        assert process.pid is not None
        worker = _Worker(process, here, process.pid, life_w)
        try:
            if not here.poll(_START_TIMEOUT_S):
                raise RuntimeError(f"worker {worker.pid} not ready within {_START_TIMEOUT_S:g} s")
            here.recv()  # ("ready", pid)
        except BaseException:
            worker.kill()
            raise
        return worker

    def _retire(self, slot: _Slot, kill: bool) -> None:
        """The slot's worker is gone or must go: kill it (or reap it) and start a fresh one unless
        the pool is closing."""
        with slot.lock:
            worker, slot.worker = slot.worker, None
        if worker is not None:
            worker.kill() if kill else worker.exit()
        if not self._closed:
            with contextlib.suppress(Exception):
                self._ensure_worker(slot)

    def warm(self) -> Callable[[], None]:
        """Start every worker now (the forkserver imports planner.server.preload, then forks)
        instead of on the first requests; returns a function that waits until they are up."""
        errors: list[BaseException] = []

        def start() -> None:
            try:
                for slot in self._slots:
                    self._ensure_worker(slot)
            except BaseException as exc:
                errors.append(exc)

        starter = threading.Thread(target=start, name="capplan-pool-warm", daemon=True)
        starter.start()

        def wait() -> None:
            starter.join()
            if errors:
                raise errors[0]

        return wait

    # -- admission --

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
        given. Cancelling the future drops the job if queued and stops it if running."""
        future = JobFuture(deadline)
        job = _Job(
            PRIORITY.get(rpc, 1) if priority is None else priority,
            next(self._seq),
            (rpc, data, options, deadline),
            future,
        )
        with self._cond:
            self._acquire(wait_s)
            heapq.heappush(self._waiting, job)
            self._report()
            self._cond.notify_all()
        return future

    # -- each worker's thread --

    def _next(self, slot: _Slot) -> _Job | None:
        """The best waiting job the slot takes (skipping cancelled ones), or None once the pool is
        closed. The heap's first job is the best of all: a slot that does not take it waits."""
        with self._cond:
            while True:
                self._cond.wait_for(
                    lambda: self._closed
                    or (bool(self._waiting) and self._waiting[0].priority <= slot.max_priority)
                )
                if self._closed:
                    return None
                job = heapq.heappop(self._waiting)
                if job.future.set_running_or_notify_cancel():
                    self._running += 1
                    self._report()
                    return job
                self._admitted -= 1  # cancelled while it waited
                self._report()
                self._cond.notify_all()

    def _serve(self, slot: _Slot) -> None:
        while True:
            job = self._next(slot)
            if job is None:
                break
            slot.job = job
            try:
                outcome = self._run(slot, job)
            except BaseException as exc:
                outcome = exc
            slot.job = None
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)
            with self._cond:
                self._running -= 1
                self._admitted -= 1
                self._report()
                self._cond.notify_all()
        with slot.lock:
            worker, slot.worker = slot.worker, None
        if worker is not None:
            worker.exit()

    def _run(self, slot: _Slot, job: _Job) -> dict[str, Any] | BaseException:
        """Run `job` on the slot's worker and watch it: its result, or the error it ends with."""
        if job.future.stop_reason is not None or self._stop_all:
            return _stopped(job.future.stop_reason or "shutdown", "stopped before it started")
        worker = self._ensure_worker(slot)
        try:
            worker.conn.send(job.args)
        except OSError:
            self._retire(slot, kill=True)
            return jobs.WorkerError("the worker process was gone", "")
        cpu0 = worker.cpu_s() if self.limits.cpu_s is not None else None
        asked: str | None = None  # the reason a stop was requested
        asked_at = 0.0
        while True:
            if worker.conn.poll(_TICK_S):
                try:
                    result: dict[str, Any] = worker.conn.recv()
                except (EOFError, OSError):
                    break  # the worker died
                if not worker.process.is_alive() or result.get("error", {}).get("limit") == "memory":
                    self._retire(slot, kill=False)
                if asked is not None and result.get("error", {}).get("kind") == "stopped":
                    return _stopped(asked, _STOPPED[asked])  # why this side asked it to stop
                return result
            reason = self._stop_reason(job, worker, cpu0)
            if reason is not None and asked is None:
                asked, asked_at = reason, time.monotonic()
                try:
                    os.kill(worker.pid, jobs.STOP_SIGNAL)
                except ProcessLookupError:
                    break
            elif asked is not None and time.monotonic() - asked_at > KILL_AFTER_S:
                self._retire(slot, kill=True)
                return self._killed(asked)
            if not worker.process.is_alive():
                break
        code = worker.process.exitcode
        self._retire(slot, kill=True)
        if self._stop_all:  # kill(): the server stops at once
            return _stopped("shutdown", "the server stopped; the job's worker was killed")
        return jobs.WorkerError(f"the worker process died (exit code {code})", "")

    def _stop_reason(self, job: _Job, worker: _Worker, cpu0: float | None) -> str | None:
        """Why the running `job` must stop now, or None."""
        if job.future.stop_reason is not None:
            return job.future.stop_reason
        if self._stop_all:
            return "shutdown"
        if job.deadline is not None and time.time() >= job.deadline:
            return "deadline"
        if cpu0 is not None and self.limits.cpu_s is not None:
            used = worker.cpu_s()
            # RLIMIT_CPU has whole seconds: SIGXCPU comes up to 1 s after the budget.
            if used is not None and used - cpu0 > self.limits.cpu_s + 1.0:
                return "cpu"
        return None

    def _killed(self, reason: str) -> dict[str, Any]:
        if reason == "cpu":
            return {
                "error": {
                    "kind": "limit",
                    "limit": "cpu",
                    "message": f"the job used its CPU-time limit of {self.limits.cpu_s:g} s (--job-cpu-s)",
                }
            }
        return _stopped(reason, f"{_STOPPED[reason]}; its worker was killed")

    # -- shutdown --

    def close(self, wait: bool = True, timeout_s: float | None = None) -> None:
        """Refuse new jobs and drop the waiting ones. With `wait`, let running jobs finish (up to
        `timeout_s`, None: forever), else stop them now; then the workers exit. Without `wait`
        this returns within about KILL_AFTER_S plus a second."""
        with self._cond:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            self._admitted -= len(waiting)
            self._report()
            self._cond.notify_all()
        for job in waiting:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ShuttingDown("the server is shutting down"))
        end = None if timeout_s is None else time.monotonic() + timeout_s
        if wait:
            for slot in self._slots:
                running = slot.job
                while running is not None and not running.future.done():
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    threading.Event().wait(_TICK_S if left is None else min(_TICK_S, left))
        self._stop_all = True
        for t in self._threads:
            t.join(KILL_AFTER_S + _EXIT_WAIT_S + 5.0)

    def kill(self) -> None:
        """Stop at once: close, and kill every worker without waiting for its job."""
        with self._cond:
            self._closed = True
            self._stop_all = True
            self._cond.notify_all()
        for slot in self._slots:
            worker = slot.worker
            if worker is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
