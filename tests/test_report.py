"""`capplan report examples/chat.yaml -o DIR`: the files exist and are valid images (PNG signature
and size, SVG parses as XML), the page bundles every figure and the plan's numbers, warnings,
binding constraints, alternatives and simulated check, the data each figure draws is what the api
answers (asked here again, independently, by the rules docs/report.md states; the simulated
figures are `capplan plan --verify`'s), the artists hold exactly that data, money axes read in
dollars and cents, no legend covers an axes, and the output is byte-stable."""

from __future__ import annotations

import copy
import json
import struct
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from matplotlib.patches import Rectangle

from planner import api
from planner.cli import main
from planner.htmlreport.draw import UsdFormatter, usd_tick
from planner.htmlreport.figures import DPI, FIGURES, build, render, write_files
from planner.schema.plan_report import PlanReport
from planner.schema.reports import ChunkedPrefillReport, ConcurrencyReport
from tests.cli_helpers import run_cli
from tests.plan_helpers import MIXED

ROOT = Path(__file__).resolve().parents[1]
CHAT = ROOT / "examples" / "chat.yaml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cli_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    assert main(["report", str(CHAT), "-o", str(out), "--workers", "1"]) == 0
    return out


@pytest.fixture(scope="module")
def built() -> tuple[PlanReport, dict[str, dict[str, Any]]]:
    return build(yaml.safe_load(CHAT.read_text()), base_dir=CHAT.parent, workers=1)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_cli_writes_valid_images_and_the_page(cli_out: Path) -> None:
    names = sorted(p.name for p in cli_out.iterdir())
    assert names == sorted([*(f"{f}.png" for f in FIGURES), *(f"{f}.svg" for f in FIGURES), "index.html"])
    for name in FIGURES:
        w, h = _png_size(cli_out / f"{name}.png")
        assert w == 11 * DPI and h >= 4 * DPI  # the figure's size in inches x DPI
        root = ET.parse(cli_out / f"{name}.svg").getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert "Date" not in (cli_out / f"{name}.svg").read_text()  # no timestamp: byte-stable
    page = (cli_out / "index.html").read_text()
    assert page.count("<svg") == len(FIGURES)  # self-contained: every figure inline
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_page_and_cli_agree_with_the_plan(cli_out: Path, built: tuple[PlanReport, Any]) -> None:
    plan, _ = built
    page = (cli_out / "index.html").read_text()
    assert plan.status in page
    for dep in plan.deployments:
        assert dep.vllm_command in page
    assert plan.usd_per_month is not None and f"${plan.usd_per_month:,.0f}/month" in page


def _rows_equal(got: list[Any], want: list[Any]) -> None:
    assert got == want  # same computation, same floats: exact


def test_cost_vs_concurrency_is_the_concurrency_analysis(built: tuple[PlanReport, Any]) -> None:
    plan, figs = built
    d = figs["cost_vs_concurrency"]
    (dep,) = plan.deployments  # the seed's chat case: one colocated deployment
    wl = plan.workload
    context = round(wl.mean_input_tokens + wl.mean_output_tokens / 2)
    assert dep.at_peak is not None and dep.at_peak.running_requests is not None
    running = round(dep.at_peak.running_requests)
    sweep = sorted({2**k for k in range(13) if 2**k <= 2 * dep.max_num_seqs} | {dep.max_num_seqs, running})
    rep = api.analyze(
        {
            "model": plan.model,
            "gpu": dep.gpu,
            "tp": dep.tensor_parallel_size,
            "profile": "auto",
            "usd_per_gpu_hour": dep.usd_per_gpu_hour,
            "concurrency": {"context_tokens": context, "concurrency": sweep},
        }
    )
    assert isinstance(rep, ConcurrencyReport)
    rows = rep.rows
    assert d["context_tokens"] == context and d["plan_concurrency"] == running
    _rows_equal(d["concurrency"], [r.concurrency for r in rows])
    _rows_equal(d["usd_per_million_output_tokens"], [r.usd_per_million_output_tokens for r in rows])
    _rows_equal(d["user_tokens_per_s"], [r.user_tokens_per_s for r in rows])
    _rows_equal(d["fits_in_memory"], [r.fits_in_memory for r in rows])
    assert d["kv_max_concurrency"] == rep.kv_max_concurrency


