"""Measure real vLLM serving on one GPU machine: one command, under 10 minutes, results in the
serving-run corpus format (planner/data/serving_runs/, read by `capplan validate` and `capplan
calibrate --serving`).

    python tools/measure_serving.py [--model Qwen/Qwen3-8B] [--gpu h200-sxm] [--out DIR] [--dry-run]

Steps, each logged with its time budget (a step that would pass the hard total, TOTAL_S by
default, is skipped and logged; what was measured by then is still converted):

1. install: a venv with vLLM VLLM_VERSION from the package index (uv, itself from the index;
   skipped when the venv already has that release);
2. model: `make-model` in the venv writes the catalog model's config.json
   (planner/catalog/data/models) and a word-level tokenizer built locally with `tokenizers`
   (one word per id of the config's vocabulary, so every id the dummy model samples decodes and
   every random prompt re-encodes to its ids; tokenizer.json + tokenizer_config.json): nothing is
   downloaded (HF_HUB_OFFLINE=1);
3. per `--budgets` value: `vllm serve DIR --load-format dummy` (random weights: step times as a
   real checkpoint's, the tokens meaningless) with that `--max-num-batched-tokens`, wait for
   /health, then `vllm bench serve` on the random dataset (fixed lengths, `--ignore-eos`) from
   light load to saturation: one sequence at a time, open-loop rates, a fixed concurrency and a
   burst at rate inf; each result saved (`--save-result`) with the server's flags and the vLLM
   version as `capplan.*` metadata (the keys `--emit bench` writes, planner/export_bench.py);
   the server's log (its KV-cache line) kept beside them; the server stopped;
4. convert: every saved result into one corpus file, `serving-<date>-<gpu>-<model>.json`.

Output: OUT (default out/serving/<date>-vllm<version>-<gpu>) holds raw/ (vLLM's result
files), logs/ and the corpus file. `--dry-run` prints every step's command and budget and runs
nothing. Dev-time tool: nothing in `planner` imports it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "planner" / "catalog" / "data" / "models"
VLLM_VERSION = "0.11.0"  # planner/vllm_defaults.py VLLM_RELEASE: the release plans target
TOTAL_S = 570.0  # hard total, under the 10 minutes a GPU loan allows
INSTALL_S = 240.0
MODEL_S = 60.0
SERVE_FIRST_S = 240.0  # cold start: torch.compile and CUDA graph capture
SERVE_AGAIN_S = 150.0  # later starts reuse vLLM's compile cache
BENCH_S = 60.0
STOP_S = 20.0
INPUT_LEN, OUTPUT_LEN, MAX_MODEL_LEN = 1000, 128, 4096
SEED = 0
# Light load to saturation: (label, request rate or "inf", max concurrency or None, prompts).
LOADS: tuple[tuple[str, str, int | None, int], ...] = (
    ("c1", "inf", 1, 12),
    ("r2", "2", None, 40),
    ("r8", "8", None, 120),
    ("r24", "24", None, 240),
    ("c64", "inf", 64, 256),
    ("burst", "inf", None, 400),
)
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
RESULT_STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")
RESULT_KEYS = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in RESULT_STATS),
)


def log(msg: str) -> None:
    print(f"[measure_serving {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Step:
    """One step: `argv` run as a process (`kind` run / bench), a server started (`serve`, until
    /health answers), the server stopped (`stop`), or the conversion (`convert`)."""

    name: str
    kind: str
    budget_s: float
    argv: list[str] = field(default_factory=list)
    log_file: Path | None = None


@dataclass
class Setup:
    model: str
    gpu: str
    out: Path
    venv: Path
    port: int
    budgets: list[int]
    date: str

    @property
    def model_dir(self) -> Path:
        return self.out / "model"

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def serve_argv(s: Setup, budget: int) -> list[str]:
    return [
        s.bin("vllm"), "serve", str(s.model_dir),
        "--served-model-name", s.model,
        "--tokenizer", str(s.model_dir),
        "--load-format", "dummy",
        "--tensor-parallel-size", "1",
        "--max-model-len", str(MAX_MODEL_LEN),
        "--max-num-batched-tokens", str(budget),
        "--seed", str(SEED),
        "--port", str(s.port),
    ]  # fmt: skip


def metadata(s: Setup, budget: int, rate: str) -> list[str]:
    """The `capplan.*` keys of planner/export_bench.py METADATA_KEYS; no plan, so no predictions.
    max_num_seqs is the release's default (vllm_defaults: 1024 on a >= 70 GiB GPU but A100)."""
    from planner.catalog.gpus import get_gpu

    seqs = get_gpu(s.gpu, "--gpu").vllm_default_max_num_seqs
    values = {
        "gpu": s.gpu, "model": s.model, "tensor_parallel_size": "1", "max_num_seqs": str(seqs),
        "max_num_batched_tokens": str(budget), "max_model_len": str(MAX_MODEL_LEN), "weight_dtype": "bf16",
        "kv_cache_dtype": "auto", "vllm_version": VLLM_VERSION, "role": "colocated",
        "predicted_ttft_p99_ms": "none", "predicted_itl_p99_ms": "none", "predicted_ttft_p50_ms": "none",
        "predicted_itl_p50_ms": "none", "rate_per_s": rate,
    }  # fmt: skip
    return [f"capplan.{k}={v}" for k, v in values.items()]


