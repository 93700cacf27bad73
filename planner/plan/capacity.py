"""One replica configuration -> its capacity within the SLOs: the planner's only door into the
latency model (planner/latency). Everything here is plain, picklable data so worker processes
can answer it.

A replica serves in one of three roles: `colocated` (prefill and decode on one engine, both
SLOs), `prefill` (the prefill pool of a disaggregated deployment: TTFT, including the KV
transfer to the decode pool) or `decode` (the decode pool: ITL). The capacity is requests/s per
replica within the SLOs: it depends on the workload's lengths, burstiness and prefix-cache hits,
never on its rate, so it is computed once per configuration and the MILP sizes every bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from planner.catalog.models import Dtype
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype
from planner.costmodel.lora import LoraConfig
from planner.costmodel.profile import Profile
from planner.costmodel.speculative import SpeculativeConfig, expected_tokens_per_step
from planner.deployment import MAX_NUM_SEQS, Deployment, Disaggregation, ResolvedDeployment
from planner.errors import InvalidInput
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.latency.engine import HUGE, Point
from planner.latency.slo_capacity import (
    CAPACITY_PRECISION,
    CAPACITY_RTOL,
    CAPACITY_XTOL,
    NEAR_ZERO_DECADES,
    pool_capacity,
)
from planner.schema.kinds import Role
from planner.vllm_defaults import BLOCK_SIZE_TOKENS
from solvers.rootfind import last_met

ROLES: tuple[Role, ...] = ("colocated", "prefill", "decode")
DECODE_MIN_BUDGET = 512
PROBE_BUDGET = 2048  # a decode pool's KV limit is first probed at this budget


@dataclass(frozen=True, order=True)
class ReplicaConfig:
    """What one replica runs: the GPU, TP and the vLLM scheduler flags of its role."""

    gpu: str
    tensor_parallel_size: int
    role: Role
    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int = 0
    # Pipeline stages (planner.costmodel.multinode): the replica is TP x PP GPUs
    pipeline_parallel_size: int = 1

    @property
    def gpus(self) -> int:
        """GPUs one replica holds (what it is billed and sized by)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def id(self) -> str:
        """A stable name (MILP candidate id, report key)."""
        t = f"/t{self.long_prefill_token_threshold}" if self.long_prefill_token_threshold else ""
        pp = f"/pp{self.pipeline_parallel_size}" if self.pipeline_parallel_size > 1 else ""
        return (
            f"{self.gpu}/tp{self.tensor_parallel_size}{pp}/{self.role}"
            f"/b{self.max_num_batched_tokens}/s{self.max_num_seqs}{t}"
        )


@dataclass(frozen=True)
class SearchContext:
    """Everything a capacity question needs besides the configuration, fixed for one plan."""

    model: str
    stats: WorkloadStats
    ttft_p99_s: float | None
    itl_p99_s: float | None
    e2e_p99_s: float | None
    profiles: tuple[tuple[str, Profile], ...]  # (gpu, profile), sorted
    weight_dtype: WeightDtype
    kv_dtype: Dtype
    gpu_memory_utilization: float
    kv_transfer_bandwidth_bytes_per_s: float
    kv_transfer_latency_s: float
    # vLLM's --max-model-len of every replica (planner.plan.flags.plan_max_model_len): a
    # configuration whose KV cache cannot hold one such sequence does not fit.
    max_model_len: int
    lora: LoraConfig | None = None  # vLLM --enable-lora on every replica (None: off)
    weight_group_size: int = DEFAULT_GROUP_SIZE  # AWQ/GPTQ checkpoints' group (candidates.weight_group_size)
    # vLLM --speculative-config on every replica, its k fixed (None: off; the plan tries each
    # candidates.num_speculative_tokens: planner.plan.pipeline)
    speculative: SpeculativeConfig | None = None
    # the pre-quantized checkpoint every replica serves (candidates.weight_checkpoints at the
    # plan's weight format; None: the model itself): its unquantized modules at bf16
    checkpoint: str | None = None
    # vLLM --enable-expert-parallel on every replica of TP > 1 (EP size = TP; a MoE model's plan
    # with candidates.expert_parallel), at this routing skew; None: experts split over TP
    expert_parallel_skew: float | None = None

    def expert_parallel(self, cfg: ReplicaConfig) -> bool:
        """EP is on for `cfg` (vLLM turns it on only where the EP group has 2 GPUs or more)."""
        return self.expert_parallel_skew is not None and cfg.tensor_parallel_size > 1

    def profile(self, gpu: str) -> Profile:
        for name, prof in self.profiles:
            if name == gpu:
                return prof
        raise KeyError(gpu)

    def deployment(
        self, cfg: ReplicaConfig, replicas: int = 1, prefill_replicas: int = 1, decode_replicas: int = 1
    ) -> Deployment:
        """The deployment of `cfg`'s shape: colocated with `replicas`, or (prefill and decode
        roles) disaggregated with the given pool sizes, both pools of this shape."""
        dis = None
        if cfg.role != "colocated":
            dis = Disaggregation(
                prefill_replicas=prefill_replicas,
                decode_replicas=decode_replicas,
                kv_transfer_bandwidth_bytes_per_s=self.kv_transfer_bandwidth_bytes_per_s,
                kv_transfer_latency_s=self.kv_transfer_latency_s,
            )
        spec = Deployment(
            model=self.model,
            gpu=cfg.gpu,
            tp=cfg.tensor_parallel_size,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            long_prefill_token_threshold=cfg.long_prefill_token_threshold,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
            weight_group_size=self.weight_group_size,
            disaggregated=dis,
            lora=self.lora,
            pipeline_parallel_size=cfg.pipeline_parallel_size,
            expert_parallel=self.expert_parallel(cfg),
            routing_skew=(self.expert_parallel_skew or 1.0) if self.expert_parallel(cfg) else 1.0,
            speculative_decoding=self.speculative,
            checkpoint=self.checkpoint,
        )
        # `replicas` counts colocated replicas only (the pools' sizes are in `disaggregated`).
        return spec if dis is not None else spec.model_copy(update={"replicas": replicas})

    def resolve(self, cfg: ReplicaConfig) -> ResolvedDeployment:
        return _resolved(self, cfg)

    def role_slo(self, role: Role) -> Slo | None:
        """The targets a pool of this role answers for (None: only stability limits it)."""
        ttft = self.ttft_p99_s if role != "decode" else None
        itl = self.itl_p99_s if role != "prefill" else None
        if ttft is None and itl is None:
            return None
        return Slo(ttft_p99_s=ttft, itl_p99_s=itl)