def test_chunked_prefill_is_the_budget_analysis(built: tuple[PlanReport, Any]) -> None:
    plan, figs = built
    d = figs["chunked_prefill"]
    (dep,) = plan.deployments
    assert dep.at_peak is not None and dep.at_peak.running_requests is not None
    decodes = round(dep.at_peak.running_requests)
    sizes = [
        s for s in sorted({512, 1024, 2048, 4096, 8192, 16384, dep.max_num_batched_tokens}) if s > decodes
    ]
    rep = api.analyze(
        {
            "model": plan.model,
            "gpu": dep.gpu,
            "tp": dep.tensor_parallel_size,
            "profile": "auto",
            "chunked_prefill": {
                "prompt_tokens": round(plan.workload.p99_input_tokens),
                "decodes": decodes,
                "context_tokens": round(
                    plan.workload.mean_input_tokens + plan.workload.mean_output_tokens / 2
                ),
                "reading": "budget",
                "sizes_tokens": sizes,
            },
        }
    )
    assert isinstance(rep, ChunkedPrefillReport)
    rows = rep.rows
    assert d["budget_tokens"] == sizes and sizes
    _rows_equal(d["prompt_prefill_ms"], [r.prompt_prefill_ms for r in rows])
    _rows_equal(d["worst_itl_ms"], [r.worst_itl_ms for r in rows])
    assert d["plan_budget_tokens"] == dep.max_num_batched_tokens


def test_capacity_and_cost_are_the_plans(built: tuple[PlanReport, Any]) -> None:
    plan, figs = built
    cap, cost = figs["capacity"], figs["cost_by_gpu"]
    assert cap["demand_requests_per_s"] == [b.requests_per_s for b in plan.buckets]
    assert cap["target_requests_per_s"] == [b.requests_per_s * 1.1 for b in plan.buckets]  # headroom 0.1
    (dep,) = plan.deployments
    assert cap["provisioned_requests_per_s"] == [
        n * dep.requests_per_s_per_replica for n in dep.replicas_by_bucket
    ]
    for b, bucket in enumerate(plan.buckets):
        assert cap["provisioned_requests_per_s"][b] >= cap["target_requests_per_s"][b]  # the MILP's covering
        held = sum(g["reserved"][b] + g["on_demand"][b] for g in cap["gpus"].values())
        assert held == bucket.gpus == cap["gpus_total"][b]
        usd = sum(
            g["reserved_usd_per_hour"][b] + g["on_demand_usd_per_hour"][b] for g in cost["gpus"].values()
        )
        assert usd == pytest.approx(bucket.usd_per_hour, rel=1e-12)
    assert cap["edges_h"][0] == 0 and cap["edges_h"][-1] == pytest.approx(plan.workload.horizon_hours)


