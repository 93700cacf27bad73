"""Workload model: length distributions, gamma arrivals, request sampling, field-named errors."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import yaml

from planner.errors import InvalidInput
from planner.validation import loc_to_path, validate
from planner.workload import Arrivals, Histogram, LengthDistribution, RateBucket, Workload

# The seed article's example output-length distribution.
ARTICLE_PAIRS = [(100, 0.5), (300, 0.3), (800, 0.15), (2000, 0.05)]


def _workload(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "chat",
        "arrivals": {"requests_per_s": 5.0, "burstiness": 1.0},
        "input_tokens": {"percentiles": {"p50": 800, "p90": 2000, "p99": 4000}},
        "output_tokens": {"pairs": [list(p) for p in ARTICLE_PAIRS]},
    }
    data.update(overrides)
    return data


def _field_of(data: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as exc:
        validate(Workload, data)
    return exc.value


# ---- length distributions ----------------------------------------------------------------------


def test_article_pairs_mean_and_expected_max() -> None:
    d = LengthDistribution.from_pairs(ARTICLE_PAIRS)
    assert d.mean() == pytest.approx(360.0)
    assert round(d.expected_max(8)) == 1119
    assert round(d.expected_max(32)) == 1767
    assert d.expected_max(1) == pytest.approx(360.0)
    assert d.second_moment() == pytest.approx(100**2 * 0.5 + 300**2 * 0.3 + 800**2 * 0.15 + 2000**2 * 0.05)


def test_expected_max_discrete_matches_enumeration() -> None:
    d = LengthDistribution.from_pairs(ARTICLE_PAIRS)
    for n in (2, 3):
        brute = sum(
            max(x for x, _ in combo) * math.prod(p for _, p in combo)
            for combo in itertools.product(ARTICLE_PAIRS, repeat=n)
        )
        assert d.expected_max(n) == pytest.approx(brute, rel=1e-12)


def test_pairs_quantile_cdf_support_sample() -> None:
    d = LengthDistribution.from_pairs(ARTICLE_PAIRS)
    assert d.quantile(0.0) == 100
    assert d.quantile(0.5) == 100
    assert d.quantile(0.5000001) == 300
    assert d.quantile(0.99) == 2000
    assert d.cdf(300) == pytest.approx(0.8)
    assert d.cdf(299.9) == pytest.approx(0.5)
    v, p = d.support()
    assert v.tolist() == [100, 300, 800, 2000]
    assert p.tolist() == pytest.approx([0.5, 0.3, 0.15, 0.05])
    x = d.sample(np.random.default_rng(0), 100_000)
    assert x.dtype == np.int64
    assert set(np.unique(x).tolist()) == {100, 300, 800, 2000}
    assert x.mean() == pytest.approx(360.0, rel=0.02)


def test_duplicate_pairs_are_merged() -> None:
    d = LengthDistribution.from_pairs([(100, 0.25), (100, 0.25), (200, 0.5)])
    assert d.support()[0].tolist() == [100, 200]
    assert d.mean() == pytest.approx(150.0)


def test_constant_and_bare_int() -> None:
    d = LengthDistribution.fixed(256)
    assert (d.mean(), d.quantile(0.99), d.expected_max(1000), d.variance()) == (256, 256, 256, 0)
    assert validate(LengthDistribution, 256, root="x") == d
    assert (d.sample(np.random.default_rng(1), 5) == 256).all()


def test_percentiles_piecewise_linear_quantile() -> None:
    d = LengthDistribution.from_percentiles({"p50": 800, "p90": 2000, "p99": 4000})
    assert d.quantile(0.5) == pytest.approx(800)
    assert d.quantile(0.9) == pytest.approx(2000)
    assert d.quantile(0.99) == pytest.approx(4000)
    assert d.quantile(0.7) == pytest.approx(1400)  # linear between p50 and p90
    assert d.cdf(1400) == pytest.approx(0.7)
    # Tails: linear extrapolation, floored at 1 token below; p100 continues the p90-p99 slope.
    assert d.quantile(0.0) == pytest.approx(1.0)
    assert d.quantile(1.0) == pytest.approx(4000 + 2000 / 0.09 * 0.01)
    _check_against_monte_carlo(d)


def test_percentile_keys_from_yaml_numbers_and_aliases() -> None:
    d = validate(LengthDistribution, yaml.safe_load("percentiles: {min: 10, 50: 100, max: 1000}"), root="x")
    assert d.quantile(0.0) == pytest.approx(10)
    assert d.quantile(0.5) == pytest.approx(100)
    assert d.quantile(1.0) == pytest.approx(1000)


def test_histogram_uniform_within_bins() -> None:
    d = LengthDistribution(histogram=Histogram(edges=(1, 10, 100), counts=(1, 3)))
    assert d.mean() == pytest.approx(0.25 * 5.5 + 0.75 * 55)
    assert d.quantile(0.25) == pytest.approx(10)
    assert d.quantile(0.625) == pytest.approx(55)
    assert d.second_moment() == pytest.approx(0.25 * (1 + 10 + 100) / 3 + 0.75 * (100 + 1000 + 10000) / 3)
    _check_against_monte_carlo(d)


def _check_against_monte_carlo(d: LengthDistribution) -> None:
    x = d.sample(np.random.default_rng(7), 400_000).astype(float)
    assert x.mean() == pytest.approx(d.mean(), rel=0.01)
    for n in (4, 16):
        emp = x[: (x.size // n) * n].reshape(-1, n).max(axis=1).mean()
        assert emp == pytest.approx(d.expected_max(n), rel=0.01)


def test_samples_are_exact_empirical() -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(1, 5000, size=20_000)
    d = LengthDistribution.from_samples(raw)
    assert d.kind == "samples"
    assert d.mean() == pytest.approx(raw.mean())
    assert d.second_moment() == pytest.approx((raw.astype(float) ** 2).mean())
    assert d.quantile(1.0) == raw.max()
    assert d.quantile(0.0) == raw.min()
    # Exact discrete formula over the empirical distribution.
    vals, counts = np.unique(raw, return_counts=True)
    cum = np.cumsum(counts) / raw.size
    n = 32
    expected = float(np.dot(vals, cum**n - np.concatenate(([0.0], cum[:-1])) ** n))
    assert d.expected_max(n) == pytest.approx(expected)


def test_support_is_compact_and_keeps_the_mean() -> None:
    raw = np.random.default_rng(4).lognormal(6.0, 1.0, size=50_000).astype(np.int64) + 1
    for d in (
        LengthDistribution.from_samples(raw),
        LengthDistribution.from_samples(raw, bins=32),
        LengthDistribution.from_percentiles({"p50": 800, "p90": 2000, "p99": 4000}),
    ):
        v, p = d.support()
        assert 1 < v.size <= 64
        assert np.all(np.diff(v) > 0)
        assert p.sum() == pytest.approx(1.0)
        assert float(v @ p) == pytest.approx(d.mean(), rel=1e-9)
        # Good enough for analytic E[max] at batch sizes.
        cum = np.cumsum(p)
        for n in (8, 256):
            approx = float(np.dot(v, cum**n - np.concatenate(([0.0], cum[:-1])) ** n))
            assert approx == pytest.approx(d.expected_max(n), rel=0.02)
    assert LengthDistribution.from_samples(raw).support(max_points=8)[0].size <= 8


def test_binned_samples_close_to_exact() -> None:
    raw = np.random.default_rng(5).lognormal(5.0, 1.2, size=30_000).astype(np.int64) + 1
    exact = LengthDistribution.from_samples(raw)
    binned = LengthDistribution.from_samples(raw, bins=64)
    assert binned.kind == "histogram"
    assert len(binned.histogram.edges) <= 65  # type: ignore[union-attr]
    assert binned.mean() == pytest.approx(exact.mean(), rel=0.02)
    assert binned.quantile(0.99) == pytest.approx(exact.quantile(0.99), rel=0.02)


def test_distribution_round_trips_through_dump() -> None:
    for d in (
        LengthDistribution.from_pairs(ARTICLE_PAIRS),
        LengthDistribution.from_percentiles({"p50": 800, "p99": 4000}),
        LengthDistribution(histogram=Histogram(edges=(1, 10, 100), weights=(0.2, 0.8))),
        LengthDistribution.fixed(3),
        LengthDistribution.from_samples([1, 2, 2, 5]),
    ):
        again = validate(LengthDistribution, d.model_dump(exclude_none=True), root="x")
        assert again == d
        assert again.mean() == pytest.approx(d.mean())


# ---- arrivals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0.25, 1.0, 4.0])
def test_gamma_gaps_cv2_and_rate(k: float) -> None:
    a = Arrivals(requests_per_s=8.0, burstiness=k)
    t = a.sample_times(np.random.default_rng(11), count=200_000)
    gaps = np.diff(t)
    cv2 = gaps.var() / gaps.mean() ** 2
    assert cv2 == pytest.approx(1.0 / k, rel=0.05)
    assert t.size / t[-1] == pytest.approx(8.0, rel=0.02)
    assert a.cv2 == pytest.approx(1.0 / k)


def test_horizon_mode_rate_and_bounds() -> None:
    a = Arrivals(requests_per_s=20.0, burstiness=0.5)
    t = a.sample_times(np.random.default_rng(2), horizon_s=5000.0)
    assert t.size / 5000.0 == pytest.approx(20.0, rel=0.03)
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < 5000.0
    assert a.sample_times(np.random.default_rng(2), horizon_s=0.0).size == 0


def test_same_seed_same_times_and_count_horizon_agree() -> None:
    a = Arrivals(requests_per_s=3.0, burstiness=0.3)
    t1 = a.sample_times(np.random.default_rng(42), horizon_s=1000.0)
    t2 = a.sample_times(np.random.default_rng(42), horizon_s=1000.0)
    assert np.array_equal(t1, t2)
    t3 = a.sample_times(np.random.default_rng(42), count=t1.size)
    assert np.allclose(t1, t3)
    assert not np.array_equal(t1[:100], a.sample_times(np.random.default_rng(43), count=100))


def test_bucketed_rates_are_honoured() -> None:
    a = Arrivals.model_validate(
        {
            "buckets": [
                {"duration_s": 100, "requests_per_s": 10},
                {"duration_s": 50, "requests_per_s": 0},
                {"duration_s": 100, "requests_per_s": 2},
            ],
            "burstiness": 0.5,
        }
    )
    assert a.mean_requests_per_s == pytest.approx((1000 + 200) / 250)
    assert a.peak_requests_per_s == 10
    assert a.period_s == 250
    assert a.rate_at(120.0) == 0 and a.rate_at(260.0) == 10
    cycles = 300
    t = a.sample_times(np.random.default_rng(5), horizon_s=250.0 * cycles)
    phase = t % 250.0
    assert (phase < 100).sum() / (100 * cycles) == pytest.approx(10, rel=0.03)
    assert ((phase >= 100) & (phase < 150)).sum() == 0
    assert (phase >= 150).sum() / (100 * cycles) == pytest.approx(2, rel=0.05)


def test_poisson_bucket_counts_are_poisson() -> None:
    # k = 1 with buckets: a non-homogeneous Poisson process, so counts in a bucket have var = mean.
    a = Arrivals(
        buckets=(RateBucket(duration_s=10, requests_per_s=1), RateBucket(duration_s=10, requests_per_s=5))
    )
    t = a.sample_times(np.random.default_rng(9), horizon_s=20.0 * 5000)
    counts = np.bincount((t // 20).astype(int), weights=((t % 20) >= 10).astype(float), minlength=5000)
    assert counts.mean() == pytest.approx(50, rel=0.02)
    assert counts.var() == pytest.approx(50, rel=0.08)


# ---- workloads ---------------------------------------------------------------------------------


def test_workload_from_yaml_and_sampling_deterministic() -> None:
    text = """
    name: chat
    arrivals: {requests_per_s: 4, burstiness: 0.5}
    input_tokens: {percentiles: {p50: 800, p90: 2000, p99: 4000}}
    output_tokens: {pairs: [[100, .5], [300, .3], [800, .15], [2000, .05]]}
    prefix_cache_hit_fraction: 0.25
    """
    w = Workload.from_mapping(yaml.safe_load(text))
    assert w.prefix_cache_hit_fraction == 0.25
    r1 = w.sample_requests(seed=123, count=5000)
    r2 = w.sample_requests(seed=123, count=5000)
    assert len(r1) == 5000
    for a, b in (
        (r1.arrival_s, r2.arrival_s),
        (r1.prompt_tokens, r2.prompt_tokens),
        (r1.output_tokens, r2.output_tokens),
    ):
        assert np.array_equal(a, b)
    r3 = w.sample_requests(seed=124, count=5000)
    assert not np.array_equal(r1.output_tokens, r3.output_tokens)
    assert r1.output_tokens.mean() == pytest.approx(360, rel=0.05)
    assert r1.prompt_tokens.min() >= 1
    first = next(iter(r1))
    assert isinstance(first[0], float) and isinstance(first[1], int) and isinstance(first[2], int)
    rh = w.sample_requests(seed=1, horizon_s=600.0)
    assert rh.arrival_s.max() < 600.0
    assert len(rh) == pytest.approx(2400, rel=0.15)
    with pytest.raises(InvalidInput):
        w.sample_requests(seed=1)


# ---- bad input names the field ------------------------------------------------------------------


def test_probabilities_not_summing_to_one() -> None:
    err = _field_of(_workload(output_tokens={"pairs": [[100, 0.5], [300, 0.3], [800, 0.15]]}))
    assert err.field == "workload.output_tokens.pairs"
    assert "0.95" in err.reason


def test_bad_pair_probability_names_the_item() -> None:
    err = _field_of(_workload(output_tokens={"pairs": [[100, 0.5], [300, 0.5], [800, 1.5]]}))
    assert err.field == "workload.output_tokens.pairs[2].probability"
    err = _field_of(_workload(output_tokens={"pairs": [[100, 0.5], [300, 0.5], [800, float("nan")]]}))
    assert err.field == "workload.output_tokens.pairs[2].probability"
    err = _field_of(_workload(output_tokens={"pairs": [{"tokens": 0, "probability": 1.0}]}))
    assert err.field == "workload.output_tokens.pairs[0].tokens"


def test_negative_rate() -> None:
    assert _field_of(_workload(arrivals={"requests_per_s": -1})).field == "workload.arrivals.requests_per_s"
    err = _field_of(
        _workload(
            arrivals={
                "buckets": [{"duration_s": 60, "requests_per_s": 1}, {"duration_s": 60, "requests_per_s": -2}]
            }
        )
    )
    assert err.field == "workload.arrivals.buckets[1].requests_per_s"
    assert (
        _field_of(_workload(arrivals={"requests_per_s": 1, "burstiness": 0})).field
        == "workload.arrivals.burstiness"
    )
    assert _field_of(_workload(arrivals={"burstiness": 1})).field == "workload.arrivals"
    assert _field_of(_workload(arrivals={"buckets": []})).field == "workload.arrivals.buckets"


@pytest.mark.parametrize(
    ("dist", "field"),
    [
        ({"pairs": []}, "workload.input_tokens.pairs"),
        ({"samples": []}, "workload.input_tokens.samples"),
        ({}, "workload.input_tokens"),
        ({"samples": [3, 0, 4]}, "workload.input_tokens.samples[1]"),
        ({"samples": [3, -1]}, "workload.input_tokens.samples[1]"),
        ({"constant": 0}, "workload.input_tokens.constant"),
        ({"constant": 5, "samples": [5]}, "workload.input_tokens"),
        ({"bogus": 5}, "workload.input_tokens.bogus"),
        ({"histogram": {"edges": [1, 10], "counts": [1, 2]}}, "workload.input_tokens.histogram"),
        ({"histogram": {"edges": [10, 1], "counts": [1]}}, "workload.input_tokens.histogram.edges"),
        ({"histogram": {"edges": [0, 10], "counts": [1]}}, "workload.input_tokens.histogram.edges"),
        ({"percentiles": {"p50": float("nan"), "p90": 10}}, "workload.input_tokens.percentiles.p50"),
    ],
)
def test_bad_distribution_names_the_field(dist: dict[str, Any], field: str) -> None:
    assert _field_of(_workload(input_tokens=dist)).field == field


def test_empty_distribution_reason() -> None:
    err = _field_of(_workload(input_tokens={"pairs": []}))
    assert "empty" in err.reason


def test_non_monotone_percentiles() -> None:
    err = _field_of(_workload(input_tokens={"percentiles": {"p50": 800, "p90": 700, "p99": 4000}}))
    assert err.field == "workload.input_tokens.percentiles"
    assert "p90" in err.reason and "monotone" in err.reason
    err = _field_of(_workload(input_tokens={"percentiles": {"p50": 800, "p150": 900}}))
    assert err.field == "workload.input_tokens.percentiles" and "p150" in err.reason


def test_other_workload_fields() -> None:
    assert _field_of(_workload(prefix_cache_hit_fraction=1.0)).field == "workload.prefix_cache_hit_fraction"
    assert _field_of(_workload(extra=1)).field == "workload.extra"
    data = _workload()
    del data["arrivals"]
    assert _field_of(data).field == "workload.arrivals"


def test_method_arguments_are_checked() -> None:
    d = LengthDistribution.fixed(3)
    with pytest.raises(InvalidInput):
        d.expected_max(0)
    with pytest.raises(InvalidInput):
        d.quantile(1.5)
    with pytest.raises(InvalidInput):
        Arrivals(requests_per_s=1).sample_times(np.random.default_rng(0))


def test_loc_to_path() -> None:
    assert loc_to_path("workload", ("output_tokens", "pairs", 2, "probability")) == (
        "workload.output_tokens.pairs[2].probability"
    )
    assert loc_to_path("", ("a", 0)) == "a[0]"
    assert loc_to_path("", ()) == "(root)"


def test_constructors_raise_invalid_input() -> None:
    with pytest.raises(InvalidInput) as exc:
        LengthDistribution.from_pairs([(100, 0.5), (0, 0.5)])
    assert exc.value.field == "pairs[1].tokens"
    with pytest.raises(InvalidInput) as exc:
        LengthDistribution.from_samples([3.0, 4.5])
    assert exc.value.field == "samples[1]"
    with pytest.raises(InvalidInput):
        LengthDistribution.fixed(0)
    one = LengthDistribution.from_samples([7, 7, 7], bins=4)
    assert one.mean() == pytest.approx(7.0)
    assert (one.sample(np.random.default_rng(0), 100) == 7).all()


# ---- ranges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "limit"),
    [
        ({"arrivals": {"requests_per_s": 1e7}}, "workload.arrivals.requests_per_s", "1000000"),
        ({"arrivals": {"requests_per_s": 1e-9}}, "workload.arrivals.requests_per_s", "0.0000001"),
        ({"arrivals": {"requests_per_s": 5, "burstiness": 1e-5}}, "workload.arrivals.burstiness", "0.001"),
        ({"arrivals": {"requests_per_s": 5, "burstiness": 1e9}}, "workload.arrivals.burstiness", "1000000"),
        ({"arrivals": {"buckets": [{"duration_s": 1e8, "requests_per_s": 1}]}}, "workload.arrivals.buckets[0].duration_s", "10000000"),
        ({"arrivals": {"buckets": [{"duration_s": 1e-6, "requests_per_s": 1}]}}, "workload.arrivals.buckets[0].duration_s", "0.001"),
        ({"arrivals": {"buckets": [{"duration_s": 60, "requests_per_s": 2e6}]}}, "workload.arrivals.buckets[0].requests_per_s", "1000000"),
        ({"arrivals": {"buckets": [{"duration_s": 60, "requests_per_s": 1e-12}]}}, "workload.arrivals.buckets", "1e-07"),
        ({"arrivals": {"buckets": [{"duration_s": 1, "requests_per_s": 1}] * 100_001}}, "workload.arrivals.buckets", "100000"),
        ({"input_tokens": {"constant": 20_000_000}}, "workload.input_tokens.constant", "10000000"),
        ({"input_tokens": {"pairs": [[20_000_000, 1.0]]}}, "workload.input_tokens.pairs[0].tokens", "10000000"),
        ({"input_tokens": {"percentiles": {"p50": 10, "p99": 1e30}}}, "workload.input_tokens.percentiles.p99", "10000000"),
        ({"input_tokens": {"samples": [5, 10**12]}}, "workload.input_tokens.samples[1]", "10000000"),
        ({"input_tokens": {"samples": [5] * 1_000_001}}, "workload.input_tokens.samples", "1000000"),
        ({"input_tokens": {"histogram": {"edges": [1, 1e9], "counts": [3]}}}, "workload.input_tokens.histogram.edges[1]", "10000000"),
        ({"input_tokens": {"histogram": {"edges": [1, 10], "weights": [1e300]}}}, "workload.input_tokens.histogram.weights[0]", "1000000000000000"),
        ({"prefix_cache_hit_fraction": 1.0}, "workload.prefix_cache_hit_fraction", "1"),
    ],
)  # fmt: skip
def test_values_outside_their_range_name_the_field_and_the_limit(
    overrides: dict[str, Any], field: str, limit: str
) -> None:
    err = _field_of(_workload(**overrides))
    assert err.field == field
    assert limit in err.reason, err.reason


def test_sampling_sizes_are_capped_naming_the_argument() -> None:
    wl = validate(Workload, _workload())
    with pytest.raises(InvalidInput, match="at most 10,000,000") as exc:
        wl.sample_requests(0, count=10_000_001)
    assert exc.value.field == "count"
    with pytest.raises(InvalidInput, match="at most 1e\\+07 s") as exc:
        wl.sample_requests(0, horizon_s=2e7)
    assert exc.value.field == "horizon_s"
    fast = validate(Workload, _workload(arrivals={"requests_per_s": 1e6}))
    with pytest.raises(InvalidInput, match="expects 100,000,000 arrivals") as exc:
        fast.sample_requests(0, horizon_s=100.0)
    assert exc.value.field == "horizon_s"
    with pytest.raises(InvalidInput) as exc:
        wl.sample_requests(-1, count=3)
    assert exc.value.field == "seed"


def test_chunked_sampling_is_the_same_sample() -> None:
    """`request_chunks` (what lets a simulation hold a chunk at a time) draws exactly the
    requests `sample_requests` does, for counts and horizons, bursty and bucketed arrivals."""
    cases = [
        _workload(arrivals={"requests_per_s": 7.0, "burstiness": 0.05}),
        _workload(arrivals={"buckets": [{"duration_s": 30, "requests_per_s": 4}, {"duration_s": 10, "requests_per_s": 0}]}),
    ]  # fmt: skip
    for data in cases:
        wl = validate(Workload, data)
        for kw in ({"count": 5000}, {"horizon_s": 900.0}):
            whole = wl.sample_requests(11, **kw)
            parts = list(wl.request_chunks(11, chunk_size=333, **kw))
            assert all(len(p) <= 333 for p in parts)
            for col in ("arrival_s", "prompt_tokens", "output_tokens"):
                assert np.array_equal(np.concatenate([getattr(p, col) for p in parts]), getattr(whole, col))
