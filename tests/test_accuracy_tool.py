"""tools/accuracy.py on a small configuration: its core functions run and give finite errors, the
markdown renders, and the analytic model stays within pinned bounds of the simulator on a few
cells where the model used to miss badly. The full table (docs/accuracy.md) is not regenerated
in CI."""

from __future__ import annotations

import math

import pytest
from tool_helpers import load_tool

acc = load_tool("accuracy.py", "accuracy_tool")


def test_cells_on_a_few_hundred_requests() -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 2048)
    r = case.resolve()
    syn = acc.synthetic_cell(case, 0.5, trace, count=300, resolved=r)
    const = acc.synthetic_cell(case, 0.5, trace, count=300, resolved=r, lengths="constant", seeds=(0,))
    rep = acc.trace_cell(case, 0.5, trace, count=300, resolved=r)
    for cell in (syn, const, rep):
        assert cell.requests == 300
        for k in acc.METRICS:
            assert math.isfinite(cell.error(k))
            assert cell.analytic[k] > 0 and cell.simulated[k] > 0
    assert math.isfinite(syn.seed_spread) and math.isnan(const.seed_spread)
    assert syn.seed_ranges is not None and const.seed_ranges is None
    for k in acc.METRICS:  # the table's figure is the runs' median, inside their range
        lo, hi = syn.seed_ranges[k]
        assert lo <= syn.simulated[k] <= hi
    each = [acc.synthetic_cell(case, 0.5, trace, count=300, resolved=r, seeds=(s,)) for s in (0, 1, 2)]
    three = acc.synthetic_cell(case, 0.5, trace, count=300, resolved=r, seeds=(0, 1, 2))
    for k in acc.METRICS:
        figures = sorted(c.simulated[k] for c in each)
        assert three.simulated[k] == figures[1]
        assert three.seed_ranges is not None and three.seed_ranges[k] == (figures[0], figures[2])
    assert abs(syn.rate_rps / syn.capacity_rps - 0.5) < 1e-9
    cap = acc.capacity_check(case, trace, count=400, resolved=r)
    assert math.isfinite(cap.error) and cap.simulated_rps > 0
    split = acc.wait_split(case, 0.5, trace, count=300, resolved=r)
    assert split.sim_residual_mean_s >= 0 and 0 <= split.sim_queued_fraction <= 1
    assert 0 <= split.model_queued_fraction <= 1
    state = acc.state_check(case, 0.5, trace, "constant", count=300, resolved=r)
    assert state.sim_decodes > 0 and state.sim_step_s > 0 and 0 < state.sim_mixed < 1
    assert 0 < state.model_mixed < 1 and state.sim_running >= state.sim_decodes
    assert state.model_prompt_cost_s > 0 and state.sim_prompt_cost_s > 0
    assert state.model_count_sd > 0 and state.sim_count_sd > 0 and math.isfinite(state.count_sd_error)
    report = acc.Report([syn, const, rep], [cap], [split], 300, states=(state,))
    text = acc.render(report, "python3 tools/accuracy.py")
    assert "## The steady state beside the latencies" in text
    assert "| Qwen3-8B h100-sxm theoretical, budget 2048 | constant | 50% |" in text
    assert "| Qwen3-8B h100-sxm theoretical, budget 2048 | 50% |" in text
    assert "### Constant lengths (every prompt 1,155 tokens" in text
    assert text.startswith("# Accuracy") and "python3 tools/accuracy.py" in text


def test_budget_below_default_seats_caps_max_num_seqs() -> None:
    """vLLM refuses max_num_batched_tokens below max_num_seqs: budget 512 runs 512 seats."""
    r = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 512).resolve()
    assert r.max_num_seqs == 512


# Cells where the model before the step/company rework missed by far more than these bounds
# (docs/accuracy.md of 2026-11-30, 30,000 requests): budget 8192 at 60% load, spread lengths,
# TTFT p50 +132%; constant lengths at 30% load, ITL p99 +126% (budget 8192) and +43% (2048).
# 8,000 requests per cell (seed 0): the simulated p99s move by up to ~10% between seeds at this
# count (docs/accuracy.md's seed column at 40,000, then one other seed), so the bound is 25%.
PINNED = [
    (8192, "spread", 0.6),
    (8192, "constant", 0.3),
    (2048, "constant", 0.3),
]


@pytest.mark.parametrize(("budget", "lengths", "load"), PINNED)
def test_model_within_bounds_of_the_simulator(budget: int, lengths: str, load: float) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", budget)
    cell = acc.synthetic_cell(case, load, trace, count=8_000, lengths=lengths, seeds=(0,))
    for k in acc.METRICS:
        assert abs(cell.error(k)) <= 0.25, f"{k}: {cell.error(k):+.1%}"