def test_latency_is_the_plans_own_verify(
    built: tuple[PlanReport, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulated figures are `capplan plan --verify`'s, asked again here through the CLI:
    the same groups, buckets, requests and percentiles, to the bit."""
    plan, figs = built
    rc, out, _ = run_cli(["plan", str(CHAT), "--verify", "--json", "--workers", "1"], capsys)
    assert rc == 0
    sim = json.loads(out)["simulated"]
    assert plan.simulated is not None and plan.simulated.model_dump(mode="json") == sim
    (group,) = figs["latency_simulated"]["groups"]
    (g,) = sim["groups"]
    assert group["bucket"] == g["bucket"] == 0 and group["simulated_requests"] == g["requests"]
    assert group["requests_per_s"] == g["requests_per_s"] == plan.workload.peak_requests_per_s
    assert group["simulated"] == {
        "ttft_ms": {"p50": g["ttft_p50_ms"], "p90": g["ttft_p90_ms"], "p99": g["ttft_p99_ms"]},
        "itl_ms": {"p50": g["itl_p50_ms"], "p90": g["itl_p90_ms"], "p99": g["itl_p99_ms"]},
    }
    # One deployment at the only bucket: the model's figures are its at_peak.
    (dep,) = plan.deployments
    at = dep.at_peak
    assert at is not None
    assert group["predicted"] == {
        "ttft_ms": {"p50": at.ttft_p50_ms, "p99": at.ttft_p99_ms},
        "itl_ms": {"p50": at.itl_p50_ms, "p99": at.itl_p99_ms},
    }


def _line(fig: Any, label: str) -> Any:
    (line,) = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == label][:1]
    return line


def test_the_artists_hold_the_data(built: tuple[PlanReport, Any]) -> None:
    plan, figs = built
    drawn = render(figs, plan.model)
    d = figs["cost_vs_concurrency"]
    ok = [i for i, f in enumerate(d["fits_in_memory"]) if f]
    cost = _line(drawn["cost_vs_concurrency"], "$ per 1M output tokens")
    assert list(cost.get_xdata()) == [d["concurrency"][i] for i in ok]
    assert list(cost.get_ydata()) == [d["usd_per_million_output_tokens"][i] for i in ok]
    c = figs["chunked_prefill"]
    assert list(_line(drawn["chunked_prefill"], "prompt prefill time").get_ydata()) == c["prompt_prefill_ms"]
    assert (
        list(_line(drawn["chunked_prefill"], "worst ITL of the running decodes").get_ydata())
        == c["worst_itl_ms"]
    )
    # The latency bars: heights are the predicted and simulated percentiles, in order.
    ttft_ax = drawn["latency_simulated"].axes[0]
    heights = [round(p.get_height(), 9) for p in ttft_ax.patches if isinstance(p, Rectangle)]
    (g,) = figs["latency_simulated"]["groups"]
    want = [*g["predicted"]["ttft_ms"].values(), *g["simulated"]["ttft_ms"].values()]
    assert heights == [round(v, 9) for v in want]


def test_files_are_byte_stable(built: tuple[PlanReport, Any], tmp_path: Path, cli_out: Path) -> None:
    """A second, separate run (plan, analyses, simulation, drawing) writes the CLI's bytes."""
    plan, figs = built
    files = write_files(plan, figs, tmp_path)
    assert sorted(f.name for f in files) == sorted(f.name for f in cli_out.iterdir())
    for f in files:
        assert f.read_bytes() == (cli_out / f.name).read_bytes(), f.name


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["report", str(CHAT), "-o", str(tmp_path), "--workers", "0"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --workers:") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


# --- the page: the whole plan --------------------------------------------------------------------


class _Page(HTMLParser):
    """Text of each <section id=...> and of the summary table, its list items and table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.items: dict[str, list[str]] = {}
        self.rows: dict[str, list[list[str]]] = {}
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ids = dict(attrs).get("id")
        if tag in ("section", "table") and ids is not None:
            self.section = ids
            self.items.setdefault(ids, [])
            self.rows.setdefault(ids, [])
        elif tag == "tr":
            self._row = []
        elif tag in ("li", "td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("li", "td", "th") and self._cell is not None and self.section is not None:
            text = "".join(self._cell)
            if tag == "li":
                self.items[self.section].append(text)
            elif self._row is not None:
                self._row.append(text)
            self._cell = None
        elif tag == "tr" and self._row is not None and self.section is not None:
            self.rows[self.section].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _page(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


def test_page_shows_binding_constraints_alternatives_and_the_check(
    cli_out: Path, built: tuple[PlanReport, Any]
) -> None:
    plan, _ = built
    page = _page(cli_out / "index.html")
    assert page.items["binding"] == plan.binding_constraints and plan.binding_constraints
    assert page.items["warnings"] == plan.warnings == []
    assert page.items["notes"] == plan.notes
    alts = page.rows["alternatives"][1:]  # the header row first
    assert [r[0] for r in alts] == [a.label for a in plan.alternatives] and alts
    for row, a in zip(alts, plan.alternatives, strict=True):
        assert row[1] == ("yes" if a.feasible else "no") and row[5] == a.reason
        if a.usd_per_month is not None:
            assert row[2] == f"${a.usd_per_month:,.0f}"
    sim = plan.simulated
    assert sim is not None
    (row,) = page.rows["simulated"][1:]
    (g,) = sim.groups
    assert row[1].startswith(f"b{g.bucket} ") and f"{g.requests:,} requests" in row[2]
    assert row[3] == f"{g.predicted_ttft_p99_ms:,.1f} ms / {g.ttft_p99_ms:,.1f} ms"
    assert row[6] == ("met" if g.slo_met else "missed")


@pytest.fixture(scope="module")
def low_traffic(tmp_path_factory: pytest.TempPathFactory) -> tuple[PlanReport, Path]:
    """A plan with a warning (its GPUs mostly idle) and cents per 1M tokens."""
    path = ROOT / "examples" / "internal-tool-low-traffic.yaml"
    out = tmp_path_factory.mktemp("low") / "out"
    assert main(["report", str(path), "-o", str(out), "--workers", "1"]) == 0
    plan = api.plan(yaml.safe_load(path.read_text()), base_dir=path.parent, workers=1, verify=True)
    return plan, out


def test_page_shows_the_plans_warnings(low_traffic: tuple[PlanReport, Path]) -> None:
    plan, out = low_traffic
    page = _page(out / "index.html")
    assert page.items["warnings"] == plan.warnings and plan.warnings
    assert any("utilization" in w for w in page.items["warnings"])


# --- readable axes and legends -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "label"),
    [(0.0, "$0"), (0.25, "$0.25"), (0.05, "$0.05"), (0.015, "$0.015"), (0.001, "$0.001"), (0.1, "$0.10"),
     (1.0, "$1"), (2.5, "$2.50"), (12.5, "$12.50"), (100.0, "$100"), (1250.0, "$1,250"), (-0.5, "-$0.50")],
)  # fmt: skip
def test_usd_formatter_keeps_the_cents(value: float, label: str) -> None:
    assert UsdFormatter(log=True)(value) == label


def test_usd_formatter_gives_a_linear_axis_one_precision() -> None:
    assert UsdFormatter().format_ticks([0.0, 0.25, 0.5, 0.75, 1.0]) == [
        "$0",
        "$0.25",
        "$0.50",
        "$0.75",
        "$1.00",
    ]
    assert UsdFormatter().format_ticks([0.0, 5.0, 10.0]) == ["$0", "$5", "$10"]
    assert usd_tick(0.3333333, 6) == "$0.333333"


def _tick_labels(fig: Any) -> list[list[tuple[float, str]]]:
    fig.canvas.draw()
    out = []
    for ax in fig.axes:
        lo, hi = sorted(ax.get_ylim())
        out.append(
            [
                (t.get_position()[1], t.get_text())
                for t in ax.get_yticklabels()
                if lo <= t.get_position()[1] <= hi and t.get_text()
            ]
        )
    return out


def test_cost_axes_read_in_dollars_and_cents(
    built: tuple[PlanReport, Any], low_traffic: tuple[PlanReport, Path]
) -> None:
    """Every money tick in view is labelled, in dollars; those below $1 with their cents (no
    `$0` but at zero), and each cost-per-token panel has at least three labels."""
    for plan, figs in (built, build(yaml.safe_load((ROOT / "examples" / "internal-tool-low-traffic.yaml").read_text()), base_dir=ROOT / "examples", workers=1)):  # fmt: skip
        drawn = render(figs, plan.model)
        for name in ("cost_vs_concurrency", "cost_by_gpu"):
            for ticks in _tick_labels(drawn[name]):
                assert len(ticks) >= (3 if name == "cost_vs_concurrency" else 2), (name, ticks)
                for v, text in ticks:
                    assert text.startswith("$") and (text != "$0" or v == 0), (name, ticks)
                    if 0 < v < 1:
                        assert text == UsdFormatter(log=True)(v) and float(text[1:]) == pytest.approx(v)
    assert any(
        0 < v < 1
        for ticks in _tick_labels(render(built[1], built[0].model)["cost_vs_concurrency"])
        for v, _ in ticks
    )  # the chat plan's tokens cost cents: the axis shows them


def _overlaps(a: Any, b: Any) -> bool:
    return bool(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)


@pytest.fixture(scope="module")
def mixed_built() -> tuple[PlanReport, dict[str, dict[str, Any]]]:
    """Two GPU types serving together: two simulated groups, the legends' most entries."""
    return build(copy.deepcopy(MIXED), workers=1)


@pytest.mark.parametrize("which", ["built", "mixed_built"])
def test_legends_cover_no_data(which: str, request: pytest.FixtureRequest) -> None:
    """Each legend lies outside every axes (the data area) and its tick labels and axis labels,
    inside the figure, and clear of the other legends."""
    plan, figs = request.getfixturevalue(which)
    for name, fig in render(figs, plan.model).items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert legends, name
        boxes = [lg.get_window_extent(renderer) for lg in legends]
        for i, box in enumerate(boxes):
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, name
            assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1, name
            for ax in fig.axes:
                for part in (ax.get_window_extent(renderer), ax.xaxis.get_tightbbox(renderer),
                             ax.yaxis.get_tightbbox(renderer), ax.title.get_window_extent(renderer)):  # fmt: skip
                    assert part is None or not _overlaps(box, part), name
            for j, other in enumerate(boxes):
                assert i == j or not _overlaps(box, other), name
