"""tools/measure_serving.py without a GPU: the dry run prints every step within the hard total,
every `vllm serve` flag is one vLLM 0.11.0's serve has and every `vllm bench serve` flag one its
bench has, and a vLLM `--save-result` file converts to a corpus run with its metadata's flags."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from planner.export_bench import METADATA_KEYS
from tests.test_export_bench import parse_bench
from tests.test_vllm_args import flag_errors

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import measure_serving as ms  # noqa: E402


def _dry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[tuple[str, list[str]]]:
    assert (
        ms.main(
            ["--dry-run", "--date", "2026-12-05", "--out", str(tmp_path / "o"), "--venv", str(tmp_path / "v")]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert not (tmp_path / "o").exists() and not (tmp_path / "v").exists()  # runs nothing
    out = []
    for head, cmd in zip(lines[1::2], lines[2::2], strict=True):
        assert head.startswith("# ")
        out.append((head, shlex.split(cmd)))
    return out


def test_dry_run_prints_the_whole_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    steps = _dry(capsys, tmp_path)
    names = [h.split(" [")[0][2:] for h, _ in steps]
    assert names[:3] == ["install", "gpu", "model"] and names[-1] == "convert"
    serves = [argv for _, argv in steps if argv[1:2] == ["serve"]]
    benches = [argv for _, argv in steps if argv[1:3] == ["bench", "serve"]]
    assert len(serves) == 2 and len(benches) == 2 * len(ms.LOADS)
    install = steps[0][1][-1]
    assert f"vllm=={ms.VLLM_VERSION}" in install
    for argv in serves:
        assert flag_errors(argv[3:]) == []
        assert argv[argv.index("--load-format") + 1] == "dummy"
        assert argv[argv.index("--tokenizer") + 1] == argv[2]  # the local model dir
    budgets = {argv[argv.index("--max-num-batched-tokens") + 1] for argv in serves}
    assert budgets == {"8192", "2048"}
    rates = set()
    for argv in benches:
        got = parse_bench(["vllm", *argv[1:]])
        meta = dict(x.split("=", 1) for x in got["--metadata"])
        assert tuple(meta) == METADATA_KEYS and meta["capplan.vllm_version"] == ms.VLLM_VERSION
        assert got["--save-result"] is True and got["--ignore-eos"] is True
        rates.add((got["--request-rate"], got.get("--max-concurrency")))
    assert ("inf", "1") in rates and ("inf", None) in rates  # one at a time .. a burst


def test_the_hard_total_is_under_ten_minutes() -> None:
    assert ms.TOTAL_S < 600
    with pytest.raises(SystemExit):
        ms.main(["--dry-run", "--total-s", "900"])
    with pytest.raises(SystemExit, match="--model"):
        ms.main(["--dry-run", "--model", "nobody/none"])


def test_a_saved_result_becomes_a_corpus_run(tmp_path: Path) -> None:
    s = ms.Setup("Qwen/Qwen3-8B", "h200-sxm", tmp_path, tmp_path / "v", 8000, [2048], "2026-12-05")
    argv = ms.bench_argv(s, 2048, ("r8", "8", None, 120))
    meta = dict(x.split("=", 1) for x in argv[argv.index("--metadata") + 1 :])
    # what vLLM 0.11 writes (vllm/benchmarks/serve.py: metadata as top-level keys, then traffic)
    result = {
        "date": "20261205-120000", "backend": "vllm", "model_id": "Qwen/Qwen3-8B", "num_prompts": 120,
        **meta, "request_rate": 8.0, "burstiness": 1.0, "max_concurrency": None,
        "duration": 16.2, "completed": 120, "total_input_tokens": 120000, "total_output_tokens": 15360,
        "request_throughput": 7.4, "mean_ttft_ms": 41.0, "p99_ttft_ms": 80.5, "median_itl_ms": 7.1,
        "input_lens": [1000] * 120,
    }  # fmt: skip
    run = ms.corpus_run(s, "b2048-r8.json", result, "NVIDIA H200")
    assert run["id"] == "capplan-2026-12-05-h200-sxm-qwen3-8b-b2048-r8"
    assert run["vllm_version"] == "0.11.0" and run["gpu"] == "h200-sxm" and run["model"] == "Qwen/Qwen3-8B"
    assert run["server"]["max_num_batched_tokens"] == 2048 and run["server"]["max_model_len"] == 4096
    assert "--load-format dummy" in run["server"]["serve_command"]
    assert run["bench"]["request_rate"] == 8.0 and run["bench"]["num_prompts"] == 120
    assert run["bench"]["input_len"] == 1000 and run["bench"]["max_concurrency"] is None
    assert run["result"] == {
        "duration": 16.2, "completed": 120, "total_input_tokens": 120000, "total_output_tokens": 15360,
        "request_throughput": 7.4, "mean_ttft_ms": 41.0, "median_itl_ms": 7.1, "p99_ttft_ms": 80.5,
    }  # fmt: skip
    assert list(run)[:4] == ["id", "where", "vllm_version", "gpu"]