def bench_argv(s: Setup, budget: int, load: tuple[str, str, int | None, int]) -> list[str]:
    label, rate, conc, n = load
    argv = [
        s.bin("vllm"), "bench", "serve",
        "--backend", "vllm", "--endpoint", "/v1/completions",
        "--port", str(s.port),
        "--model", s.model, "--tokenizer", str(s.model_dir),
        "--dataset-name", "random",
        "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
        "--random-range-ratio", "0",
        "--ignore-eos",
        "--request-rate", rate, "--burstiness", "1",
        "--num-prompts", str(n), "--seed", str(SEED),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
        "--save-result", "--result-dir", str(s.out / "raw"),
        "--result-filename", f"b{budget}-{label}.json",
        "--metadata", *metadata(s, budget, rate),
    ]  # fmt: skip
    if conc is not None:
        argv[argv.index("--ignore-eos") : argv.index("--ignore-eos")] = ["--max-concurrency", str(conc)]
    return argv


def plan(s: Setup) -> list[Step]:
    """Every step, in order (module docstring)."""
    py = s.bin("python")
    # the venv has the pinned release (read from its metadata: importing vLLM would import torch)
    version = f'import importlib.metadata as m, sys; sys.exit(m.version("vllm") != "{VLLM_VERSION}")'
    check = f"{shlex.quote(py)} -c {shlex.quote(version)} 2>/dev/null"
    steps = [
        Step(
            "install",
            "run",
            INSTALL_S,
            [
                "sh",
                "-c",
                f"test -x {shlex.quote(py)} || python3 -m venv {shlex.quote(str(s.venv))}; {check} || "
                f"{{ {shlex.quote(s.bin('pip'))} install -q uv && "
                f"{shlex.quote(s.bin('uv'))} pip install --python {shlex.quote(py)} vllm=={VLLM_VERSION} && {check}; }}",
            ],
        ),
        Step(
            "gpu",
            "run",
            20.0,
            [
                "sh",
                "-c",
                f"nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > {shlex.quote(str(s.out / 'gpu.txt'))}",
            ],
        ),
        Step(
            "model",
            "run",
            MODEL_S,
            [py, str(Path(__file__).resolve()), "make-model", "--model", s.model, "--out", str(s.model_dir)],
        ),
    ]
    for i, budget in enumerate(s.budgets):
        serve_log = s.out / "logs" / f"serve-b{budget}.log"
        steps.append(Step(f"serve b{budget}", "serve", SERVE_FIRST_S if i == 0 else SERVE_AGAIN_S, serve_argv(s, budget), serve_log))  # fmt: skip
        for load in LOADS:
            bench_log = s.out / "logs" / f"bench-b{budget}-{load[0]}.log"
            steps.append(
                Step(f"bench b{budget} {load[0]}", "bench", BENCH_S, bench_argv(s, budget, load), bench_log)
            )
        steps.append(Step(f"stop b{budget}", "stop", STOP_S))
    steps.append(Step("convert", "convert", 30.0))
    return steps


# --- running ---------------------------------------------------------------------------------------


