"""Answer many capacity questions at once, on the machine's cores.

Worker processes get the plan's SearchContext once (at start), then shapes to search (each a
sequence of screens and root-finds, planner/plan/search.py) or single configurations; results
come back in the order asked, so the plan is the same whatever the worker count. Single
configurations are cached. `workers=1` answers in this process (no fork: what a threaded server
should use).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from types import TracebackType

from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext, evaluate_config
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

# Below this many tasks a batch is answered in-process: starting workers costs more.
MIN_PARALLEL_TASKS = 2
DEFAULT_WORKERS = 2

_CONTEXT: SearchContext | None = None


def _init(ctx: SearchContext) -> None:
    global _CONTEXT
    _CONTEXT = ctx


def _shape(task: Shape | ReplicaConfig) -> ShapeResult | CapacityPoint:
    assert _CONTEXT is not None
    if isinstance(task, Shape):
        return search_shape(_CONTEXT, task)
    return evaluate_config(_CONTEXT, task)


def _config(cfg: ReplicaConfig) -> CapacityPoint:
    assert _CONTEXT is not None
    return evaluate_config(_CONTEXT, cfg)


class CapacityPool:
    """Shape searches and cached `evaluate_config`, optionally on worker processes. Use as a
    context manager."""

    def __init__(self, ctx: SearchContext, workers: int = DEFAULT_WORKERS) -> None:
        self.ctx = ctx
        self.workers = max(1, int(workers))
        self.cache: dict[ReplicaConfig, CapacityPoint] = {}
        self.questions = 0  # root-finds and screens made
        self._executor: Executor | None = None

    def __enter__(self) -> CapacityPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _pool(self) -> Executor:
        if self._executor is None:
            # Forked workers inherit what is imported here: the root-finder's SciPy, once.
            import scipy.optimize  # noqa: F401

            method = "fork" if "fork" in mp.get_all_start_methods() else None
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=mp.get_context(method),
                initializer=_init,
                initargs=(self.ctx,),
            )
        return self._executor

    def _parallel(self, n_tasks: int) -> bool:
        return self.workers > 1 and n_tasks >= MIN_PARALLEL_TASKS

    def search(self, shapes: Sequence[Shape], also: Sequence[ReplicaConfig] = ()) -> SearchResult:
        """Search every shape (in parallel when there are workers), then set `max_num_seqs` on
        the shapes' best configurations that no smaller replica dominates (the others never
        reach the MILP); results in shape order. `also`: single configurations to evaluate
        alongside (cached for `evaluate`, e.g. vLLM's defaults for the alternatives)."""
        extra = sorted({c for c in also if c not in self.cache})
        tasks: list[Shape | ReplicaConfig] = [*shapes, *extra]
        if self._parallel(len(tasks)):
            answers = list(self._pool().map(_shape, tasks, chunksize=1))
        else:
            answers = [
                search_shape(self.ctx, t) if isinstance(t, Shape) else evaluate_config(self.ctx, t)
                for t in tasks
            ]
        results = [a for a in answers if isinstance(a, ShapeResult)]
        for cfg, a in zip(extra, answers[len(shapes) :], strict=True):
            assert isinstance(a, CapacityPoint)
            self.cache[cfg] = a
        self.questions += len(extra)
        for r in results:
            for p in r.points:
                self.cache.setdefault(p.config, p)
        survivors, _ = prune_divisible([r.best for r in results if r.best is not None])
        alive = {p.config for p in survivors}
        todo: dict[int, ReplicaConfig] = {}
        for i, r in enumerate(results):
            if r.best is not None and r.shape.seqs is None and r.best.config in alive:
                low = lowered_seqs(self.ctx, r.best)
                if low is not None:
                    todo[i] = low
        lowered = self.evaluate([todo[i] for i in sorted(todo)])
        final = list(results)
        for i, p in zip(sorted(todo), lowered, strict=True):
            best = results[i].best
            assert best is not None
            if keep_lowered(best, p):
                final[i] = replace(results[i], best=p)
        out = combine(final, lowered)
        self.questions += out.evaluated - len(lowered)  # `evaluate` counted those
        return out

    def evaluate(self, cfgs: Sequence[ReplicaConfig]) -> list[CapacityPoint]:
        """Capacity points for `cfgs`, in order (cached; a configuration with automatic values
        is cached under the values asked)."""
        new = sorted({c for c in cfgs if c not in self.cache})
        if new:
            self.questions += len(new)
            if self._parallel(len(new)):
                points = list(self._pool().map(_config, new, chunksize=1))
            else:
                points = [evaluate_config(self.ctx, c) for c in new]
            for cfg, point in zip(new, points, strict=True):
                self.cache[cfg] = point
        return [self.cache[c] for c in cfgs]


def default_workers() -> int:
    """Two workers (the planner's target machine has two cores), fewer where there are fewer."""
    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))
