"""The forecast figure of `capplan report --backtest BACKTEST.json`: per method x quantile of a
backtest (`capplan forecast --backtest --json`, planner/forecast/backtest.py), the traffic that
came, the forecast the plan was sized for and the capacity the plan held, over each fold's
tested span. One panel per score, at most `MAX_PANELS` (a backtest of every method at three
quantiles); the title carries the score's GPU-hours and hours at risk, so the picture and the
table say the same.

Every number drawn is read from the file: `figure_data` gathers it per panel (what the tests
compare), `draw` draws it on Agg (planner/htmlreport/draw.py's conventions: legend outside the
axes, byte-stable SVG).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InvalidInput
from planner.history.series import MAX_HISTORY_BUCKETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_PANELS = 12
MAX_BUCKETS = MAX_HISTORY_BUCKETS
MAX_FILE_BYTES = 256 * 2**20
NAME = "forecast"


class _Fold(BaseModel):
    model_config = ConfigDict(extra="ignore")
    origin_bucket: int = Field(ge=0, le=MAX_BUCKETS)
    forecast_per_s: list[float] = Field(min_length=1, max_length=MAX_BUCKETS)
    capacity_per_s: list[float] | None = Field(default=None, max_length=MAX_BUCKETS)


class _Score(BaseModel):
    model_config = ConfigDict(extra="ignore")
    method: str = Field(min_length=1, max_length=64)
    quantile: float = Field(gt=0.0, lt=1.0)
    gpu_hours: float = Field(ge=0.0, allow_inf_nan=False)
    hours_at_risk: float = Field(ge=0.0, allow_inf_nan=False)
    timeline: list[_Fold] = Field(max_length=1000)


class Backtest(BaseModel):
    """What the figure reads of `capplan forecast --backtest --json` (other keys are ignored)."""

    model_config = ConfigDict(extra="ignore")
    bucket_s: float = Field(ge=1.0, le=7 * 86_400.0)
    actual_per_s: list[float | None] = Field(min_length=1, max_length=MAX_BUCKETS)
    scores: list[_Score] = Field(min_length=1, max_length=MAX_PANELS)


def read_backtest(path: str | Path, field: str = "--backtest") -> Backtest:
    """The backtest JSON, validated: errors name `field` and the dotted place."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise InvalidInput(field, f"{path}: over {MAX_FILE_BYTES // 2**20} MiB")
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(field, f"{path}: not a readable JSON file ({exc})") from None
    try:
        bt = Backtest.model_validate(data)
    except ValidationError as err:
        e = err.errors(include_url=False)[0]
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e["loc"])
        hint = " (the figure draws at most 12: fewer --methods or --quantiles)" if where == ".scores" else ""
        raise InvalidInput(f"{field}{where}", f"{e['msg']}{hint}") from None
    for i, s in enumerate(bt.scores):
        for j, f in enumerate(s.timeline):
            place = f"{field}.scores[{i}].timeline[{j}]"
            if f.origin_bucket + len(f.forecast_per_s) > len(bt.actual_per_s):
                raise InvalidInput(place, "the fold runs past the history's end (actual_per_s)")
            if f.capacity_per_s is not None and len(f.capacity_per_s) != len(f.forecast_per_s):
                raise InvalidInput(place, "capacity_per_s and forecast_per_s differ in length")
    return bt


def figure_data(bt: Backtest) -> dict[str, Any]:
    """Per panel (score): its label and, per fold, bucket edges in hours from the history's
    start with the actual, forecast and capacity rates (None: unobserved, or a failed plan)."""
    hours = bt.bucket_s / 3600.0
    panels = []
    for s in bt.scores:
        folds = []
        for f in s.timeline:
            n = len(f.forecast_per_s)
            folds.append(
                {
                    "edges_h": [(f.origin_bucket + i) * hours for i in range(n + 1)],
                    "actual_per_s": bt.actual_per_s[f.origin_bucket : f.origin_bucket + n],
                    "forecast_per_s": list(f.forecast_per_s),
                    "capacity_per_s": None if f.capacity_per_s is None else list(f.capacity_per_s),
                }
            )
        label = f"{s.method} at quantile {s.quantile:g}: {s.gpu_hours:,.0f} GPU-hours, {s.hours_at_risk:,.0f} h at risk"
        panels.append({"label": label, "folds": folds})
    return {"panels": panels}


def _nan(values: list[float | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def draw(d: dict[str, Any]) -> Figure:
    """One panel per score, stacked; each fold's capacity shaded, its forecast dashed and the
    actual rate solid (a line per fold: the gaps between folds were not tested)."""
    import matplotlib

    from planner.htmlreport.draw import COLORS, _figure, legend_right, rc

    panels = d["panels"]
    with matplotlib.rc_context(rc()):
        fig, axes = _figure(11.0, 1.0 + 2.1 * len(panels), rows=len(panels), cols=1, legend_right=True)
        for i, ((ax,), panel) in enumerate(zip(axes, panels, strict=True)):
            top = 1e-3
            for k, f in enumerate(panel["folds"]):
                first = k == 0
                if f["capacity_per_s"] is not None:
                    ax.stairs(f["capacity_per_s"], f["edges_h"], fill=True, color=COLORS[2], alpha=0.3,
                              label="planned capacity" if first else None)  # fmt: skip
                    top = max(top, *f["capacity_per_s"])
                ax.stairs(f["forecast_per_s"], f["edges_h"], color=COLORS[1], ls="--", lw=1.3, baseline=None,
                          label="forecast (planned for)" if first else None)  # fmt: skip
                ax.stairs(_nan(f["actual_per_s"]), f["edges_h"], color=COLORS[0], lw=1.6, baseline=None,
                          label="actual" if first else None)  # fmt: skip
                top = max(top, *f["forecast_per_s"], *(v for v in f["actual_per_s"] if v is not None))
            edges = [e for f in panel["folds"] for e in f["edges_h"]]
            if edges:
                ax.set_xlim(min(edges), max(edges))
            ax.set_ylim(0, 1.1 * top)
            ax.set_ylabel("requests/s")
            ax.set_title(panel["label"], fontsize=9)
            ax.grid(True, alpha=0.3)
            if i == 0:
                legend_right(ax)
        axes[-1][0].set_xlabel("time from the history's start (hours)")
    return fig


def write(d: dict[str, Any], out_dir: Path) -> tuple[list[Path], str]:
    """`forecast.png` and `forecast.svg` in `out_dir`; the files and the SVG text (for a page)."""
    import matplotlib

    from planner.htmlreport.draw import rc, save_figure

    out_dir.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(rc()):
        png, svg, text = save_figure(draw(d), out_dir, NAME)
    return [png, svg], text
