"""Why no plan exists, and the nearest change that makes one: an SLO below what the hardware can
do at all (the idle floors), a model that fits no candidate, bursts that queue at any rate, or
the inventory caps. Each answer names the constraint (a request field or a MILP constraint)."""

from __future__ import annotations

from collections.abc import Sequence

from planner.plan.capacity import CapacityPoint, ReplicaConfig
from planner.schema.plan_report import Infeasibility


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def _where(p: CapacityPoint) -> str:
    c = p.config
    tp = f" TP{c.tensor_parallel_size}" if c.tensor_parallel_size > 1 else ""
    pp = f" PP{c.pipeline_parallel_size}" if c.pipeline_parallel_size > 1 else ""
    return f"{c.gpu}{tp}{pp}"


def _lowest(points: Sequence[CapacityPoint], attr: str) -> CapacityPoint | None:
    """The point of the lowest `attr` floor (over every TP, budget and role given): a GPU's
    floor is its best configuration's, never the first one asked."""
    have = [p for p in points if p.fits and getattr(p, attr) is not None]
    if not have:
        return None
    return min(have, key=lambda p: (getattr(p, attr), p.config))


# (metric, CapacityPoint floor attribute, the roles whose floor it is)
FLOORS = (
    ("TTFT", "floor_ttft_p99_s", ("colocated", "prefill")),
    ("ITL", "floor_itl_p99_s", ("colocated", "decode")),
    ("E2E", "floor_e2e_p99_s", ("colocated",)),
)


def floor_of(points: Sequence[CapacityPoint], metric: str) -> CapacityPoint | None:
    """The point of the lowest `metric` floor among the roles that floor belongs to."""
    for m, attr, roles in FLOORS:
        if m == metric:
            return _lowest([p for p in points if p.config.role in roles], attr)
    raise ValueError(metric)


def below_floor(targets_s: dict[str, float | None], points: Sequence[CapacityPoint]) -> str | None:
    """Why `points` (one GPU's configurations, or vLLM's defaults on it) cannot meet a target at
    any load: the first target below their lowest floor, quoted with the configuration that
    reaches it (the best over every TP and role asked), e.g. "ITL p99 target 3 ms is below the
    3.702 ms floor of its best configuration (TP8 decode pool)". None: no target is below."""
    for metric, attr, _ in FLOORS:
        target = targets_s.get(metric)
        best = floor_of(points, metric) if target is not None else None
        if best is None or target is None or getattr(best, attr) <= target:
            continue
        c = best.config
        role = "colocated" if c.role == "colocated" else f"{c.role} pool"
        return (
            f"{metric} p99 target {target * 1e3:.4g} ms is below the {_ms(getattr(best, attr))} floor of its "
            f"best configuration (TP{c.tensor_parallel_size} {role}; an idle replica)"
        )
    return None


def _floor_answer(
    metric: str,
    target_s: float,
    attr: str,
    model: str,
    points: Sequence[CapacityPoint],
    others: Sequence[CapacityPoint],
) -> Infeasibility | None:
    """`metric` (TTFT, ITL) target below every candidate's idle floor; `others` are GPUs outside
    the candidate set, named when one of them reaches the target."""
    best = _lowest(points, attr)
    if best is None or getattr(best, attr) <= target_s:
        return None
    floor = getattr(best, attr)
    field = f"slo.{metric.lower()}_p99_ms"  # ttft, itl, e2e
    gpus = sorted({p.config.gpu for p in points if p.fits})
    scope = f"on {_where(best)}" if len(gpus) == 1 else f"on every candidate GPU (lowest: {_where(best)})"
    reason = f"{metric} p99 of {target_s * 1e3:.4g} ms is below the {_ms(floor)} floor of {model} {scope}"
    alt = _lowest([p for p in others if p.config.gpu not in gpus], attr)
    relax = f"{field} >= {floor * 1e3:.4g}"
    if alt is not None and getattr(alt, attr) < floor:
        tp = alt.config.tensor_parallel_size
        reason += f"; {alt.config.gpu} reaches {_ms(getattr(alt, attr))}" + (f" (TP{tp})" if tp > 1 else "")
        if getattr(alt, attr) <= target_s:
            relax += f", or add {alt.config.gpu} to candidates.gpus"
    return Infeasibility(constraint=field, reason=reason, relaxation=relax)


