"""`capplan report examples/chat.yaml -o DIR`: the files exist and are valid images (PNG signature
and size, SVG parses as XML), the page bundles every figure and the plan's numbers, the data each
figure draws is what the api answers (asked here again, independently, by the rules
docs/report.md states), the artists hold exactly that data, and the output is byte-stable."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from matplotlib.patches import Rectangle

from planner import api
from planner.cli import main
from planner.deployment import Deployment
from planner.inputs import SimulateRequest, SloTargets, build_workload
from planner.plan import PlanReport, parse_plan_request
from planner.report import DPI, FIGURES, SIMULATED_REQUESTS, build, render, write_files
from planner.reports import ChunkedPrefillReport, ConcurrencyReport
from planner.workload import Arrivals
from tests.cli_helpers import run_cli

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


def test_latency_at_peak_is_the_simulation_and_the_prediction(built: tuple[PlanReport, Any]) -> None:
    plan, figs = built
    (group,) = figs["latency_at_peak"]["groups"]
    (dep,) = plan.deployments
    at = dep.at_peak
    assert at is not None
    assert group["predicted"] == {
        "ttft_ms": {"p50": at.ttft_p50_ms, "p99": at.ttft_p99_ms},
        "itl_ms": {"p50": at.itl_p50_ms, "p99": at.itl_p99_ms},
    }
    req = parse_plan_request(yaml.safe_load(CHAT.read_text()))
    workload = build_workload(req.workload)
    # one deployment serves the whole peak: its share, per replica x replicas (the report's
    # arithmetic, equal to the peak up to rounding in the last bits)
    rate = at.requests_per_s_per_replica * dep.replicas_peak
    assert rate == pytest.approx(plan.workload.peak_requests_per_s, rel=1e-12)
    sim = api.simulate(
        SimulateRequest(
            deployment=Deployment(
                model=plan.model,
                gpu=dep.gpu,
                tp=dep.tensor_parallel_size,
                replicas=dep.replicas_peak,
                max_num_seqs=dep.max_num_seqs,
                max_num_batched_tokens=dep.max_num_batched_tokens,
                gpu_memory_utilization=dep.gpu_memory_utilization,
            ),
            workload=workload.model_copy(update={"arrivals": Arrivals(requests_per_s=rate, burstiness=1.0)}),
            slo=SloTargets(ttft_p99_ms=500, itl_p99_ms=50),
            requests=SIMULATED_REQUESTS,
            series=False,
        )
    )
    assert group["simulated_requests"] == sim.requests == SIMULATED_REQUESTS
    assert group["simulated"]["ttft_ms"] == {
        "p50": sim.ttft_p50_ms,
        "p90": sim.ttft_p90_ms,
        "p99": sim.ttft_p99_ms,
    }
    assert group["simulated"]["itl_ms"] == {
        "p50": sim.itl_p50_ms,
        "p90": sim.itl_p90_ms,
        "p99": sim.itl_p99_ms,
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
    ttft_ax = drawn["latency_at_peak"].axes[0]
    heights = [round(p.get_height(), 9) for p in ttft_ax.patches if isinstance(p, Rectangle)]
    (g,) = figs["latency_at_peak"]["groups"]
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
    rc, _, err = run_cli(["report", str(CHAT), "-o", str(tmp_path), "--simulated-requests", "0"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --simulated-requests:") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())
