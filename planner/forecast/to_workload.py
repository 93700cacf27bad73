"""A forecast as the workload `capplan plan` reads (planner.workload's schema): buckets of the
forecast's width at one quantile's rates, burstiness from the history's gap CV², lengths from
the history's per-bucket lengths where it has them.

Burstiness: the workload's gamma shape k = 1 / CV², with CV² the median of the history's
per-bucket gap CV² (a median, so a few bursty minutes do not set the whole horizon); 1
(Poisson) where the history has no timestamps, said in the notes. Lengths: where every
length-bearing bucket carries histograms on the same bounds (a shorter one a prefix), their summed counts as a
`histogram` (requests above the last finite bound are dropped and counted in the notes);
else the request-weighted mean as a `constant`; none where the history has no lengths.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from planner.forecast.base import Forecast
from planner.history.series import BucketLengths, HistorySeries, LengthHistogram
from planner.workload import MAX_BURSTINESS, MAX_TOKENS, MIN_BURSTINESS


def burstiness(series: HistorySeries, notes: list[str]) -> float:
    values = [v for v in (series.gap_cv2 or ()) if v is not None]
    if not values:
        notes.append("burstiness 1 (Poisson): the history has no arrival timestamps")
        return 1.0
    cv2 = float(np.median(values))
    if cv2 <= 0.0:
        return MAX_BURSTINESS
    return float(min(MAX_BURSTINESS, max(MIN_BURSTINESS, 1.0 / cv2)))


def _histogram(hists: list[LengthHistogram], what: str, notes: list[str]) -> dict[str, Any] | None:
    # a request log's buckets end their bounds at their own longest request (vLLM's 1-2-5
    # series, cut): each must be a prefix of the longest, and above its last bound it holds all
    bounds = max((h.upper_tokens for h in hists), key=len)
    if any(h.upper_tokens != bounds[: len(h.upper_tokens)] for h in hists):
        return None
    cum = np.sum([h.counts + (h.counts[-1],) * (len(bounds) - len(h.counts)) for h in hists], axis=0)
    # the bins' upper edges: finite bounds above 1 token (lengths are >= 1, so requests at a
    # bound <= 1 fall in the first bin [1, next bound)), capped at the workload's MAX_TOKENS
    upper = [i for i, b in enumerate(bounds) if 1.0 < b <= MAX_TOKENS]
    if not upper:
        return None
    kept_cum = [float(cum[i]) for i in upper]
    dropped = float(cum[-1]) - kept_cum[-1]
    if dropped > 0:
        notes.append(
            f"{what}: {dropped:g} requests above the last bound kept ({bounds[upper[-1]]:g}) dropped"
        )
    edges = [1.0] + [float(bounds[i]) for i in upper]
    kept = [round(c) for c in np.diff(np.concatenate(([0.0], kept_cum)))]
    if sum(kept) == 0 or any(b <= a for a, b in itertools.pairwise(edges)):
        return None
    return {"histogram": {"edges": edges, "counts": kept}}


def lengths(series: HistorySeries, notes: list[str]) -> dict[str, Any]:
    """`input_tokens` / `output_tokens` in the workload's form, or {} where the history has none."""
    if series.lengths is None:
        return {}
    pairs = [
        (float(r), bl)
        for r, bl in zip(series.requests, series.lengths, strict=True)
        if r is not None and r > 0 and bl is not None
    ]
    if not pairs:
        return {}
    out: dict[str, Any] = {}
    for key, mean_attr, hist_attr in (
        ("input_tokens", "prompt_tokens_mean", "prompt_histogram"),
        ("output_tokens", "output_tokens_mean", "output_histogram"),
    ):
        hists = [getattr(bl, hist_attr) for _, bl in pairs]
        form = _histogram(hists, key, notes) if all(h is not None for h in hists) else None
        if form is None:
            form = {"constant": _weighted_mean(pairs, mean_attr)}
        out[key] = form
    return out


def _weighted_mean(pairs: list[tuple[float, BucketLengths]], attr: str) -> int:
    weights = np.array([w for w, _ in pairs])
    means = np.array([getattr(bl, attr) for _, bl in pairs])
    return int(min(MAX_TOKENS, max(1, round(float(np.dot(weights, means) / weights.sum())))))


def workload_block(
    fc: Forecast, quantile: float, series: HistorySeries, name: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The `workload:` mapping for the forecast at `quantile` and the notes it made. Rates are
    rounded to 6 significant digits so the YAML is short and the same bytes every run."""
    notes: list[str] = []
    rates = fc.quantiles_per_s[quantile]
    buckets = [{"duration_s": fc.bucket_s, "requests_per_s": float(f"{r:.6g}")} for r in rates]
    block: dict[str, Any] = {
        "name": name or f"{fc.method} p{quantile * 100:g} forecast",
        "arrivals": {"burstiness": float(f"{burstiness(series, notes):.6g}"), "buckets": buckets},
    }
    block.update(lengths(series, notes))
    return block, notes