def no_candidate(
    model: str,
    ttft_p99_s: float | None,
    itl_p99_s: float | None,
    e2e_p99_s: float | None,
    points: Sequence[CapacityPoint],
    others: Sequence[CapacityPoint],
    unfit: Sequence[tuple[str, int, int, str]],
    disaggregation: str,
) -> Infeasibility:
    """No configuration meets the SLOs on its own: say which target or limit is to blame."""
    if not any(p.fits for p in points):
        shapes = "; ".join(f"{g} TP{tp}{f' PP{pp}' if pp > 1 else ''}: {why}" for g, tp, pp, why in unfit[:4])
        more = f" (and {len(unfit) - 4} more)" if len(unfit) > 4 else ""
        return Infeasibility(
            constraint="candidates",
            reason=f"{model} fits no candidate GPU x TP: {shapes}{more}",
            relaxation="allow larger tensor_parallel_sizes, GPUs with more memory, or fp8 weights "
            "(candidates.weight_dtype: fp8)",
        )
    if ttft_p99_s is not None:
        ans = _floor_answer(
            "TTFT", ttft_p99_s, "floor_ttft_p99_s", model,
            [p for p in points if p.config.role != "decode"],
            [p for p in others if p.config.role != "decode"],
        )  # fmt: skip
        if ans is not None:
            return ans
    if itl_p99_s is not None:
        ans = _floor_answer(
            "ITL", itl_p99_s, "floor_itl_p99_s", model,
            [p for p in points if p.config.role != "prefill"],
            [p for p in others if p.config.role != "prefill"],
        )  # fmt: skip
        if ans is not None:
            return ans
    if e2e_p99_s is not None:
        ans = _floor_answer(
            "E2E", e2e_p99_s, "floor_e2e_p99_s", model,
            [p for p in points if p.config.role == "colocated"],
            [p for p in others if p.config.role == "colocated"],
        )  # fmt: skip
        if ans is not None:
            return ans
    # Each target is above the best configuration's floor here: a configuration's own floor is
    # not the reason, so quote the reasons of those whose floors meet every target (if any).
    targets = {"TTFT": ttft_p99_s, "ITL": itl_p99_s, "E2E": e2e_p99_s}
    clear = [p for p in points if p.fits and p.reason and below_floor(targets, [p]) is None]
    reasons = sorted({p.reason for p in clear or points if p.fits and p.reason})
    reason = reasons[0] if reasons else "no configuration meets the targets"
    relax = "relax the SLO targets"
    if disaggregation == "never" and itl_p99_s is not None and ttft_p99_s is not None:
        relax += ", or allow disaggregation (candidates.disaggregation: auto): separate prefill and decode "
        relax += "pools keep prompt chunks out of the decode steps"
    if "burst" in reason:
        relax = "relax the TTFT target: bursts queue however low the rate"
    more = f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else ""
    return Infeasibility(
        constraint="slo", reason=f"no configuration meets the SLOs: {reason}{more}", relaxation=relax
    )


def floor_probes(gpus: Sequence[str], tps: Sequence[int], budget: int) -> list[ReplicaConfig]:
    """Configurations whose floors say what other GPUs could reach (largest budget: the lowest
    TTFT floor; a decode pool: the lowest ITL floor)."""
    out = []
    for g in gpus:
        for tp in tps:
            out.append(ReplicaConfig(g, tp, "colocated", budget, 0))
            out.append(ReplicaConfig(g, tp, "decode", 0, 0))
    return out


def inventory_answer(gpu: str, needed: int, cap: int, bucket: int | None, constraint: str) -> Infeasibility:
    when = "at peak" if bucket is None else f"in bucket {bucket}"
    return Infeasibility(
        constraint=constraint,
        reason=f"needs {needed} {gpu} {when}, inventory allows {cap}",
        relaxation=f"inventory.{gpu} >= {needed}, or more GPU types in candidates.gpus "
        "(with candidates.mixed_gpu_types: true to combine them)",
    )