@lru_cache(maxsize=256)
def _resolved(ctx: SearchContext, cfg: ReplicaConfig) -> ResolvedDeployment:
    """Resolved deployments are immutable: the KV-limit probe and the configuration it settles on
    are often the same one."""
    return ctx.deployment(cfg).resolve(ctx.profile(cfg.gpu))


@dataclass(frozen=True)
class CapacityPoint:
    """A configuration's answer. `requests_per_s` is per replica within the role's SLOs (0 when
    infeasible; then `reason` says why). At that rate: `running_requests` (seats in use),
    `decode_concurrency`, the p99s. Floors are the idle p99s (what no load can beat)."""

    config: ReplicaConfig
    fits: bool  # the model fits the GPUs with these flags (else `reason`)
    feasible: bool
    requests_per_s: float
    binding_limit: str
    reason: str
    running_requests: float
    decode_concurrency: float
    ttft_p99_s: float | None
    itl_p99_s: float | None
    max_stable_requests_per_s: float
    kv_cache_tokens: int
    kv_limit_seqs: int
    floor_ttft_p99_s: float | None
    floor_itl_p99_s: float | None
    floor_e2e_p99_s: float | None = None  # colocated: idle TTFT p99 + the p99 answer's idle decode steps
    # The per-replica arrival CV² the capacity was sized with (planner/plan/split.py); None: the
    # whole stream's, as the shape search sizes it.
    arrival_cv2: float | None = None
    # A bursty stream's capacity per forecast bucket, need / replicas there (planner/plan/split.py:
    # each replica sized at its share of the bucket); `requests_per_s` is then the peak bucket's.
    # None: `requests_per_s` in every bucket.
    capacity_by_bucket_per_s: tuple[float, ...] | None = None


SLO_LIMITS = frozenset({"ttft", "itl", "e2e"})


def slo_bound(p: CapacityPoint) -> bool:
    """An SLO sets `p`'s capacity (a root-find's edge, within its precision); otherwise a stability
    limit does, exactly (nothing above it is stable)."""
    return p.feasible and p.binding_limit in SLO_LIMITS


