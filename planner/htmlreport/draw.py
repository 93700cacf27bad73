"""The pictures of `capplan report` (planner/htmlreport/figures.py gathers their data): one
matplotlib Figure per figure, drawn on Agg (files only, no display).

Readable by construction: money axes label every tick in dollars with the cents a value needs
(`UsdFormatter`: $0.25, $0.015, never a $0 that is not zero); a log money axis with fewer than
three powers of ten in view also ticks at 2 and 5 of each decade, so values below $1 get labels
too; legends sit outside the axes (below a figure's two panels, right of a full-width panel),
with room reserved in the figure, so no legend covers data.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.ticker import Formatter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SVG_HASH_SALT = "capplan"  # fixed ids in the SVGs: same plan, same bytes
DPI = 110
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
LEGEND_FONT = 7.5
LEGEND_ROW_IN = 0.17  # one legend row at LEGEND_FONT, with its spacing
BELOW_AXES_IN = 0.45  # tick labels and the x label under an axes, where a legend below starts
RIGHT_LEGEND_IN = 2.7  # the room a legend right of a full-width panel takes
MAX_CENT_DECIMALS = 6
MIN_DECADE_TICKS = 3  # a log money axis with fewer powers of ten in view ticks at 1, 2, 5 x 10^k


def _decimals(v: float) -> int:
    """Decimals a dollar amount needs: none for whole dollars or from $100 up, else at least
    two (cents), more until the value is exact (a tick is a round number), at most
    MAX_CENT_DECIMALS."""
    a = abs(v)
    if a >= 100 or a == round(a):
        return 0
    for d in range(2, MAX_CENT_DECIMALS + 1):
        if abs(round(a, d) - a) <= 1e-9 * a:
            return d
    return MAX_CENT_DECIMALS


class UsdFormatter(Formatter):
    """Dollar tick labels: `$1,250`, `$2.50`, `$0.25`, `$0.015`, `$0` only for zero. On a linear
    axis every tick gets the same decimals (the most any needs: $0, $0.25, $0.50 ... $1.00); on a
    log axis each tick its own ($0.01, $0.10, $1, $10)."""

    def __init__(self, log: bool = False) -> None:
        self.log = log

    def __call__(self, x: float, pos: int | None = None) -> str:
        return usd_tick(x, _decimals(x))

    def format_ticks(self, values: Sequence[float]) -> list[str]:
        if self.log:
            return [self(v) for v in values]
        d = max((_decimals(v) for v in values), default=0)
        return [usd_tick(v, d) for v in values]


def usd_tick(x: float, decimals: int) -> str:
    if x == 0:
        return "$0"
    sign = "-" if x < 0 else ""
    return f"{sign}${abs(x):,.{decimals}f}"


def usd_axis(ax: Any, log: bool = False) -> None:
    """Dollar labels on the y axis; a log axis with fewer than MIN_DECADE_TICKS powers of ten in
    view also ticks at 2 and 5 x 10^k (call after the data and limits are set)."""
    from matplotlib.ticker import LogLocator, NullFormatter

    if log:
        lo, hi = ax.get_ylim()
        if lo > 0 and math.floor(math.log10(hi)) - math.ceil(math.log10(lo)) + 1 < MIN_DECADE_TICKS:
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(UsdFormatter(log))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _figure(
    width_in: float = 11.0,
    height_in: float = 4.4,
    rows: int = 1,
    cols: int = 2,
    legend_rows: int = 0,
    legend_right: bool = False,
) -> Any:
    """A figure of `rows` x `cols` axes of the given plotting size, with room reserved for
    `legend_rows` rows of legend below the axes, or for a legend right of them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # The x label takes 0.55 in; a legend below starts at BELOW_AXES_IN and takes its rows.
    below_in = max(0.0, BELOW_AXES_IN + legend_rows * LEGEND_ROW_IN + 0.1 - 0.55) if legend_rows else 0.0
    height = height_in + below_in
    fig = Figure(figsize=(width_in, height), dpi=DPI)
    FigureCanvasAgg(fig)  # Agg: files only, no display, no pyplot state
    axes = fig.subplots(rows, cols, squeeze=False)
    # Fixed margins (in inches, so every figure size gets the same): a constrained layout would
    # cost a second draw per save.
    right_in = RIGHT_LEGEND_IN if legend_right else 0.2
    fig.subplots_adjust(
        left=0.75 / width_in,
        right=1 - right_in / width_in,
        bottom=(0.55 + below_in) / height,
        top=1 - (0.75 if cols > 1 else 0.35) / height,
        wspace=0.2,
        hspace=0.45,
    )
    return fig, axes


