"""Which replica configurations to ask the latency model about, and which to keep.

A *shape* is a GPU type x TP x role (x long_prefill_token_threshold). Within a shape every
configuration costs the same, so only the one with the most capacity within the SLOs matters
(the others are dominated: same GPUs, less capacity). Enumerating every budget x `max_num_seqs`
with a root-find each would cost thousands of root-finds; per shape the search is
(docs/plan.md, "Search"):

1. Budgets 512, 1024, ..., 16384 (powers of two), from the one vLLM advises for the role
   (2048 colocated, 8192 for a prefill pool) outwards, `max_num_seqs` at its upper limit (the
   KV-cache limit, at most the budget), so only the budget and the SLOs bind. The first gets a
   capacity root-find; each next one is first *screened*: one steady state at the best capacity
   so far, that rate itself. If it misses the SLOs there, its capacity is below the best's and it
   is dropped (exactly: nothing it could serve is out of the best's reach); otherwise it gets its
   root-find, and any strictly higher capacity becomes the best. A decode pool has no prefill:
   one configuration.
2. Refine the budget around the best b: 3b/4 and 3b/2 (multiples of 256), screened alike.
3. Set `max_num_seqs`: the smallest value of a 16-24-32-48-64-... grid that covers the requests
   running at capacity plus three standard deviations of their number (Poisson, inflated by the
   arrivals' peakedness); the capacity is recomputed with it, so the flags a plan emits are the
   point it modelled. It is kept if the capacity holds (within 0.1%): a lower cap bounds the
   batch, and with it ITL, under bursts.

A user who lists budgets or `max_num_seqs` values gets exactly those (screened, not refined).
A root-find places a capacity within CAPACITY_PRECISION of the edge (the first rate it saw miss is
at most that far above), so two root-found capacities closer than that are a near-tie the search
cannot order: the shape's other feasible configurations within RUNNER_UP_SPAN of its best are its
`runners_up`, re-checked exactly at the MILP's answer (planner/plan/recheck.py).
Across shapes, a replica of m x the GPUs with no more than m x the capacity of a smaller one of
the same GPU type and role is dominated too (m smaller replicas do its job on the same GPUs):
`prune_divisible` drops it before the MILP.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planner import stopping
from planner.costmodel.lora import LoraConfig
from planner.costmodel.profile import Profile
from planner.costmodel.speculative import SpeculativeConfig
from planner.latency.slo_capacity import CAPACITY_PRECISION
from planner.plan.capacity import (
    CapacityPoint,
    ReplicaConfig,
    SearchContext,
    build,
    decode_budget,
    evaluate_config,
    meets_at,
    slo_bound,
)
from planner.schema.kinds import Role
from planner.schema.plan_request import BUDGET_MAX_TOKENS, BUDGET_MIN_TOKENS, COARSE_BUDGETS, CandidateSpace

START_BUDGET = {"colocated": 2048, "prefill": 8192}  # vLLM's advice: chat 2048-4096, throughput 8192+
BUDGET_STEP = 256
KEEP_SEQS_RTOL = 1e-3
# A root-found capacity is the last rate seen to meet the SLOs, the first seen to miss them at most
# CAPACITY_PRECISION above it (tools measured 119 searches: at most 0.99%). A configuration whose
# capacity x (1 + RUNNER_UP_SPAN) does not reach the best's cannot be better; the others can.
RUNNER_UP_SPAN = 1.5 * CAPACITY_PRECISION
MAX_RUNNERS_UP = 8  # per shape, the nearest (every loop a bound)
SEATS_SIGMAS = 3.0
MIN_SEQS = 16


def seqs_grid(upper: int) -> list[int]:
    """16, 24, 32, 48, 64, 96, 128, ... (steps of 1.5x and 4/3x) up to `upper`."""
    out, base = [], MIN_SEQS
    while base <= upper:
        out.append(base)
        if base * 3 // 2 <= upper:
            out.append(base * 3 // 2)
        base *= 2
    return sorted(set(out))


def seqs_for(running: float, arrival_cv2: float, upper: int) -> int:
    """The `max_num_seqs` that covers `running` requests on average plus SEATS_SIGMAS standard
    deviations: the number in service is Poisson for Poisson arrivals, more variable (x the
    peakedness z = 1 + (c_a^2 - 1) n / (1 + n)) for bursty ones. Capped at `upper`."""
    z = max(1.0, 1.0 + (arrival_cv2 - 1.0) * running / (1.0 + running))
    need = running + SEATS_SIGMAS * math.sqrt(z * max(running, 0.0))
    for s in seqs_grid(upper):
        if s >= need:
            return s
    return upper


@dataclass(frozen=True)
class Shape:
    """One GPU type x TP x role (x threshold) and the flags to search: `budgets` / `seqs` None
    = the automatic search."""

    gpu: str
    tensor_parallel_size: int
    role: Role
    long_prefill_token_threshold: int = 0
    budgets: tuple[int, ...] | None = None
    seqs: tuple[int, ...] | None = None
    pipeline_parallel_size: int = 1


@dataclass(frozen=True)
class ShapeResult:
    """`best`: the feasible configuration with the most capacity (None: none is feasible);
    `points`: every root-find made; `screened`: configurations a screen showed to be worse;
    `runners_up`: the other feasible configurations the root-finds' precision cannot rank below
    `best` (nearest first, at most MAX_RUNNERS_UP)."""

    shape: Shape
    best: CapacityPoint | None
    points: tuple[CapacityPoint, ...]
    screened: int
    runners_up: tuple[CapacityPoint, ...] = ()


def _order(budgets: Sequence[int], start: int) -> list[int]:
    """From the budget nearest `start` outwards (nearer first, smaller first on ties)."""
    return sorted(budgets, key=lambda b: (abs(math.log2(b / start)), b))


def _refined(b: int, tried: set[int]) -> list[int]:
    out = []
    for v in (b * 3 // 4, b * 3 // 2):
        v = max(BUDGET_STEP, round(v / BUDGET_STEP) * BUDGET_STEP)
        if BUDGET_MIN_TOKENS <= v <= BUDGET_MAX_TOKENS and v not in tried:
            out.append(v)
    return out


class _ShapeSearch:
    def __init__(self, ctx: SearchContext, shape: Shape) -> None:
        self.ctx, self.shape = ctx, shape
        self.points: list[CapacityPoint] = []
        self.best: CapacityPoint | None = None
        self.screened = 0

    def consider(self, cfg: ReplicaConfig) -> None:
        stopping.check()  # a candidate costs milliseconds: a stopped server job ends here
        b = self.best
        built = build(self.ctx, cfg)  # shared by the screen and the root-find
        if b is not None and not meets_at(self.ctx, cfg, b.requests_per_s, built):
            self.screened += 1
            return
        p = evaluate_config(self.ctx, cfg, built)
        self.points.append(p)
        if p.feasible and (b is None or _better(p, b)):
            self.best = p

    def run(self) -> ShapeResult:
        sh = self.shape
        seqs: Sequence[int] = sh.seqs or (0,)
        if sh.role == "decode":
            for s in seqs:
                self.consider(
                    ReplicaConfig(
                        sh.gpu,
                        sh.tensor_parallel_size,
                        "decode",
                        0 if s == 0 else decode_budget(s),
                        s,
                        pipeline_parallel_size=sh.pipeline_parallel_size,
                    )
                )
        elif sh.budgets is not None:
            for bud in _order(sh.budgets, START_BUDGET[sh.role]):
                for s in seqs:
                    if s <= bud and sh.long_prefill_token_threshold < bud:
                        self.consider(self._cfg(bud, s))
        else:
            self._climb(seqs)
        return ShapeResult(
            sh, self.best, tuple(self.points), self.screened, runners_up(self.best, self.points)
        )

    def _climb(self, seqs: Sequence[int]) -> None:
        """From the start budget, doubling (then halving) while a budget beats the best so far,
        then 3b/4 and 3b/2 around the best b. Capacity against budget rises while TTFT binds
        (bigger chunks) and falls once ITL or memory binds (longer mixed steps, less KV), so a
        climb over the grid finds the grid's best."""
        sh = self.shape
        grid = [b for b in COARSE_BUDGETS if b > sh.long_prefill_token_threshold]
        if not grid:
            return
        start = min(grid, key=lambda b: (abs(math.log2(b / START_BUDGET[sh.role])), b))
        i0 = grid.index(start)
        self._try(start, seqs)
        for step in (1, -1):
            i = i0 + step
            while 0 <= i < len(grid):
                before = self.best
                self._try(grid[i], seqs)
                if self.best is before and before is not None:
                    break
                i += step
        if self.best is not None:
            tried = {p.config.max_num_batched_tokens for p in self.points}
            for bud in _refined(self.best.config.max_num_batched_tokens, tried):
                if sh.long_prefill_token_threshold < bud:
                    self._try(bud, seqs)

    def _try(self, budget: int, seqs: Sequence[int]) -> None:
        for s in seqs:
            if s <= budget:
                self.consider(self._cfg(budget, s))

    def _cfg(self, budget: int, seqs: int) -> ReplicaConfig:
        sh = self.shape
        return ReplicaConfig(
            sh.gpu,
            sh.tensor_parallel_size,
            sh.role,
            budget,
            seqs,
            sh.long_prefill_token_threshold,
            sh.pipeline_parallel_size,
        )