def kv_limit_seqs(resolved: ResolvedDeployment, stats: WorkloadStats) -> int:
    """Sequences of the mean decode context (plus half a block) the KV cache holds: above it
    vLLM preempts, so `max_num_seqs` need not go higher; nor above MAX_NUM_SEQS, a deployment's
    range (requests of a few tokens fit more in the cache)."""
    per_seq = stats.decode_context + BLOCK_SIZE_TOKENS / 2
    return max(1, min(MAX_NUM_SEQS, int(resolved.kv.kv_cache_tokens // per_seq)))


def kv_limit_at(ctx: SearchContext, cfg: ReplicaConfig) -> int:
    return kv_limit_seqs(ctx.resolve(cfg), ctx.stats)


def concrete(ctx: SearchContext, cfg: ReplicaConfig) -> ReplicaConfig:
    """Fill the automatic values: `max_num_seqs` 0 = the KV limit (at most the budget: vLLM
    requires budget >= seqs); a decode pool's budget 0 = its `max_num_seqs` rounded up to 256
    tokens, at least 512 (a decode step schedules one token per sequence, and a smaller budget
    leaves more memory for KV)."""
    if cfg.role == "decode" and cfg.max_num_batched_tokens == 0:
        seqs = cfg.max_num_seqs
        if seqs == 0:  # the KV limit at a small budget, then at the budget that limit implies
            first = kv_limit_at(ctx, replace(cfg, max_num_batched_tokens=PROBE_BUDGET, max_num_seqs=1024))
            second = kv_limit_at(
                ctx, replace(cfg, max_num_batched_tokens=decode_budget(first), max_num_seqs=first)
            )
            seqs = min(first, second)
        return replace(cfg, max_num_batched_tokens=decode_budget(seqs), max_num_seqs=seqs)
    if cfg.max_num_seqs == 0:
        budget = cfg.max_num_batched_tokens
        limit = kv_limit_at(ctx, replace(cfg, max_num_seqs=min(budget, 1024)))
        cfg = replace(cfg, max_num_seqs=max(1, min(budget, limit)))
    return cfg


def decode_budget(seqs: int) -> int:
    return max(DECODE_MIN_BUDGET, -(-seqs // 256) * 256)


def unfit(cfg: ReplicaConfig, reason: str) -> CapacityPoint:
    return CapacityPoint(
        config=cfg,
        fits=False,
        feasible=False,
        requests_per_s=0.0,
        binding_limit="memory",
        reason=reason,
        running_requests=0.0,
        decode_concurrency=0.0,
        ttft_p99_s=None,
        itl_p99_s=None,
        max_stable_requests_per_s=0.0,
        kv_cache_tokens=0,
        kv_limit_seqs=0,
        floor_ttft_p99_s=None,
        floor_itl_p99_s=None,
    )


@dataclass(frozen=True, eq=False)
class Built:
    """A configuration made concrete, resolved and modelled (or why it does not fit): built
    once, asked several questions (a screen, then a root-find)."""

    config: ReplicaConfig
    resolved: ResolvedDeployment | None
    model: LatencyModel | None
    reason: str


def build(ctx: SearchContext, cfg: ReplicaConfig) -> Built:
    try:
        cfg = concrete(ctx, cfg)
        resolved = ctx.resolve(cfg)
    except InvalidInput as exc:
        return Built(cfg, None, None, exc.reason)
    return Built(cfg, resolved, LatencyModel(resolved, ctx.stats), "")


def evaluate_config(ctx: SearchContext, cfg: ReplicaConfig, built: Built | None = None) -> CapacityPoint:
    """The capacity of one replica configuration within its role's SLOs (root-finding in the
    latency model). A configuration that does not fit is an answer (`fits` False), not an error.
    `built`: the configuration already built (by a screen)."""
    b = built if built is not None else build(ctx, cfg)
    if b.model is None or b.resolved is None:
        return unfit(b.config, b.reason)
    cfg, resolved, model = b.config, b.resolved, b.model
    role = cfg.role
    engine = model.engines.get(role)
    if engine is None:  # a decode pool when every answer is one token: nothing to decode
        return unfit(cfg, "every answer is one token: a decode pool has nothing to do")
    zero = engine.zero_point()
    boundary = engine.boundary()
    slo = ctx.role_slo(role)
    kv_tokens = int(resolved.kv.kv_cache_tokens)
    limit = kv_limit_seqs(resolved, ctx.stats)
    binding: str
    at: Point | None
    if slo is None:
        rate, feasible, binding, reason = boundary.lam_max, boundary.lam_max > 0, boundary.binding, ""
        at = None
    else:
        # One pool's root-find (LatencyModel.capacity would also size the other pool of a
        # disaggregated model, which this role does not need).
        pool = pool_capacity(role, engine, slo)
        rate, feasible, binding, reason = (
            pool.requests_per_s_per_replica,
            pool.feasible,
            pool.binding_limit,
            pool.reason,
        )
        at = pool.at_capacity
    if feasible and ctx.e2e_p99_s is not None and role == "colocated":
        rate, at, binding, feasible, reason = _within_e2e(ctx, model, rate, at, binding)
    if not (feasible and rate > 0 and math.isfinite(rate)):
        feasible, rate = False, 0.0
        if not reason:
            reason = f"no positive rate is stable (limit: {binding})"
    if at is None and feasible:
        s = engine.solve(rate * (1.0 - 1e-9))
        at = None if s is None else engine.point(s[0])
    return CapacityPoint(
        config=cfg,
        fits=True,
        feasible=feasible,
        requests_per_s=rate,
        binding_limit=binding,
        reason=reason,
        running_requests=0.0 if at is None else at.running_requests,
        decode_concurrency=0.0 if at is None or role == "prefill" else at.n,
        ttft_p99_s=None if at is None else at.ttft_p99_s,
        itl_p99_s=None if at is None else at.itl_p99_s,
        max_stable_requests_per_s=boundary.lam_max,
        kv_cache_tokens=kv_tokens,
        kv_limit_seqs=limit,
        floor_ttft_p99_s=zero.ttft_p99_s if engine.has_prefill else None,
        floor_itl_p99_s=zero.itl_p99_s if engine.has_decode else None,
        floor_e2e_p99_s=e2e_estimate_s(ctx, zero.ttft_p99_s, zero.mean_step_s)
        if role == "colocated"
        else None,
    )


def meets_at(ctx: SearchContext, cfg: ReplicaConfig, rate: float, built: Built | None = None) -> bool:
    """Does `cfg` meet its role's SLOs at `rate` requests/s per replica? A cheap screen (one
    steady state instead of a root-find): False means its capacity is below `rate`."""
    b = built if built is not None else build(ctx, cfg)
    if b.model is None:
        return False
    cfg, model = b.config, b.model
    engine = model.engines.get(cfg.role)
    if engine is None:
        return False
    solved = engine.solve(rate)
    if solved is None:
        return False
    st = solved[0]
    ttft = itl = None
    if ctx.ttft_p99_s is not None and engine.has_prefill:
        ttft = engine.ttft_p99_s(st)
        if ttft > ctx.ttft_p99_s:
            return False
    if ctx.itl_p99_s is not None and engine.has_decode:
        itl = engine.itl_p99_s(st)
        if itl > ctx.itl_p99_s:
            return False
    if ctx.e2e_p99_s is not None and cfg.role == "colocated":
        ttft = engine.ttft_p99_s(st) if ttft is None else ttft
        return e2e_estimate_s(ctx, ttft, st.t_step) <= ctx.e2e_p99_s
    return True


def e2e_estimate_s(ctx: SearchContext, ttft_p99_s: float | None, mean_step_s: float | None) -> float:
    """E2E p99 ~ TTFT p99 + (p99 answer - 1) x the mean step a decoder sees: over many steps the
    inter-token gaps average out, so the long answers' total is close to its mean. Speculative
    decoding: E tokens a step, so E times fewer steps (planner.costmodel.speculative)."""
    steps = max(ctx.stats.output_p99_tokens - 1.0, 0.0)
    if ctx.speculative is not None and ctx.speculative.num_speculative_tokens is not None:
        steps /= expected_tokens_per_step(ctx.speculative.alpha, ctx.speculative.num_speculative_tokens)
    return (ttft_p99_s or 0.0) + steps * (mean_step_s or 0.0)


def _within_e2e(
    ctx: SearchContext, model: LatencyModel, rate: float, at: Point | None, binding: str
) -> tuple[float, Point | None, str, bool, str]:
    """Lower a colocated capacity until the E2E estimate meets its target: the edge of the rates
    that meet it (E2E rises with load along the stable branch), found as the SLO capacity's is
    (`solvers.rootfind.last_met`: Brent to 1% of the answer; it was 30 bisections, ~4x the
    steady states for a precision no plan reads)."""
    assert ctx.e2e_p99_s is not None
    engine = model.engines["colocated"]
    target = ctx.e2e_p99_s
    points: dict[float, Point | None] = {}

    def f(lam: float) -> float:
        s = engine.solve(lam)
        p = None if s is None else engine.point(s[0])
        points[lam] = p
        v = math.inf if p is None else e2e_estimate_s(ctx, p.ttft_p99_s, p.mean_step_s)
        return min(v / target - 1.0, HUGE) if math.isfinite(v) else HUGE

    top = rate * (1.0 - 1e-9)
    f_top = f(top)
    if f_top <= 0.0:
        return rate, points[top], binding, True, ""
    z = engine.zero_point()
    floor = e2e_estimate_s(ctx, z.ttft_p99_s, z.mean_step_s)
    if floor > target:
        return (
            0.0,
            None,
            "e2e",
            False,
            f"E2E p99 target {target * 1e3:.4g} ms is below the {floor * 1e3:.4g} ms floor "
            "(idle TTFT of the p99 prompt + the p99 answer's decode steps)",
        )
    edge = last_met(
        f,
        0.0,
        top,
        f_lo=floor / target - 1.0,
        f_hi=f_top,
        xtol=CAPACITY_XTOL * top,
        rtol=CAPACITY_RTOL,
        precision=CAPACITY_PRECISION,
        decades=NEAR_ZERO_DECADES if engine.stats.arrival_cv2 <= 1.0 else 0,
    )
    if edge.met <= 0:
        return 0.0, None, "e2e", False, "no positive rate meets the E2E p99 target"
    return edge.met, points[edge.met], "e2e", True, ""