def legend_below(ax: Any, ncol: int = 2) -> Any:
    """The axes' legend under its x label, centred (room reserved by `_figure(legend_rows=)`)."""
    fig = ax.get_figure()
    axes_h_in = ax.get_position().height * fig.get_figheight()
    return ax.legend(
        fontsize=LEGEND_FONT,
        loc="upper center",
        bbox_to_anchor=(0.5, -BELOW_AXES_IN / axes_h_in),
        ncol=ncol,
        frameon=False,
    )


def legend_right(ax: Any) -> Any:
    """The axes' legend right of it, top-aligned (room reserved by `_figure(legend_right=)`)."""
    return ax.legend(fontsize=LEGEND_FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def legend_rows(entries: int, ncol: int = 2) -> int:
    return math.ceil(entries / ncol)


def _log2_axis(ax: Any) -> None:
    """Powers of two written as plain numbers (1, 4, 16, ..., 2,048), no mathtext."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _draw_cost_vs_concurrency(d: dict[str, Any], model: str) -> Figure:
    n, usd, tps, fits = (
        d["concurrency"],
        d["usd_per_million_output_tokens"],
        d["user_tokens_per_s"],
        d["fits_in_memory"],
    )
    ok = [i for i, f in enumerate(fits) if f]
    over = [i for i, f in enumerate(fits) if not f]
    fig, ((left, right),) = _figure(legend_rows=legend_rows(3 + bool(over)))
    plan_i = n.index(d["plan_concurrency"])
    for ax, x, xlabel in (
        (left, n, "concurrent decoding sequences per replica"),
        (right, tps, "tokens/s each user sees (1 / step time)"),
    ):
        ax.plot(
            [x[i] for i in ok], [usd[i] for i in ok], "o-", color=COLORS[0], label="$ per 1M output tokens"
        )
        if over:
            ax.plot(
                [x[i] for i in over],
                [usd[i] for i in over],
                "o",
                color="0.6",
                mfc="none",
                label="KV cache does not fit",
            )
        ax.plot(
            [x[plan_i]],
            [usd[plan_i]],
            "*",
            ms=16,
            color=COLORS[3],
            label=f"plan at the peak: {n[plan_i]} running",
            zorder=5,
        )
        if ax is left:
            _log2_axis(ax)
        ax.set_yscale("log")
        ax.minorticks_off()  # a tick label's layout is the costliest part of a save
        usd_axis(ax, log=True)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("GPU cost per 1M output tokens (USD)")
        ax.grid(True, alpha=0.3)
    left.axvline(
        d["kv_max_concurrency"], ls=":", color="0.4", label=f"KV cache limit: {d['kv_max_concurrency']}"
    )
    left.set_title("Cost vs concurrency")
    right.set_title("Cost vs per-user speed")
    legend_below(left)
    legend_below(right)
    fig.suptitle(
        f"{model} on {d['gpu']} x TP{d['tp']}: decode-only roofline at {d['context_tokens']:,}-token mean "
        f"context (profile {d['profile']})",
        fontsize=11,
    )
    return fig


def _draw_chunked_prefill(d: dict[str, Any], model: str) -> Figure:
    fig, ((left, right),) = _figure(legend_rows=2)
    x = d["budget_tokens"]
    if not x:
        left.text(
            0.5,
            0.5,
            f"no budget leaves room beside {d['decodes']} decodes",
            ha="center",
            transform=left.transAxes,
        )
    left.plot(x, d["prompt_prefill_ms"], "o-", color=COLORS[0], label="prompt prefill time")
    right.plot(x, d["worst_itl_ms"], "s-", color=COLORS[1], label="worst ITL of the running decodes")
    if d["ttft_slo_ms"] is not None:
        left.axhline(
            d["ttft_slo_ms"], ls="--", color=COLORS[3], label=f"TTFT p99 SLO {d['ttft_slo_ms']:g} ms"
        )
    if d["itl_slo_ms"] is not None:
        right.axhline(d["itl_slo_ms"], ls="--", color=COLORS[3], label=f"ITL p99 SLO {d['itl_slo_ms']:g} ms")
    for ax in (left, right):
        ax.axvline(
            d["plan_budget_tokens"], ls=":", color="0.3", label=f"plan's budget {d['plan_budget_tokens']:,}"
        )
        _log2_axis(ax)
        ax.minorticks_off()
        ax.set_xlabel("token budget per step, max_num_batched_tokens (tokens)")
        ax.set_ylabel("milliseconds")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    left.set_title(f"Prefill time of a {d['prompt_tokens']:,}-token prompt (p99 input)")
    right.set_title(f"Worst inter-token latency of {d['decodes']} running decodes")
    pool = " (the prefill pool's GPU, as if it also decoded)" if d["role"] == "prefill" else ""
    fig.suptitle(
        f"{model} on {d['gpu']} x TP{d['tp']}{pool}: chunked prefill, vLLM V1 budget (decodes first), "
        f"profile {d['profile']}",
        fontsize=11,
    )
    return fig


Layer = tuple[str, Sequence[float], str, str | None]  # label, values per bucket, color, hatch


def _stairs_stack(ax: Any, edges: Sequence[float], layers: Sequence[Layer]) -> None:
    """Stacked step areas (one value per bucket), bottom to top."""
    bottom = [0.0] * (len(edges) - 1)
    for label, values, color, hatch in layers:
        top = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.stairs(top, edges, baseline=bottom, fill=True, color=color, alpha=0.75, hatch=hatch, label=label)
        bottom = top


def _hours_axis(ax: Any, edges: list[float]) -> None:
    from matplotlib.ticker import MultipleLocator

    ax.set_xlim(edges[0], edges[-1])
    if edges[-1] - edges[0] >= 72:
        ax.xaxis.set_major_locator(MultipleLocator(24))  # days
    ax.set_xlabel("time from the forecast's start (hours)")
    ax.grid(True, alpha=0.3)


def _gpu_layers(
    gpus: Mapping[str, Mapping[str, Sequence[float]]], reserved: str, on_demand: str
) -> list[Layer]:
    layers: list[Layer] = []
    for i, (gpu, g) in enumerate(gpus.items()):
        color = COLORS[i % len(COLORS)]
        if any(g[reserved]):
            layers.append((f"{gpu} reserved", [float(x) for x in g[reserved]], color, "//"))
        layers.append((f"{gpu} on-demand", [float(x) for x in g[on_demand]], color, None))
    return layers


def _draw_capacity(d: dict[str, Any]) -> Figure:
    fig, ((top,), (bottom,)) = _figure(11.0, 6.4, rows=2, cols=1, legend_right=True)
    edges = d["edges_h"]
    top.stairs(d["provisioned_requests_per_s"], edges, fill=True, color=COLORS[2], alpha=0.3,
               label="provisioned: replicas x\ncapacity within the SLOs")  # fmt: skip
    top.stairs(d["target_requests_per_s"], edges, color=COLORS[1], ls="--", lw=1.5,
               label=f"demand + {d['headroom']:.0%} headroom\n(sized for)")  # fmt: skip
    top.stairs(d["demand_requests_per_s"], edges, color=COLORS[0], lw=2, label="forecast demand")
    top.set_ylabel("requests/s")
    top.set_ylim(0, 1.1 * max([*d["provisioned_requests_per_s"], *d["target_requests_per_s"], 1e-3]))
    top.set_title("Forecast demand vs provisioned capacity")
    _hours_axis(top, edges)
    legend_right(top)
    _stairs_stack(bottom, edges, _gpu_layers(d["gpus"], "reserved", "on_demand"))
    bottom.set_ylabel("GPUs held")
    bottom.set_ylim(0, max(d["gpus_total"]) * 1.1 + 0.5)
    bottom.yaxis.get_major_locator().set_params(integer=True)
    bottom.set_title("GPUs per bucket: reserved (billed all horizon) and on-demand")
    _hours_axis(bottom, edges)
    legend_right(bottom)
    return fig


def _draw_cost_by_gpu(d: dict[str, Any]) -> Figure:
    fig, ((ax,),) = _figure(11.0, 4.4, rows=1, cols=1, legend_right=True)
    edges = d["edges_h"]
    _stairs_stack(ax, edges, _gpu_layers(d["gpus"], "reserved_usd_per_hour", "on_demand_usd_per_hour"))
    ax.stairs(d["usd_per_hour"], edges, color="black", lw=1, label="total")
    ax.set_ylabel("USD per hour")
    ax.set_ylim(0, max(d["usd_per_hour"]) * 1.1)
    usd_axis(ax)
    month = "" if d["usd_per_month"] is None else f": ${d['usd_per_month']:,.0f} per month (730 h)"
    ax.set_title(f"Cost by GPU type and bucket{month}")
    _hours_axis(ax, edges)
    legend_right(ax)
    return fig


PERCENTILES = ("p50", "p90", "p99")


def _draw_latency_simulated(d: dict[str, Any]) -> Figure:
    groups = d["groups"]
    fig, ((left, right),) = _figure(legend_rows=legend_rows(2 * len(groups) + 1, ncol=1), height_in=4.0)
    several = len(groups) > 1
    for ax, key, name, slo in (
        (left, "ttft_ms", "Time to first token", d["ttft_slo_ms"]),
        (right, "itl_ms", "Inter-token latency", d["itl_slo_ms"]),
    ):
        series = []
        for g in groups:
            tail = f": {g['label']}" if several else ""
            series.append((f"latency model{tail}", g["predicted"][key], "model"))
            series.append(
                (f"simulation, {g['simulated_requests']:,} requests{tail}", g["simulated"][key], "sim")
            )
        width = 0.8 / max(len(series), 1)
        for j, (label, values, kind) in enumerate(series):
            xs = [
                i + (j - (len(series) - 1) / 2) * width
                for i, p in enumerate(PERCENTILES)
                if values.get(p) is not None
            ]
            ys = [values[p] for p in PERCENTILES if values.get(p) is not None]
            color = COLORS[(j // 2) % len(COLORS)]
            bars = ax.bar(xs, ys, width, color=color, alpha=0.45 if kind == "model" else 0.9,
                          hatch="//" if kind == "model" else None, edgecolor=color, label=label)  # fmt: skip
            crowded = len(series) > 2  # labels side by side would run into each other: upright
            ax.bar_label(
                bars, fmt="%.1f", fontsize=6.5 if crowded else 7, padding=2, rotation=90 if crowded else 0
            )
        if slo is not None:
            ax.axhline(slo, ls="--", color=COLORS[3], label=f"p99 SLO {slo:g} ms")
        drawn = [v for _, values, _ in series for v in values.values() if v is not None]
        ax.set_xticks(range(len(PERCENTILES)), [p.upper() for p in PERCENTILES])
        ax.set_xlabel("percentile (the latency model gives p50 and p99)")
        ax.set_ylabel("milliseconds")
        ax.set_ylim(
            0, (1.3 if len(series) > 2 else 1.15) * max([*drawn, slo or 0.0, 1e-3])
        )  # the labels' room
        ax.set_title(name)
        ax.grid(True, axis="y", alpha=0.3)
        legend_below(ax, ncol=1)
    what = groups[0]["label"] if len(groups) == 1 else "each part of the plan at its hardest bucket"
    fig.suptitle(f"{what}: latency model (hatched) vs simulation (solid), as --verify", fontsize=11)
    return fig


def rc() -> Any:
    """SVG ids from a fixed salt and text kept as text (smaller, searchable pages)."""
    return {"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none", "font.size": 9}


def render(figures: Mapping[str, dict[str, Any]], model: str) -> dict[str, Figure]:
    """One matplotlib Figure per figure's data (Agg: no display needed)."""
    import matplotlib

    with matplotlib.rc_context(rc()):
        return {
            "cost_vs_concurrency": _draw_cost_vs_concurrency(figures["cost_vs_concurrency"], model),
            "chunked_prefill": _draw_chunked_prefill(figures["chunked_prefill"], model),
            "capacity": _draw_capacity(figures["capacity"]),
            "cost_by_gpu": _draw_cost_by_gpu(figures["cost_by_gpu"]),
            "latency_simulated": _draw_latency_simulated(figures["latency_simulated"]),
        }


def save_figure(fig: Figure, out: Path, name: str) -> tuple[Path, Path, str]:
    """`<name>.png` and `<name>.svg` in `out` (no dates or software in them: same figure, same
    bytes); the paths and the SVG text (for a page to inline)."""
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, format="png", metadata={"Software": None})
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    svg.write_text(text, encoding="utf-8")
    return png, svg, text