def _better(p: CapacityPoint, q: CapacityPoint) -> bool:
    """`p` has strictly more capacity than the incumbent `q` (a near-tie either way is kept as a
    runner-up and settled exactly where it matters, at the MILP's answer)."""
    return p.requests_per_s > q.requests_per_s


def could_beat(p: CapacityPoint, best: CapacityPoint) -> bool:
    """`p`'s capacity is not provably below `best`'s: the rate its root-find first saw miss, at most
    RUNNER_UP_SPAN above it, is above the rate `best` was seen to meet. A capacity a stability
    limit sets (no SLO binds) is exact: nothing above it is stable."""
    if not slo_bound(p):
        return p.requests_per_s > best.requests_per_s
    return p.requests_per_s * (1.0 + RUNNER_UP_SPAN) > best.requests_per_s


def runners_up(best: CapacityPoint | None, points: Sequence[CapacityPoint]) -> tuple[CapacityPoint, ...]:
    """The feasible configurations other than `best` that could beat it (nearest first; ties by
    configuration), at most MAX_RUNNERS_UP."""
    if best is None:
        return ()
    near = [p for p in points if p.feasible and p.config != best.config and could_beat(p, best)]
    near.sort(key=lambda p: (-p.requests_per_s, p.config))
    return tuple(near[:MAX_RUNNERS_UP])


