"""tools/measure_steps.py without a GPU: it imports without PyTorch, parses and checks its
arguments, plans memory, and writes exactly the format `capplan calibrate` reads. The timing
itself needs PyTorch and a GPU; a CPU smoke test runs only where PyTorch is installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tool_helpers import load_tool

from planner.catalog.models import get_model
from planner.costmodel.calibrated import fit_profile
from planner.costmodel.fit_data import StepRow, load_measurements

TOOL = Path(__file__).resolve().parents[1] / "tools" / "measure_steps.py"


ms = load_tool("measure_steps.py", "measure_steps")


def test_imports_without_torch() -> None:
    code = (
        "import sys, importlib.util; sys.modules['torch'] = None\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(TOOL)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['m'] = m; spec.loader.exec_module(m)\n"
        "sys.exit(m.main(['--model', 'Qwen/Qwen3-8B', '-o', '/dev/null']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 2
    assert "PyTorch is needed" in r.stderr and "[measure]" in r.stderr


def test_defaults_mirror_the_shipped_h200_set() -> None:
    plan = ms.parse_args(["--model", "Qwen/Qwen3-8B", "--gpu", "H200-SXM", "-o", "x.json"])
    assert plan.gpu == "h200-sxm"
    assert plan.linear_tokens == (1, 16, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096, 8192)
    assert plan.decode == tuple((b, 1500) for b in (1, 8, 32, 64, 128, 256))
    assert plan.prefill == (512, 2048, 16000)
    assert plan.chunked == tuple((16000, c, 64, 1500) for c in (512, 1024, 2048, 4096, 8192, 16000))
    assert (plan.repeats, plan.warmup, plan.ceilings, plan.device) == (10, 3, True, "cuda")


def test_only_and_lists() -> None:
    plan = ms.parse_args(
        [
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "-o",
            "x.json",
            "--only",
            "decode,linear",
            "--decode-batches",
            "1,2",
            "--decode-ctx",
            "100,4000",
            "--linear-tokens",
            "8",
            "--no-ceilings",
        ]
    )
    assert plan.decode == ((1, 100), (2, 100), (1, 4000), (2, 4000))
    assert plan.linear_tokens == (8,) and plan.prefill == () and plan.chunked == () and not plan.ceilings


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--model", "nope/nope"], "--model: unknown model"),
        (["--model", "Qwen/Qwen3-30B-A3B"], "mixture of experts"),
        (["--model", "Qwen/Qwen3-8B", "--gpu", "h900"], "--gpu: unknown GPU"),
        (["--model", "Qwen/Qwen3-8B", "--only", "warp"], "--only: unknown kind(s) warp"),
        (["--model", "Qwen/Qwen3-8B", "--repeats", "0"], "--repeats: values must be positive"),
        (["--model", "Qwen/Qwen3-8B", "--decode-batches", "1,x"], "expected comma-separated integers"),
        (
            ["--model", "Qwen/Qwen3-8B", "--chunk-prompt", "10000000"],
            "exceed Qwen/Qwen3-8B's maximum context",
        ),
    ],
)
def test_bad_arguments_exit_2_in_one_line(capsys, argv: list[str], msg: str) -> None:
    with pytest.raises(SystemExit) as exc:
        ms.parse_args([*argv, "-o", "x.json"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err


def test_memory_plan_skips_what_does_not_fit() -> None:
    plan = ms.parse_args(["--model", "Qwen/Qwen3-8B", "-o", "x.json"])
    need = ms.config_bytes(plan.model, "decode", batch=256, ctx=1500)
    assert need == 256 * 1501 * 147_456 + ms.WORKSPACE_BYTES
    assert ms.fits(plan, need, "decode", batch=256, ctx=1500)
    assert not ms.fits(plan, need - 1, "decode", batch=256, ctx=1500)
    assert plan.notes and "skipped decode" in plan.notes[0]
    assert (
        ms.config_bytes(plan.model, "chunked_prefill", prompt=16000, decodes=64, ctx=1500) > 16000 * 147_456
    )


def test_document_is_what_calibrate_reads(tmp_path: Path) -> None:
    plan = ms.parse_args(["--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "-o", str(tmp_path / "m.json")])
    plan.notes.append("skipped decode {'batch': 512}: test")
    # the shipped H200 numbers, as the tool would have produced them
    shipped = load_measurements(
        Path(__file__).resolve().parents[1] / "planner/costmodel/data/measurements/h200_qwen3_8b_shape.json"
    )
    doc = ms.document(
        plan, shipped.rows, dict(shipped.ceilings), "NVIDIA H200", "2.11.0+cu130", {"cuda": "13.0"}
    )
    ms.write_document(plan.output, doc)
    back = load_measurements(plan.output)
    assert back.info["gpu"] == "h200-sxm" and back.info["kv_bytes_per_token"] == 147_456
    assert back.info["params"] == get_model("Qwen/Qwen3-8B").total_params
    assert "skipped decode" in back.about and "CUDA graphs" in back.about
    assert [(r.kind, r.time_s, r.worst_step_s) for r in back.rows] == [
        (r.kind, r.time_s, r.worst_step_s) for r in shipped.rows
    ]
    # and the fit runs on it (the gpu recorded in info is checked against --gpu)
    cal = fit_profile(
        back, plan.model, __import__("planner.catalog.gpus", fromlist=["get_gpu"]).get_gpu("h200-sxm")
    )
    assert cal.mape < 0.10


def test_writer_refuses_a_document_calibrate_could_not_read(tmp_path: Path) -> None:
    plan = ms.parse_args(["--model", "Qwen/Qwen3-8B", "-o", str(tmp_path / "m.json")])
    doc = ms.document(plan, [StepRow(kind="linear", tokens=1, time_s=-1.0)], {}, "X", "0")
    with pytest.raises(Exception, match="ms must be a positive number"):
        ms.write_document(plan.output, doc)
    assert not plan.output.exists()


def test_cpu_smoke_run(tmp_path: Path) -> None:
    """Runs the real timing code on CPU with a tiny model, where PyTorch is installed."""
    pytest.importorskip("torch")
    cfg = tmp_path / "tiny.config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "qwen3",
                "num_hidden_layers": 2,
                "hidden_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 32,
                "intermediate_size": 256,
                "vocab_size": 512,
                "tie_word_embeddings": True,
                "max_position_embeddings": 2048,
            }
        )
    )
    out = tmp_path / "steps.json"
    rc = ms.main(
        [
            "--model",
            str(cfg),
            "--device",
            "cpu",
            "-o",
            str(out),
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--no-ceilings",
            "--linear-tokens",
            "1,32",
            "--decode-batches",
            "1,4",
            "--decode-ctx",
            "64",
            "--prefill-prompts",
            "64",
            "--chunk-prompt",
            "200",
            "--chunks",
            "64,200",
            "--chunk-decodes",
            "2",
            "--chunk-ctx",
            "32",
        ]
    )
    assert rc == 0
    m = load_measurements(out)
    assert [r.kind for r in m.rows].count("chunked_prefill") == 2
    assert "not a GPU profile" in m.about
