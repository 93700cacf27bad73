"""Which forecaster to recommend for budget planning, chosen by leave-one-history-out over the
three bundled ServeGen histories (issue #36, "Done when": fewer GPU-hours than last week's peak
at no more hours at risk, on a trace held back from fitting).

The protocol, fixed before the newest method (`seasonal_peak`) was backtested on these
histories:

* candidates: every registered method x quantiles 0.5, 0.9, 0.95, 0.99, scored by the daily
  backtest of each history (the figures pinned in tests/test_forecast_backtest_real.py and
  tests/test_forecast_backtest_servegen.py, which rerun it);
* rotation (held-out H, training A and B): eligible = the configurations whose hours at risk are
  no more than last week's peak's on A and on B; chosen = the eligible one with the smallest
  mean over A and B of GPU-hours / last week's peak's GPU-hours (ties: registry order, then the
  lower quantile); last week's peak is always eligible (ratio 1);
* held out: the chosen configuration's GPU-hours and hours at risk on H against last week's
  peak's; it wins if it buys fewer at no more hours at risk.

What came out: every rotation chooses last week's peak (the other eligible configurations,
conformal 0.99 on m-mid and m-small, ets 0.99 on m-large and m-mid, buy 21% and 27% more
GPU-hours than it there, and lose on the held-out history too), so none wins on its held-out
history. Each history
has at most one configuration that beats last week's peak there (ets 0.95 on m-large,
conformal 0.99 on m-small, none on m-mid), never the same one: the done-when does not hold on
these histories under this protocol, and the recommendation for budget planning that must not
add hours at risk is last week's peak (docs/forecast.md "Choosing a forecaster").
`seasonal_peak` was designed from where the others lose on all three histories (their test
days included), so even its held-out figures are not fully out of sample.
"""

from __future__ import annotations

from planner.forecast import FORECASTERS
from tests.test_forecast_backtest_real import PINNED as M_LARGE
from tests.test_forecast_backtest_servegen import PINNED as OTHERS

Config = tuple[str, float]
Figures = dict[Config, tuple[int, int]]  # (GPU-hours, hours at risk) per method x quantile
HISTORIES: dict[str, Figures] = {"m-large": M_LARGE, "m-mid": OTHERS["m-mid"], "m-small": OTHERS["m-small"]}
BASELINE: Config = ("last_week_peak", 0.9)
QUANTILES = (0.5, 0.9, 0.95, 0.99)


def beats(figures: Figures, config: Config) -> bool:
    (gpu_h, risk), (peak_gpu_h, peak_risk) = figures[config], figures[BASELINE]
    return gpu_h < peak_gpu_h and risk <= peak_risk


def choose(training: list[str]) -> Config:
    """The protocol's pick on the training histories (module docstring)."""
    order = list(FORECASTERS)
    eligible = [
        c
        for c in HISTORIES[training[0]]
        if all(HISTORIES[h][c][1] <= HISTORIES[h][BASELINE][1] for h in training)
    ]

    def key(c: Config) -> tuple[float, int, float]:
        ratio = sum(HISTORIES[h][c][0] / HISTORIES[h][BASELINE][0] for h in training) / len(training)
        return ratio, order.index(c[0]), c[1]

    return min(eligible, key=key)


def test_every_method_and_quantile_is_a_candidate() -> None:
    expected = {(m, q) for m in FORECASTERS for q in QUANTILES}
    assert all(set(figures) == expected for figures in HISTORIES.values())


def test_each_history_alone_has_at_most_one_winner_and_never_the_same() -> None:
    winners = {h: [c for c in figures if beats(figures, c)] for h, figures in HISTORIES.items()}
    assert winners == {"m-large": [("ets", 0.95)], "m-mid": [], "m-small": [("conformal", 0.99)]}


def test_leave_one_history_out_chooses_last_week_peak_and_nothing_wins() -> None:
    """Each rotation: the eligible configurations besides last week's peak (no more hours at
    risk than it on both training histories) all buy more GPU-hours than it there, so it is
    chosen, and on the held-out history it ties with itself: no win. The runner-up would have
    lost too: conformal 0.99 on m-large (5 hours at risk against 0), ets 0.99 on m-small (4
    against 1)."""
    runner_up: dict[str, tuple[Config, float, tuple[int, int]] | None] = {}
    for held_out in HISTORIES:
        training = [h for h in HISTORIES if h != held_out]
        chosen = choose(training)
        assert chosen == ("last_week_peak", 0.5)  # every quantile is the same peak; the lowest wins the tie
        assert not beats(HISTORIES[held_out], chosen)
        others = [
            c
            for c in HISTORIES[held_out]
            if c[0] != "last_week_peak"
            and all(HISTORIES[h][c][1] <= HISTORIES[h][BASELINE][1] for h in training)
        ]
        assert len(others) <= 1
        runner_up[held_out] = None
        for c in others:
            ratio = sum(HISTORIES[h][c][0] / HISTORIES[h][BASELINE][0] for h in training) / len(training)
            runner_up[held_out] = (c, round(ratio, 3), HISTORIES[held_out][c])
    assert runner_up == {
        "m-large": (("conformal", 0.99), 1.208, (1742, 5)),  # m-mid 6,674 / 4,608 and m-small 1,277 / 1,320
        "m-mid": None,
        "m-small": (("ets", 0.99), 1.273, (1185, 4)),  # m-large 2,088 / 1,776 and m-mid 6,311 / 4,608
    }


def test_the_nearest_misses_in_hours_at_risk() -> None:
    """What a budget owner trades if a few hours at risk are acceptable (the docs' table): the
    configurations on the cost side of last week's peak on all three histories, with their
    worst hours at risk, the cheapest first."""
    cheaper_everywhere = [
        c for c in HISTORIES["m-large"] if all(f[c][0] < f[BASELINE][0] for f in HISTORIES.values())
    ]
    worst_risk = {c: max(f[c][1] for f in HISTORIES.values()) for c in cheaper_everywhere}
    best = sorted((risk, c) for c, risk in worst_risk.items())[:2]
    # seasonal_peak at 0.95 and 0.99 is the same forecast: with 21 rates per window both ranks are the largest
    assert best == [(9, ("seasonal_peak", 0.95)), (9, ("seasonal_peak", 0.99))]
    ratios = [f[("seasonal_peak", 0.95)][0] / f[BASELINE][0] for f in HISTORIES.values()]
    assert [round(r, 3) for r in ratios] == [0.902, 0.938, 0.769]  # 1,602/1,776, 4,323/4,608, 1,015/1,320