def test_bursty_itl_p99_within_bounds_of_the_simulator() -> None:
    """Gamma gaps of CV² 20 (k = 0.05), budget 8192 at 30% load: ITL p99 falls on the full-budget
    steps a burst's prompts fill, seen by the decoders in them (more than the mean: the burst
    arrives to more decodes and prefills its first prompts before its last). The model before
    counting steps by their decodes read 55.7 ms against the simulator's 138.5 ms (-60%, 60,000
    requests; docs/accuracy.md's bursty table); 20,000 requests (seed 0) here, bound 25%."""
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 8192)
    cell = acc.synthetic_cell(case, 0.3, trace, count=20_000, seeds=(0,), burstiness=0.05)
    assert cell.source == "bursty" and cell.burstiness == 0.05
    for k in ("itl_p50", "itl_p99"):
        assert abs(cell.error(k)) <= 0.25, f"{k}: {cell.error(k):+.1%}"


# Cells near capacity where the queue's wait was far too short before the model charged full
# steps as the FIFO stream of waiting prompts (their chunks' prefixes) and stretched the wait for
# the decodes a backlog accumulates (`Engine._queue_wait`): TTFT p99 -32.5% (H100 theoretical,
# budget 512, spread lengths, 85% load) and -25.5% (H200 calibrated, budget 512, constant
# lengths, 90%) in docs/accuracy.md of 2026-12-01 (60,000 requests). The same 60,000 requests
# here (seed 0: the simulated p99 moves 6-14% between seeds at this count), bound 20%.
NEAR_CAPACITY = [
    ("h100-sxm", "theoretical", "spread", 0.85),
    ("h200-sxm", "calibrated", "constant", 0.9),
]


@pytest.mark.parametrize(("gpu", "profile", "lengths", "load"), NEAR_CAPACITY)
def test_ttft_near_capacity_within_bounds_of_the_simulator(
    gpu: str, profile: str, lengths: str, load: float
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, 512)
    cell = acc.synthetic_cell(case, load, trace, count=60_000, lengths=lengths, seeds=(0,))
    for k in ("ttft_p50", "ttft_p99"):
        assert abs(cell.error(k)) <= 0.20, f"{k}: {cell.error(k):+.1%}"


# Constant lengths at budget 8192: the mixed steps carry 1, 2, 3 whole prompts, and ITL p99 falls
# on one of those discrete step sizes. Before the company was counted in whole prompts (a
# lognormal of its tokens, `steps.company_tokens`) the model read -19.4% (H200 calibrated, 60% load)
# and -10.9% (H100 theoretical, 85%) in docs/accuracy.md of 2026-12-01 (60,000 requests), -19.4%
# and -10.9% on these 30,000 too (seed 0); -3.4% and +1.4% then, -2.0% and +2.4% since the
# count of alike prompts per step is the steps' chain's (`steps.chain_company`, session 14).
# The chain's cell: H200 at 85%, where p99 falls on the steps with six prompts, read -12.9% on
# these 30,000 requests with the passes' count (its tail too short: five prompts at p99), now
# -4.2%. ITL p50 there sits on the upper part of the decode-only steps, whose centre the decode
# count sets: it read +17.1% (session 17) while prompts that met a busy prefill queue paid a
# full step's average (E[Delta] 5-11% high, the decodes 10-16% high at 85-90%); since whole
# prompts open or join a step (`steady.shared_rate`, session 19) -5.7%, and on the H100 -2.1%
# (85%) and -4.1% (90%, +17.9% on docs/accuracy.md's ten runs before). TTFT p50 there, D read
# over the steps' chain (`delay.delay_chain`): -1.2% (H200, 85%; -8.6% before on the ten
# runs), +1.0% and -1.1% (H100, 85% and 90%). Bound 8%.
WHOLE_PROMPTS = [
    ("h200-sxm", "calibrated", 0.6, ("itl_p99",)),
    ("h100-sxm", "theoretical", 0.85, ("itl_p99", "itl_p50", "ttft_p50")),
    ("h200-sxm", "calibrated", 0.85, ("itl_p99", "itl_p50", "ttft_p50")),
    ("h100-sxm", "theoretical", 0.9, ("itl_p50", "ttft_p50")),
]  # fmt: skip


# TTFT p99 at 90% load with constant lengths, where the prefill queue's wait is a mixture over
# the decode count's wandering (`prefill_queue.wait_environment`, session 17), against the simulator's
# median of ten 60,000-request runs (docs/accuracy.md: 531.9 ms and 694.7 ms, seeds 0-9; the
# ten runs' own range 39% and 37% of it): one exponential at the stretched mean read 465.6 ms
# (-12.5%) and 624.0 ms (-10.2%); now 488.2 ms (-8.2%) and 636.2 ms (-8.4%). Bound 10%.
TAILS_AT_90 = [("h100-sxm", "theoretical", 512, 0.5319), ("h200-sxm", "calibrated", 2048, 0.6947)]