def search_shape(ctx: SearchContext, shape: Shape) -> ShapeResult:
    return _ShapeSearch(ctx, shape).run()


def lowered_seqs(
    ctx: SearchContext, best: CapacityPoint, running: float | None = None
) -> ReplicaConfig | None:
    """The configuration with `max_num_seqs` set from the requests running at capacity (`running`,
    else `best`'s), as variable as the arrivals `best` was sized with make them (None: already
    there). A bursty stream's replicas run at many per-replica CV²s (planner/plan/split.py): the
    caller passes the most running at any of them (at Poisson's capacity, the highest) and
    `best` at the whole stream's CV² (the most variable), a bound for every replica count."""
    upper = best.config.max_num_seqs
    cv2 = ctx.stats.arrival_cv2 if best.arrival_cv2 is None else best.arrival_cv2
    s = seqs_for(
        best.running_requests if running is None else max(running, best.running_requests), cv2, upper
    )
    if s >= upper:
        return None
    cfg = replace(best.config, max_num_seqs=s)
    if cfg.role == "decode":
        cfg = replace(cfg, max_num_batched_tokens=decode_budget(s))
    return cfg


def keep_lowered(best: CapacityPoint, lowered: CapacityPoint) -> bool:
    return lowered.feasible and lowered.requests_per_s >= best.requests_per_s * (1.0 - KEEP_SEQS_RTOL)