def _wait_health(port: int, proc: subprocess.Popen[bytes], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(2)
    return False


def _stop(proc: subprocess.Popen[bytes] | None, seconds: float) -> None:
    """SIGINT to the server's process group (vLLM shuts its engine core down), SIGKILL after."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(s: Setup, steps: list[Step], total_s: float) -> int:
    """Run the steps within `total_s`; a failed install, model or server start ends the run
    (what was measured is converted); a failed bench is logged and the next one runs."""
    start = time.monotonic()
    env = {**os.environ, **ENV}
    server: subprocess.Popen[bytes] | None = None
    broken = False
    for step in steps:
        left = total_s - (time.monotonic() - start)
        if step.kind == "stop" or step.kind == "convert":
            pass
        elif broken or left < min(step.budget_s, 30.0):
            log(f"skip {step.name}: {'an earlier step failed' if broken else f'{left:.0f} s left'}")
            continue
        budget = max(1.0, min(step.budget_s, left))
        t0 = time.monotonic()
        log(f"start {step.name} (budget {budget:.0f} s): {shlex.join(step.argv) if step.argv else step.kind}")
        ok = True
        if step.kind == "serve":
            assert step.log_file is not None
            with step.log_file.open("wb") as f:
                server = subprocess.Popen(
                    step.argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            ok = _wait_health(s.port, server, budget)
            if not ok:
                _stop(server, STOP_S)
                broken = True
        elif step.kind == "stop":
            _stop(server, STOP_S)
            server = None
        elif step.kind == "convert":
            out = convert(s)
            log(f"wrote {out}")
        else:
            f_out = step.log_file.open("wb") if step.log_file else None
            try:
                rc = subprocess.run(step.argv, env=env, timeout=budget, stdout=f_out, stderr=subprocess.STDOUT if f_out else None).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                rc = -1
            finally:
                if f_out:
                    f_out.close()
            ok = rc == 0
            if not ok and step.kind == "run":
                broken = True
        log(f"{'done' if ok else 'FAILED'} {step.name} in {time.monotonic() - t0:.0f} s")
    _stop(server, STOP_S)
    log(f"total {time.monotonic() - start:.0f} s")
    return 1 if broken else 0


# --- the corpus file -------------------------------------------------------------------------------


def corpus_run(s: Setup, name: str, result: dict[str, Any], gpu_name: str | None) -> dict[str, Any]:
    """One vLLM `--save-result` file as a corpus RUN (/work/wt/corpus_format.md): the server
    flags and vLLM version from its `capplan.*` metadata, the load and the figures from vLLM's
    own keys (only those present)."""
    meta = {k.removeprefix("capplan."): v for k, v in result.items() if k.startswith("capplan.")}
    budget = int(meta["max_num_batched_tokens"])
    rate = result.get("request_rate", "inf")
    slug = s.model.rsplit("/", 1)[-1].lower().replace(".", "-")
    serve = shlex.join(["vllm", "serve", s.model, *serve_argv(s, budget)[3:]])
    return {
        "id": f"capplan-{s.date}-{s.gpu}-{slug}-{Path(name).stem}",
        "where": f"raw/{name}",
        "vllm_version": meta["vllm_version"],
        "gpu": meta["gpu"],
        "gpu_as_published": gpu_name,
        "model": meta["model"],
        "model_as_published": meta["model"],
        "server": {
            "tensor_parallel_size": int(meta["tensor_parallel_size"]),
            "weight_dtype": meta["weight_dtype"],
            "kv_cache_dtype": meta["kv_cache_dtype"],
            "max_num_seqs": None,
            "max_num_batched_tokens": budget,
            "max_model_len": int(meta["max_model_len"]),
            "gpu_memory_utilization": None,
            "enable_prefix_caching": None,
            "serve_command": serve,
        },
        "bench": {
            "tool": "vllm bench serve",
            "command": None,
            "endpoint": "/v1/completions",
            "dataset": "random",
            "input_len": INPUT_LEN,
            "output_len": OUTPUT_LEN,
            "range_ratio": 0.0,
            "num_prompts": result.get("num_prompts"),
            "request_rate": rate if isinstance(rate, str) else float(rate),
            "burstiness": result.get("burstiness"),
            "max_concurrency": result.get("max_concurrency"),
        },
        "result": {k: result[k] for k in RESULT_KEYS if k in result},
        "notes": [
            "measured by tools/measure_serving.py with dummy weights (--load-format dummy) and a local "
            "word-level tokenizer: step times as the real checkpoint's, lengths fixed by --ignore-eos",
            "max_num_seqs, gpu_memory_utilization and prefix caching: the release's defaults; random prompts "
            "share no prefix",
        ],
    }


def convert(s: Setup) -> Path:
    raw = sorted((s.out / "raw").glob("*.json")) if (s.out / "raw").is_dir() else []
    gpu_txt = s.out / "gpu.txt"
    gpu_name = gpu_txt.read_text().strip().split(",")[0] if gpu_txt.is_file() else None
    runs = [corpus_run(s, p.name, json.loads(p.read_text()), gpu_name) for p in raw]
    doc = {
        "about": f"vLLM {VLLM_VERSION} on one {s.gpu} serving {s.model} with dummy weights, measured by "
        "tools/measure_serving.py: `vllm bench serve` on the random dataset from one sequence at a time to a "
        f"burst, at max_num_batched_tokens {', '.join(map(str, s.budgets))}; each run converted from vLLM's "
        "--save-result file (raw/).",
        "source": {
            "url": "tools/measure_serving.py",
            "publisher": "capplan tools/measure_serving.py",
            "license": "Apache-2.0",
            "retrieved": s.date,
        },
        "runs": runs,
    }
    slug = s.model.rsplit("/", 1)[-1].lower().replace(".", "-")
    out = s.out / f"serving-{s.date}-{s.gpu}-{slug}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


# --- make-model (runs in the vLLM venv) ------------------------------------------------------------


def config_path(model: str) -> Path:
    path = MODELS / f"{model.replace('/', '--')}.config.json"
    if not path.is_file():
        names = sorted(
            p.name.removesuffix(".config.json").replace("--", "/") for p in MODELS.glob("*.config.json")
        )
        raise SystemExit(f"--model: {model!r} is not a catalog model; one of {', '.join(names)}")
    return path


def make_model(model: str, out: Path) -> None:
    """config.json from the catalog and a word-level tokenizer over the config's whole
    vocabulary (`w<id>`; `<unk>` at 0; the config's bos/eos ids as special tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    cfg = json.loads(config_path(model).read_text())
    vocab_size = int(cfg["vocab_size"])
    special = {0: "<unk>"}
    for key, name in (("bos_token_id", "<s>"), ("eos_token_id", "</s>")):
        ids = cfg.get(key)
        for i in ids if isinstance(ids, list) else [ids] if ids is not None else []:
            special[int(i)] = special.get(int(i), name)
    vocab = {special.get(i, f"w{i}"): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(sorted(set(special.values())))
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    tok.save(str(out / "tokenizer.json"))
    eos = cfg.get("eos_token_id")
    tc = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
        "eos_token": "</s>" if eos is not None else None,
        "bos_token": "<s>" if cfg.get("bos_token_id") is not None else None,
        "model_max_length": MAX_MODEL_LEN,
        "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tc, indent=1) + "\n")
    log(f"model dir {out}: config.json, tokenizer.json ({vocab_size} words)")


# --- command line ----------------------------------------------------------------------------------


def setup_of(a: argparse.Namespace) -> Setup:
    config_path(a.model)
    date = a.date or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    out = Path(a.out) if a.out else ROOT / "out" / "serving" / f"{date}-vllm{VLLM_VERSION}-{a.gpu}"
    venv = Path(a.venv) if a.venv else ROOT / "out" / "serving" / f".venv-vllm-{VLLM_VERSION}"
    budgets = [int(x) for x in a.budgets.split(",")]
    if not budgets or any(not 256 <= b <= 65536 for b in budgets) or len(budgets) > 4:
        raise SystemExit("--budgets: 1 to 4 values in [256, 65536]")
    return Setup(a.model, a.gpu, out.resolve(), venv.resolve(), a.port, budgets, date)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen/Qwen3-8B", help="catalog model (planner/catalog/data/models)")
    ap.add_argument("--gpu", default="h200-sxm", help="capplan catalog name of the machine's GPU")
    ap.add_argument("--out", help="output dir (default out/serving/<date>-vllm<version>-<gpu>)")
    ap.add_argument("--venv", help=f"venv for vLLM (default out/serving/.venv-vllm-{VLLM_VERSION})")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--budgets", default="8192,2048", help="--max-num-batched-tokens values, one server each")
    ap.add_argument("--total-s", type=float, default=TOTAL_S, help=f"hard total in seconds (<= {TOTAL_S:g})")
    ap.add_argument("--date", help="the date stamp (default today, UTC)")
    ap.add_argument(
        "--dry-run", action="store_true", help="print every step's command and budget; run nothing"
    )
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["make-model"]:
        mp = argparse.ArgumentParser(prog="measure_serving.py make-model")
        mp.add_argument("--model", required=True)
        mp.add_argument("--out", required=True, type=Path)
        m = mp.parse_args(argv[1:])
        make_model(m.model, m.out)
        return 0
    a = ap.parse_args(argv)
    if not 0 < a.total_s <= TOTAL_S:
        raise SystemExit(f"--total-s: in (0, {TOTAL_S:g}]")
    sys.path.insert(0, str(ROOT))
    s = setup_of(a)
    steps = plan(s)
    if a.dry_run:
        print(f"# tools/measure_serving.py: {len(steps)} steps, hard total {a.total_s:g} s, out {s.out}")
        for st in steps:
            what = shlex.join(st.argv) if st.argv else f"({st.kind})"
            logs = f", log {st.log_file}" if st.log_file else ""
            print(f"# {st.name} [{st.kind}, budget {st.budget_s:g} s{logs}]\n{what}")
        return 0
    for d in (s.out / "raw", s.out / "logs"):
        d.mkdir(parents=True, exist_ok=True)
    return run(s, steps, a.total_s)


if __name__ == "__main__":
    raise SystemExit(main())
