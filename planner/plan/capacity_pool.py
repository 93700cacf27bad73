"""Answer many capacity questions at once, on the machine's cores.

Worker processes answer shapes to search (each a sequence of screens and root-finds,
planner/plan/search.py) or single configurations, each task carrying its plan's SearchContext (a
few kilobytes); results come back in the order asked, so the plan is the same whatever the
worker count. The worker processes are started once per process and kept for later plans
(starting them costs about as much as a small plan); `shutdown_workers` (also at exit) stops
them. `workers=1` answers in this process: no fork, what a threaded server should use. Until
the workers run, a batch starts in this process and only its rest after IN_PROCESS_S of CPU
goes to them: a small plan starts none.

Every answer is first looked up in this process's capacity memo (planner/plan/memo.py) and
only the misses are computed (then remembered): a later plan with the same capacity inputs,
whatever its rates and prices, skips its searches. What reads the rates (each candidate's
replicas per bucket, planner/plan/split.py) is computed in this process, in a fixed order, from
remembered root-finds.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from types import TracebackType

from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext, evaluate_config
from planner.plan.memo import CAPACITY_MEMO, capacity_key
from planner.plan.search import (
    SearchResult,
    Shape,
    ShapeResult,
    combine,
    keep_lowered,
    lowered_seqs,
    prune_divisible,
    search_shape,
)
from planner.plan.split import Sizing, Split, line_capacity, line_cv2, line_memo_key

# Below this many tasks a batch is answered in-process: handing them out costs more.
MIN_PARALLEL_TASKS = 2
DEFAULT_WORKERS = 2
# Before the worker processes exist, a batch starts in this process and hands to them only what
# is left after this much CPU: starting them costs about 0.06 s of CPU (fork, then copy-on-write
# faults), more than a small plan's whole search (`capplan plan examples/chat.yaml`: 0.17 s).
# The answers are the same either way (bench/bench_cli.py measures the whole command).
IN_PROCESS_S = 0.25

_EXECUTORS: dict[int, ProcessPoolExecutor] = {}
_LOCK = threading.Lock()


def _answer(item: tuple[SearchContext, Shape | ReplicaConfig]) -> ShapeResult | CapacityPoint:
    ctx, task = item
    if isinstance(task, Shape):
        return search_shape(ctx, task)
    return evaluate_config(ctx, task)


def _executor(workers: int) -> Executor:
    with _LOCK:
        ex = _EXECUTORS.get(workers)
        if ex is None:
            # Forked workers inherit what is imported here: the root-finder's SciPy, once.
            import scipy.optimize  # noqa: F401

            method = "fork" if "fork" in mp.get_all_start_methods() else None
            ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(method))
            _EXECUTORS[workers] = ex
        return ex


def _running(workers: int) -> bool:
    with _LOCK:
        return workers in _EXECUTORS


def shutdown_workers() -> None:
    """Stop the worker processes (they start again on the next parallel plan)."""
    with _LOCK:
        for ex in _EXECUTORS.values():
            ex.shutdown(wait=True, cancel_futures=True)
        _EXECUTORS.clear()


atexit.register(shutdown_workers)


class CapacityPool:
    """Shape searches and cached `evaluate_config` for one plan, optionally on the worker
    processes. Use as a context manager."""

    def __init__(self, ctx: SearchContext, workers: int = DEFAULT_WORKERS) -> None:
        self.ctx = ctx
        self.workers = max(1, int(workers))
        self.cache: dict[ReplicaConfig, CapacityPoint] = {}
        self.questions = 0  # root-finds and screens made (or found in the memo)
        self._keys: dict[str, Hashable] = {}  # capacity key per GPU type
        self.sizings: dict[ReplicaConfig, Sizing] = {}  # this plan's, by configuration
        self.runners_up: tuple[CapacityPoint, ...] = ()  # the last search's (SearchResult.runners_up)

    def __enter__(self) -> CapacityPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def _key(self, task: Shape | ReplicaConfig) -> Hashable:
        key = self._keys.get(task.gpu)
        if key is None:
            key = self._keys[task.gpu] = capacity_key(self.ctx, task.gpu)
        return (key, task)

    def _map(self, tasks: Sequence[Shape | ReplicaConfig]) -> list[ShapeResult | CapacityPoint]:
        """Answers in the order asked: from the memo, else computed (and remembered)."""
        keys = [self._key(t) for t in tasks]
        out: list[ShapeResult | CapacityPoint | None] = [CAPACITY_MEMO.get(k) for k in keys]
        todo = [i for i, a in enumerate(out) if a is None]
        for i, a in zip(todo, self._compute([tasks[i] for i in todo]), strict=True):
            CAPACITY_MEMO.put(keys[i], a)
            out[i] = a
        return [a for a in out if a is not None]

    def _compute(self, tasks: Sequence[Shape | ReplicaConfig]) -> list[ShapeResult | CapacityPoint]:
        """Answers in the order asked: on the worker processes once they run, else here until
        IN_PROCESS_S of this thread's CPU has passed since the first answer (which pays the
        latency model's one-off imports), and the rest on them (started then)."""
        out: list[ShapeResult | CapacityPoint] = []
        clock: float | None = None
        for i, task in enumerate(tasks):
            if (
                self.workers > 1
                and len(tasks) - i >= MIN_PARALLEL_TASKS
                and (
                    _running(self.workers)
                    or (clock is not None and time.thread_time() - clock >= IN_PROCESS_S)
                )
            ):
                items = [(self.ctx, t) for t in tasks[i:]]
                return out + list(_executor(self.workers).map(_answer, items, chunksize=1))
            out.append(_answer((self.ctx, task)))
            if clock is None:
                clock = time.thread_time()
        return out

    def search(
        self, shapes: Sequence[Shape], also: Sequence[ReplicaConfig] = (), split: Split | None = None
    ) -> SearchResult:
        """Search every shape (in parallel when there are workers); take each shape's best at the
        per-replica CV² of one replica (`reference`: the whole stream's, or Poisson's for a smoother
        stream); set `max_num_seqs` on those no smaller replica dominates, from the requests
        running at that capacity (kept if the capacity holds; the configuration it replaces stays
        a runner-up); then size each candidate bucket by bucket (`split`, planner/plan/split.py;
        None: no demand, the reference capacities as they are). Results in shape order. `also`:
        single configurations to evaluate alongside (cached for `evaluate`, e.g. vLLM's defaults
        for the alternatives)."""
        extra = sorted({c for c in also if c not in self.cache})
        answers = self._map([*shapes, *extra])
        results = [a for a in answers if isinstance(a, ShapeResult)]
        for cfg, a in zip(extra, answers[len(shapes) :], strict=True):
            assert isinstance(a, CapacityPoint)
            self.cache[cfg] = a
        self.questions += len(extra)
        for r in results:
            for p in r.points:
                self.cache.setdefault(p.config, p)
        results = [r if r.best is None else replace(r, best=self.reference(r.best)) for r in results]
        pairable = _pairable(self.ctx)
        survivors, _ = prune_divisible([r.best for r in results if r.best is not None], pairable)
        alive = {p.config for p in survivors}
        todo: dict[int, ReplicaConfig] = {}
        for i, r in enumerate(results):
            if r.best is not None and r.shape.seqs is None and r.best.config in alive:
                low = lowered_seqs(self.ctx, r.best, self._most_running(r.best))
                if low is not None:
                    todo[i] = low
        lowered = self.evaluate([todo[i] for i in sorted(todo)])
        final = list(results)
        for i, p in zip(sorted(todo), lowered, strict=True):
            best = results[i].best
            assert best is not None
            ref = self.reference(p)
            if keep_lowered(best, ref):
                final[i] = replace(results[i], best=ref, runners_up=(best, *results[i].runners_up))
        # Bursty: each bucket sizes at its own per-replica CV², so a smaller replica that serves more
        # at the whole stream's need not everywhere; the MILP's own reduction compares bucket by bucket.
        out = combine(final, lowered, pairable, prune=self.ctx.stats.arrival_cv2 <= 1.0)
        self.questions += out.evaluated - len(lowered)  # `evaluate` counted those
        self.runners_up = out.runners_up
        return out if split is None else self.size(out, split)

    def _most_running(self, best: CapacityPoint) -> float | None:
        """A bursty stream's replicas run at every per-replica CV² from the whole stream's down to
        Poisson's: the requests running at Poisson's capacity, the most of any (None: one CV²)."""
        if self.ctx.stats.arrival_cv2 <= 1.0:
            return None
        poisson = self.line(best, 1.0)
        return poisson.running_requests if poisson.feasible else None

    def reference(self, point: CapacityPoint) -> CapacityPoint:
        """`point` at the per-replica CV² of one replica taking the whole stream (itself, but for
        a stream smoother than Poisson: sized as Poisson, planner/plan/split.py)."""
        return self.line(point, line_cv2(self.ctx.stats.arrival_cv2, 1))

    def line(self, point: CapacityPoint, cv2: float) -> CapacityPoint:
        """`point`'s configuration root-found at per-replica CV² `cv2` (remembered in the capacity
        memo under its configuration's key and `cv2`; `point` itself at its own CV²)."""
        own = self.ctx.stats.arrival_cv2 if point.arrival_cv2 is None else point.arrival_cv2
        if cv2 == own or not point.fits:
            return line_capacity(self.ctx, point, cv2)
        key = line_memo_key(self._key(point.config), cv2)
        self.questions += 1
        got = CAPACITY_MEMO.get(key)
        if got is None:
            got = line_capacity(self.ctx, point, cv2)
            CAPACITY_MEMO.put(key, got)
        assert isinstance(got, CapacityPoint)
        return got

    def sizing(self, point: CapacityPoint, split: Split) -> Sizing:
        """This plan's sizing of `point`'s configuration over `split`'s buckets (made once)."""
        got = self.sizings.get(point.config)
        if got is None:
            got = self.sizings[point.config] = Sizing(self.ctx, point, split, self.line)
        return got

    def split(self, points: Sequence[CapacityPoint], split: Split | None) -> list[CapacityPoint]:
        """`points` (found at the whole stream's CV²) sized bucket by bucket as candidates are, in
        order (None: no demand, as they are)."""
        if split is None:
            return list(points)
        before = sum(s.questions for s in self.sizings.values())
        out = [self.sizing(self.reference(p), split).exact_point() for p in points]
        self.questions += sum(s.questions for s in self.sizings.values()) - before
        return out

    def size(self, found: SearchResult, split: Split) -> SearchResult:
        """The candidates sized bucket by bucket (planner/plan/split.py), in order; the root-finds
        and steady states that took counted in `questions`."""
        before = sum(s.questions for s in self.sizings.values())
        best = tuple(self.sizing(p, split).exact_point() for p in found.best)
        self.questions += sum(s.questions for s in self.sizings.values()) - before
        return replace(found, best=best)

    def evaluate(self, cfgs: Sequence[ReplicaConfig]) -> list[CapacityPoint]:
        """Capacity points for `cfgs`, in order (cached; a configuration with automatic values
        is cached under the values asked)."""
        new = sorted({c for c in cfgs if c not in self.cache})
        if new:
            self.questions += len(new)
            for cfg, point in zip(new, self._map(new), strict=True):
                assert isinstance(point, CapacityPoint)
                self.cache[cfg] = point
        return [self.cache[c] for c in cfgs]


def _pairable(ctx: SearchContext) -> Callable[[int, int], bool]:
    """Which prefill and decode TPs NixlConnector can join for this model."""
    from planner.catalog.models import get_model
    from planner.plan.flags import nixl_pairing_error

    kv_heads = get_model(ctx.model).kv_heads
    return lambda prefill_tp, decode_tp: nixl_pairing_error(prefill_tp, decode_tp, kv_heads) is None


def default_workers() -> int:
    """Two workers (the planner's target machine has two cores), fewer where there are fewer."""
    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))