@pytest.mark.parametrize(("gpu", "profile", "budget", "sim_ttft_p99_s"), TAILS_AT_90)
def test_ttft_tail_at_90_percent_within_the_simulators_ten_run_median(
    gpu: str, profile: str, budget: int, sim_ttft_p99_s: float
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    r = acc.Case("Qwen/Qwen3-8B", gpu, profile, budget).resolve()
    base = acc.stationary_workload(trace, "constant")
    wl = acc.scale_workload(base, 0.9 * acc.capacity(r, base))
    p = acc.LatencyModel(r, acc.WorkloadStats.of(wl)).evaluate()
    assert p.ttft_p99_s is not None
    assert abs(p.ttft_p99_s / sim_ttft_p99_s - 1.0) <= 0.10, p.ttft_p99_s


# TTFT p99 of the same alike prompts: the company a prompt waits behind in the step under way
# comes in whole prompts (`delay.company_atoms`); as a lognormal of its two moments its top
# slices read 5.7 prompts where the count reaches 4, and TTFT p99 +10.6% and +11.1% (H100
# theoretical, 60% and 85%) in docs/accuracy.md of session 14 (60,000 requests x 10 seeds),
# +10.5% and +7.9% on these 30,000 (seed 0); +2.5% and +4.7% then, +5.3% and -3.8% since D is read
# over the steps' chain (`delay.delay_chain`, session 19). Bound 6%.
@pytest.mark.parametrize("load", [0.6, 0.85])
def test_ttft_of_alike_prompts_within_bounds_of_the_simulator(load: float) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 8192)
    cell = acc.synthetic_cell(case, load, trace, count=30_000, lengths="constant", seeds=(0,))
    assert abs(cell.error("ttft_p99")) <= 0.06, f"ttft_p99: {cell.error('ttft_p99'):+.1%}"


@pytest.mark.parametrize(("gpu", "profile", "load", "metrics"), WHOLE_PROMPTS)
def test_itl_of_alike_prompts_within_bounds_of_the_simulator(
    gpu: str, profile: str, load: float, metrics: tuple[str, ...]
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, 8192)
    cell = acc.synthetic_cell(case, load, trace, count=30_000, lengths="constant", seeds=(0,))
    for metric in metrics:
        assert abs(cell.error(metric)) <= 0.08, f"{metric}: {cell.error(metric):+.1%}"