def unfit_shapes(
    model: str,
    space: CandidateSpace,
    gpus: Sequence[str],
    profile: Callable[[str], Profile] | None = None,
    max_model_len: int | None = None,
    lora: LoraConfig | None = None,
    speculative: SpeculativeConfig | None = None,
) -> list[tuple[str, int, int, str]]:
    """(gpu, tp, pp, reason) for the GPU x TP x PP shapes vLLM cannot run the model on at all (the cheap
    feasibility check at the smallest budget and `max_num_seqs` the search would use, with each
    GPU's `profile` so the memory budget is the one its deployments resolve with, and a KV cache
    that holds one `max_model_len` sequence; `speculative`: the proposer beside the weights)."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.feasibility import feasibility
    from planner.costmodel.speculative import draft_shape

    spec = get_model(model, "model")
    draft = draft_shape(speculative, "speculative_decoding.draft_model")
    budget = min(space.max_num_batched_tokens or (BUDGET_MIN_TOKENS,))
    seqs = min((*(space.max_num_seqs or ()), MIN_SEQS, budget))
    out = []
    for gpu in gpus:
        g = get_gpu(gpu)
        for tp in space.tensor_parallel_sizes:
            for pp in space.pipeline_parallel_sizes:
                why = feasibility(
                    spec,
                    g,
                    tp,
                    space.weight_dtype,
                    space.kv_dtype,
                    budget,
                    seqs,
                    space.gpu_memory_utilization,
                    None if profile is None else profile(gpu),
                    max_model_len,
                    lora,
                    pp=pp,
                    speculative=speculative,
                    draft=draft,
                    checkpoint=space.weight_checkpoints.get(space.weight_dtype),
                )
                if why:
                    out.append((gpu, tp, pp, why[0].reason))
    return out


def shapes_of(
    space: CandidateSpace,
    gpus: Sequence[str],
    roles: Sequence[Role],
    unfit: Sequence[tuple[str, int, int, str]] = (),
) -> list[Shape]:
    skip = {(g, tp, pp) for g, tp, pp, _ in unfit}
    out = []
    for gpu in gpus:
        for tp in space.tensor_parallel_sizes:
            for pp in space.pipeline_parallel_sizes:
                if (gpu, tp, pp) in skip:
                    continue
                for role in roles if pp == 1 else [r for r in roles if r == "colocated"]:
                    # PP replicas serve colocated: prefill/decode pools stay one stage each
                    # (docs/multi-node.md)
                    thresholds = space.long_prefill_token_thresholds if role == "colocated" else (0,)
                    for t in thresholds:
                        out.append(
                            Shape(gpu, tp, role, t, space.max_num_batched_tokens, space.max_num_seqs, pp)
                        )
    return out


def prune_divisible(
    points: Sequence[CapacityPoint], pairable: Callable[[int, int], bool] | None = None
) -> tuple[list[CapacityPoint], int]:
    """Drop a configuration when one of the same GPU type and role, on a divisor m of its GPUs,
    has at least 1/m of its capacity: m of those serve as much on the same GPUs, at the same
    price and inventory, in every bucket. Ties keep the smaller replica. `pairable(prefill_tp,
    decode_tp)`: which pools the KV connector can join (planner.plan.flags.nixl_pairing_error);
    then a prefill or decode replica is dropped only for one that pairs with every TP of the
    other role it pairs with (a smaller decode TP may not pair with the plan's prefill pool).
    Returns (kept, dropped)."""
    partners = _partners(points, pairable)
    kept = []
    for p in points:
        c = p.config
        beaten = False
        for q in points:
            d = q.config
            if q is p or (d.gpu, d.role) != (c.gpu, c.role):
                continue
            tp_p, tp_q = c.gpus, d.gpus
            if tp_q <= tp_p and tp_p % tp_q == 0 and partners(d) >= partners(c):
                m = tp_p // tp_q
                if q.requests_per_s * m >= p.requests_per_s and (
                    tp_q < tp_p or (q.requests_per_s, d) > (p.requests_per_s, c)
                ):
                    beaten = True
                    break
        if not beaten:
            kept.append(p)
    return kept, len(points) - len(kept)


def _partners(
    points: Sequence[CapacityPoint], pairable: Callable[[int, int], bool] | None
) -> Callable[[ReplicaConfig], frozenset[int]]:
    """The TPs of the other role among `points` a configuration pairs with (none for colocated
    ones, or without a pairing rule)."""
    tps = {
        role: sorted({p.config.tensor_parallel_size for p in points if p.config.role == role})
        for role in ("prefill", "decode")
    }

    def of(c: ReplicaConfig) -> frozenset[int]:
        t = c.tensor_parallel_size
        if pairable is None or c.role == "colocated":
            return frozenset()
        if c.role == "prefill":
            return frozenset(d for d in tps["decode"] if pairable(t, d))
        return frozenset(u for u in tps["prefill"] if pairable(u, t))

    return of


@dataclass(frozen=True)
class SearchResult:
    """`best`: the candidates (per shape the best, minus the divisibly dominated), sorted by id;
    `points`: every root-find made, sorted; `unfit`: (gpu, tp, pp, reason) for shapes whose weights
    do not fit at any budget; `dominated`: configurations dropped as dominated (screened out,
    beaten within their shape, or beaten by a smaller replica of the same GPU type)."""

    best: tuple[CapacityPoint, ...]
    points: tuple[CapacityPoint, ...]
    unfit: tuple[tuple[str, int, int, str], ...]
    dominated: int = 0
    evaluated: int = 0  # root-finds and screens
    # Configurations a tolerance could have ranked below a candidate: the shapes' runners-up, the
    # configurations a lowered `max_num_seqs` replaced, those `prune_divisible` dropped (sorted).
    runners_up: tuple[CapacityPoint, ...] = ()


def combine(
    results: Sequence[ShapeResult],
    extra: Sequence[CapacityPoint] = (),
    pairable: Callable[[int, int], bool] | None = None,
    prune: bool = True,
) -> SearchResult:
    """The search's answer from the shapes' results (`best` already final, e.g. with lowered
    `max_num_seqs`); `extra`: further root-finds made (counted and listed); `pairable` as for
    `prune_divisible`; `prune`: drop the divisibly dominated (`prune_divisible`: exact where one
    capacity serves every bucket)."""
    points = sorted(
        {p.config: p for p in [*(p for r in results for p in r.points), *extra]}.values(),
        key=lambda p: p.config,
    )
    best = [r.best for r in results if r.best is not None]
    kept, dropped = prune_divisible(best, pairable) if prune else (best, 0)
    gone = [p for p in best if p not in kept]
    runners = {p.config: p for r in results for p in r.runners_up}
    runners.update((p.config, p) for p in gone)
    for p in kept:
        runners.pop(p.config, None)
    feasible_points = sum(1 for p in points if p.feasible)
    screened = sum(r.screened for r in results)
    unfit: dict[tuple[str, int, int], str] = {}
    for r in results:
        if r.points and all(not p.fits for p in r.points):
            sh = r.shape
            unfit.setdefault((sh.gpu, sh.tensor_parallel_size, sh.pipeline_parallel_size), r.points[0].reason)
    return SearchResult(
        best=tuple(sorted(kept, key=lambda p: p.config.id)),
        points=tuple(points),
        unfit=tuple((g, tp, pp, why) for (g, tp, pp), why in sorted(unfit.items())),
        dominated=screened + (feasible_points - len(best)) + dropped,
        evaluated=len(points) + screened,
        runners_up=tuple(runners[c] for c in sorted(runners)),
    )
