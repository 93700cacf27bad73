"""`capplan plan --emit bench`: the `vllm bench serve` line that checks one replica at its peak
load is the plan's report read by hand (lengths, rate, per-replica burstiness, prompts,
metadata), and every flag is one vLLM 0.11.0's `vllm bench serve` has (the names copied from
its source: planner/data/vllm/bench-serve-args-0.11.0.json, tools/vllm_bench_args.py)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from planner import api
from planner.export import emit
from planner.export_bench import METADATA_KEYS, bench_argv, bench_commands, num_prompts, replica_burstiness
from planner.schema.plan_report import PlanReport
from tests.cli_helpers import run_cli
from tests.plan_helpers import chat_request

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BENCH_ARGS = ROOT / "planner" / "data" / "vllm" / "bench-serve-args-0.11.0.json"


@pytest.fixture(scope="module")
def colocated() -> PlanReport:
    return api.plan(chat_request(), base_dir=EXAMPLES, workers=1)


@pytest.fixture(scope="module")
def disaggregated() -> PlanReport:
    req = chat_request(gpus=["h100-sxm"], tensor_parallel_sizes=[1, 2], disaggregation="always")
    return api.plan(req, base_dir=EXAMPLES, workers=1)


@pytest.fixture(scope="module")
def bursty() -> PlanReport:
    data = chat_request(gpus=["h100-sxm"], tensor_parallel_sizes=[1])
    data["workload"]["arrivals"] = {"requests_per_s": 40, "burstiness": 0.25}
    return api.plan(data, base_dir=EXAMPLES, workers=1)


def parse_bench(argv: list[str]) -> dict[str, Any]:
    """`vllm bench serve` argv read with vLLM 0.11.0's argument names and arities: a flag vLLM
    does not have, a value missing, or a value given to a store_true flag raises."""
    known: dict[str, str] = json.loads(BENCH_ARGS.read_text())["arguments"]
    assert argv[:3] == ["vllm", "bench", "serve"]
    out: dict[str, Any] = {}
    i = 3
    while i < len(argv):
        flag = argv[i]
        if flag not in known:
            raise ValueError(f"vllm bench serve 0.11.0 has no {flag}")
        kind, i = known[flag], i + 1
        if kind == "flag":
            out[flag] = True
        elif kind == "list":
            j = i
            while j < len(argv) and not argv[j].startswith("--"):
                j += 1
            out[flag], i = argv[i:j], j
        else:
            if i >= len(argv) or argv[i].startswith("--"):
                raise ValueError(f"{flag} needs a value")
            out[flag], i = argv[i], i + 1
    return out


def _commands(text: str) -> list[list[str]]:
    return [shlex.split(x) for x in text.splitlines() if x and not x.startswith("#")]


def test_parser_refuses_what_vllm_lacks() -> None:
    base = ["vllm", "bench", "serve"]
    assert parse_bench([*base, "--request-rate", "2", "--save-result"]) == {
        "--request-rate": "2",
        "--save-result": True,
    }
    for bad in (["--arrival-cv2", "2"], ["--request-rate"], ["--max-num-seqs", "8"], ["--percentile", "99"]):
        with pytest.raises(ValueError):
            parse_bench([*base, *bad])


def test_colocated_command_is_the_report_by_hand(colocated: PlanReport) -> None:
    (dep,) = colocated.deployments
    at, wl = dep.at_peak, colocated.workload
    assert at is not None
    got = parse_bench(bench_argv(colocated, dep))
    # lengths: prefix = round(0.2 x 1088) = 218 of the 1088-token mean prompt; the random part
    # 870 around which the p99 (4000 - 218 = 3782) would need r = (3782/870 - 1)/0.98 = 3.4,
    # capped at 0.99; the output mean 360.
    assert (wl.mean_input_tokens, wl.p99_input_tokens, wl.prefix_cache_hit_fraction) == (1087.55, 4000.0, 0.2)
    assert got["--random-prefix-len"] == "218"
    assert got["--random-input-len"] == "870"
    assert got["--random-output-len"] == "360"
    assert got["--random-range-ratio"] == "0.99"
    # one replica of three at 40 req/s, Poisson: 13.3333 req/s, burstiness 1
    assert dep.replicas_peak == 3 and at.requests_per_s_per_replica == pytest.approx(40 / 3)
    assert got["--request-rate"] == "13.3333"
    assert got["--burstiness"] == "1"
    # prompts: max(ceil(13.333 x 300) = 4000, 10 x max_num_seqs) within [500, 10000]
    assert got["--num-prompts"] == str(max(4000, 10 * dep.max_num_seqs))
    assert got["--dataset-name"] == "random" and got["--ignore-eos"] is True
    assert got["--percentile-metrics"] == "ttft,tpot,itl" and got["--metric-percentiles"] == "50,99"
    assert got["--save-result"] is True and got["--model"] == colocated.model
    meta = dict(x.split("=", 1) for x in got["--metadata"])
    assert tuple(meta) == METADATA_KEYS
    assert meta["capplan.gpu"] == dep.gpu == "h100-sxm"
    assert meta["capplan.max_num_seqs"] == str(dep.max_num_seqs)
    assert meta["capplan.max_num_batched_tokens"] == str(dep.max_num_batched_tokens)
    assert meta["capplan.max_model_len"] == dep.vllm_args[dep.vllm_args.index("--max-model-len") + 1]
    assert meta["capplan.vllm_version"] == "0.11.0"
    assert meta["capplan.role"] == "colocated"
    assert meta["capplan.kv_cache_dtype"] == "auto" and meta["capplan.weight_dtype"] == "bf16"
    for key in ("ttft_p99_ms", "itl_p99_ms", "ttft_p50_ms", "itl_p50_ms"):
        assert float(meta[f"capplan.predicted_{key}"]) == pytest.approx(getattr(at, key), rel=1e-5)
    assert meta["capplan.rate_per_s"] == "13.3333"


def test_bursty_replica_sees_its_share(bursty: PlanReport) -> None:
    """Stream k = 0.25 (CV² 4); a replica taking share s sees CV² 1 + 3 s, k = 1/(1 + 3 s)."""
    assert bursty.workload.burstiness == pytest.approx(0.25)
    assert bursty.predicted is not None
    for dep in bursty.deployments:
        at = dep.at_peak
        assert at is not None
        share = at.requests_per_s_per_replica / bursty.predicted.requests_per_s
        got = parse_bench(bench_argv(bursty, dep))
        assert float(got["--burstiness"]) == pytest.approx(1 / (1 + 3 * share), rel=1e-5)
    assert replica_burstiness(0.25, 1 / 3) == pytest.approx(0.5)
    assert replica_burstiness(0.25, 1.0) == pytest.approx(0.25)
    assert replica_burstiness(4.0, 0.5) == pytest.approx(1 / 0.625)


def test_num_prompts_rule() -> None:
    assert num_prompts(0.1, 8) == 500  # floor: 30 arrivals, 80 seats -> 500
    assert num_prompts(13.34, 243) == 4002  # ceil(13.34 x 300)
    assert num_prompts(1.0, 256) == 2560  # 10 x max_num_seqs
    assert num_prompts(1000.0, 256) == 10_000  # cap


def test_disaggregated_one_command_per_role(disaggregated: PlanReport) -> None:
    text = bench_commands(disaggregated)
    cmds = _commands(text)
    assert len(cmds) == len(disaggregated.deployments)
    for dep, argv in zip(disaggregated.deployments, cmds, strict=True):
        got = parse_bench(argv)
        meta = dict(x.split("=", 1) for x in got["--metadata"])
        assert meta["capplan.role"] == dep.role
        if dep.role == "prefill":
            assert got["--random-output-len"] == "1"
            assert meta["capplan.predicted_itl_p99_ms"] == "none"
        else:
            assert got["--random-output-len"] == "360"
            assert meta["capplan.predicted_ttft_p99_ms"] == "none"
    assert "prefill alone" in text and "P/D proxy" in text


def test_same_input_same_bytes(capsys: pytest.CaptureFixture[str], colocated: PlanReport) -> None:
    rc1, out1, _ = run_cli(["plan", str(EXAMPLES / "chat.yaml"), "--emit", "bench", "--workers", "1"], capsys)
    rc2, out2, _ = run_cli(["plan", str(EXAMPLES / "chat.yaml"), "--emit", "bench", "--workers", "1"], capsys)
    assert rc1 == rc2 == 0 and out1 == out2 == emit(colocated, "bench")
    assert out1.startswith("# ") and len(_commands(out1)) == 1


def test_the_list_is_the_release_the_plans_target_and_the_tool_reads_it(tmp_path: Path) -> None:
    """The data file is vLLM VLLM_RELEASE's; the extractor takes store_true as a flag, nargs
    "*"/"+" as a list, the rest as one value, from both functions the parser is built by."""
    import sys

    from planner.vllm_defaults import VLLM_RELEASE

    data = json.loads(BENCH_ARGS.read_text())
    assert data["vllm_version"] == VLLM_RELEASE
    sys.path.insert(0, str(ROOT / "tools"))
    import vllm_bench_args as tool

    bench = tmp_path / "vllm" / "benchmarks"
    bench.mkdir(parents=True)
    (tmp_path / "vllm" / "_version.py").write_text("__version__ = version = '9.9.9'\ncommit_id = 'gabc'\n")
    (bench / "serve.py").write_text(
        "def add_cli_args(parser):\n"
        "    add_dataset_parser(parser)\n"
        "    parser.add_argument('--request-rate', type=float)\n"
        "    g = parser.add_argument_group('x')\n"
        "    g.add_argument('--save-result', action='store_true')\n"
        "    parser.add_argument('--metadata', nargs='*')\n"
        "def other(parser):\n"
        "    parser.add_argument('--not-this')\n"
    )
    (bench / "datasets.py").write_text(
        "def add_dataset_parser(p):\n    p.add_argument('--num-prompts', type=int)\n"
    )
    out = tmp_path / "args.json"
    assert tool.main(["--source", str(tmp_path), "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["vllm_version"] == "9.9.9"
    assert got["arguments"] == {
        "--metadata": "list",
        "--num-prompts": "value",
        "--request-rate": "value",
        "--save-result": "flag",
    }