# The mix's company steps counted by each prompt's share of their tokens (`steps.step_mix`). Counted
# by the prompts they carry, a step the budget caps lost the company's rest, and a long prompt's
# step with a short company counted as half of it: ITL p50 -55.4% (H200 calibrated, budget 2048,
# constant lengths, 85%: the mixed steps' share fell below half, and p50 onto the decode-only
# step) and ITL p99 -17.7% (H100 theoretical, budget 8192, spread lengths, 85%) on these 30,000
# requests (seed 0); now -0.5% and -4.2%. Without the rest of a split group as a step of its own
# (when nothing arrives to share it), ITL p50 on the H100 at budget 2048 read +37.0% (constant
# lengths, 85%: p50 in the full steps where the simulator's falls in the steps of one prompt or
# a rest); +0.8% with them. Bound 10%. That p50 sits at the jump between the two kinds of step
# (docs/latency/limits.md, item 4): since prompts that meet a busy prefill queue are
# read as GI/M/1's sigma, not rho (session 12: sigma 0.82 against rho 0.80 here, CV^2 1.19), it
# lands in the full steps again, +26.2%: a strict xfail until the jump is modelled (the bursty
# table gained 8 figures by it, docs/accuracy.md); +32.6% since a split group's rest rides ahead
# of one newcomer (session 13: fewer steps of one prompt alone).
TOKEN_SHARES = [
    ("h200-sxm", "calibrated", 2048, "constant", "itl_p50"),
    ("h100-sxm", "theoretical", 8192, "spread", "itl_p99"),
    pytest.param(
        "h100-sxm", "theoretical", 2048, "constant", "itl_p50",
        marks=pytest.mark.xfail(strict=True, reason="p50 at the jump: sigma's full steps, +26.2% (session 12)"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("gpu", "profile", "budget", "lengths", "metric"), TOKEN_SHARES)
def test_company_steps_by_token_share_within_bounds_of_the_simulator(
    gpu: str, profile: str, budget: int, lengths: str, metric: str
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, budget)
    cell = acc.synthetic_cell(case, 0.85, trace, count=30_000, lengths=lengths, seeds=(0,))  # type: ignore[arg-type]
    assert abs(cell.error(metric)) <= 0.10, f"{metric}: {cell.error(metric):+.1%}"


# The company around an arrival as a gamma renewal process's count, before and after it, in FIFO
# order (planner/latency/arrivals.py; session 13). Before it, the burst factor z(mu) gave too
# little company too rarely under bursts: TTFT p50 -45.7% and -43.5% (H100 theoretical, budget
# 8192, CV^2 4, 30% and 60% load; -46.1% and -44.4% on docs/accuracy.md's 60,000 requests) and
# ITL p99 -16.5% and -14.6%, on these 20,000 requests (seed 0); now -8.2%, -13.5%, +8.9%, -1.8%.
# Bound 20% (TTFT p50, its simulated value moving ~5% between seeds here), ITL p99 15%.
BURSTY_COMPANY = [0.3, 0.6]


@pytest.mark.parametrize("load", BURSTY_COMPANY)
def test_bursty_company_within_bounds_of_the_simulator(load: float) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 8192)
    cell = acc.synthetic_cell(case, load, trace, count=20_000, seeds=(0,), burstiness=0.25)
    assert abs(cell.error("ttft_p50")) <= 0.20, f"ttft_p50: {cell.error('ttft_p50'):+.1%}"
    assert abs(cell.error("itl_p99")) <= 0.15, f"itl_p99: {cell.error('itl_p99'):+.1%}"


def test_a_split_groups_rest_ahead_of_one_newcomer_within_bounds_of_the_simulator() -> None:
    """Constant lengths, H100 theoretical, budget 2048, 30% load: ITL p99 falls on the steps of a
    split group's 283-token rest ahead of a newcomer's whole prompt (1,438 tokens, 24.8 ms in the
    simulator). Counted as a share of a full step, with the newcomer's step its own, the model
    read -15.9% on these 30,000 requests (seed 0; -15.8% on docs/accuracy.md's 60,000); with the
    rest ahead of exactly one newcomer (`steps.step_mix`, session 13) +2.0%. Bound 8%."""
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 2048)
    cell = acc.synthetic_cell(case, 0.3, trace, count=30_000, lengths="constant", seeds=(0,))
    assert abs(cell.error("itl_p99")) <= 0.08, f"itl_p99: {cell.error('itl_p99'):+.1%}"


# `mixed_step_fraction`, the share of a decoder's steps that carry prompt tokens, counted each
# prompt's chunks as steps of their own (lam k t_step) until session 14, as if no two prompts
# ever shared a step: near capacity it read 0.989, 1.000 and 0.650 where the simulator's
# decoders see 0.731, 0.727 and 0.365 (15,000 requests, seed 0, docs/accuracy.md's state table).
# It is now the ITL mix's own share: 0.691, 0.720 and 0.365. Bound 0.06 (absolute).
MIXED_SHARE = [
    ("h100-sxm", "theoretical", 2048, "constant"),
    ("h100-sxm", "theoretical", 8192, "spread"),
]


@pytest.mark.parametrize(("gpu", "profile", "budget", "lengths"), MIXED_SHARE)
def test_mixed_step_share_within_bounds_of_the_simulator(
    gpu: str, profile: str, budget: int, lengths: str
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, budget)
    st = acc.state_check(case, 0.85, trace, lengths)  # type: ignore[arg-type]
    assert abs(st.model_mixed - st.sim_mixed) <= 0.06, f"{st.model_mixed:.3f} vs {st.sim_mixed:.3f}"


# The engine time a prompt adds, E[Δ], sets the mean step, t_dec / (1 - λE[Δ]): measured over the
# simulator's steps (each less a decode-only step of its own decodes, per request), the model's
# reads +3.1%, +4.2%, +2.3% and +2.6% at budget 2048 and 85% load (H100 constant and spread, H200
# constant and spread; 15,000 requests, seed 0, docs/accuracy.md's steady-state table) and +5% to
# +11% on the H100 at budget 8192, where prompts share steps (docs/latency/limits.md,
# item 4). Bound 5% where a prompt's chunks fill steps of their own.
PROMPT_COST = [
    ("h100-sxm", "theoretical", "spread"),
    ("h200-sxm", "calibrated", "constant"),
]


@pytest.mark.parametrize(("gpu", "profile", "lengths"), PROMPT_COST)
def test_prompt_engine_time_within_bounds_of_the_simulator(gpu: str, profile: str, lengths: str) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, 2048)
    st = acc.state_check(case, 0.85, trace, lengths)  # type: ignore[arg-type]
    assert abs(st.prompt_cost_error) <= 0.05, f"{st.model_prompt_cost_s:.5f} vs {st.sim_prompt_cost_s:.5f}"
