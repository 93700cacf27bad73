"""Step-time tables for capplan profiles, from NVIDIA aiconfigurator's measured vLLM kernel database.

aiconfigurator (Apache-2.0, https://github.com/ai-dynamo/aiconfigurator) ships per-GPU tables of
vLLM kernels timed on real hardware (GEMMs, context and generation attention, all-reduce) and
estimates a step as the sum of its operations. This dev-time tool asks its Python SDK for the
per-operation times of the steps `capplan calibrate` fits (linear, decode, prefill and chunked
prefill rows, docs/calibration.md) and writes them as capplan measurement CSVs:

    pip install -e '.[profiles]'
    python3 tools/profiles_from_aiconfigurator.py --out planner/costmodel/data/kernels

    <gpu>.csv          the fit rows: Qwen3-8B at TP 1 (`capplan calibrate <gpu>.csv --model
                       Qwen/Qwen3-8B --gpu <gpu>` reads it as it is)
    <gpu>-shapes.csv   other shapes for the cross-model check (8B at TP 2/4, 32B, 70B, the MoE
                       30B-A3B), with `model` and `tp` columns in front of the calibrate columns
    skipped.csv        every shape or row left out, and why

    python3 tools/profiles_from_aiconfigurator.py --profiles planner/costmodel/data/profiles

fits a profile per GPU to the committed tables with `capplan calibrate`'s own code (no
aiconfigurator needed) and adds the per-step engine cost that kernel sums leave out, measured on
published `vllm bench serve` runs (tests/data/vllm_bench_serve.json): see docs/calibration.md.

aiconfigurator is imported inside `aiconfigurator_source` only: the rest (grid, memory plan, how
operation times become rows, the CSV text, the profiles) is plain Python, tested without it
(tests/test_kernel_profiles.py). Same package version, same files, byte for byte.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from planner.catalog.gpus import GpuSpec, get_gpu  # noqa: E402
from planner.catalog.models import ModelSpec, get_model  # noqa: E402
from planner.costmodel.fit_data import CSV_COLUMNS  # noqa: E402

AIC_VERSION = "0.12.0"
# capplan GPU -> (aiconfigurator system, its vLLM perf-database version). The newest vLLM
# database each system ships; the A100's only vLLM database is 0.14.0.
SYSTEMS: dict[str, tuple[str, str]] = {
    "a100-80gb-sxm": ("a100_sxm", "0.14.0"),
    "h100-sxm": ("h100_sxm", "0.24.0"),
    "h200-sxm": ("h200_sxm", "0.24.0"),
    "b200": ("b200_sxm", "0.24.0"),
    "l40s": ("l40s", "0.24.0"),
}
# capplan model -> the model aiconfigurator knows by that shape (its bundled config.json).
AIC_MODELS: dict[str, str] = {
    "Qwen/Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B": "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "Qwen/Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B",
}
FIT_MODEL = "Qwen/Qwen3-8B"
FIT_TP = 1
TPS = (1, 2, 4)

# The fit grid: the H200 set's configurations (docs/calibration.md) plus long-context decodes.
FIT_LINEAR_TOKENS = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
FIT_DECODE_BATCHES = (1, 8, 32, 64, 128, 256)
DECODE_CTXS = (1000, 4000, 8000)
PREFILL_PROMPTS = (512, 2048, 8192, 16000)
CHUNK_PROMPT = 16000
FIT_CHUNKS = (512, 1024, 2048, 4096, 8192, 16000)
CHUNK_DECODES = 64
CHUNK_CTX = 1500
# The other shapes: a smaller grid, enough to compare predicted and tabled steps.
SHAPE_DECODE_BATCHES = (1, 8, 32, 128)
SHAPE_CHUNKS = (512, 2048)

# A decode row is kept only if vLLM could hold its KV cache: weights/TP + KV <= 0.9 x memory
# (vLLM's default gpu_memory_utilization) - 4 GiB (activation peak, CUDA graphs, non-torch memory;
# vLLM startup logs show 1-5 GiB for these shapes). A shape whose weights leave no room is skipped.
GPU_MEMORY_UTILIZATION = 0.9
RESERVE_BYTES = 4 * 2**30

# aiconfigurator's operation names (prefix "context_"/"generation_" removed).
LINEAR_OPS = ("qkv_gemm", "proj_gemm", "gate_ffn1_gemm", "act_gate", "ffn2_gemm")
ATTENTION_OPS = ("attention",)

KINDS_COLUMNS = tuple(c for c in CSV_COLUMNS if c != "steps")
SHAPES_COLUMNS = ("model", "tp", *KINDS_COLUMNS)


# --- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowSpec:
    """One row to extract: the fit_data kind and its integer facts."""

    kind: str
    tokens: int = 0
    batch: int = 0
    ctx: int = 0
    prompt: int = 0
    chunk: int = 0
    decodes: int = 0


@dataclass(frozen=True)
class Shape:
    model: str
    tp: int

    @property
    def is_fit(self) -> bool:
        return self.model == FIT_MODEL and self.tp == FIT_TP


@dataclass(frozen=True)
class Skip:
    gpu: str
    model: str
    tp: int
    what: str
    reason: str


def kv_budget_bytes(model: ModelSpec, gpu: GpuSpec, tp: int) -> float:
    """Bytes left for the KV cache on one GPU (negative: the weights do not fit)."""
    return GPU_MEMORY_UTILIZATION * gpu.memory - RESERVE_BYTES - model.weight_bytes("bf16") / tp


def shapes() -> list[Shape]:
    out = [Shape(FIT_MODEL, FIT_TP)]
    out += [Shape(m, tp) for m in AIC_MODELS for tp in TPS if Shape(m, tp) != out[0]]
    return out


def plan(gpu_name: str, shape: Shape) -> tuple[list[RowSpec], list[Skip]]:
    """The rows to extract for one GPU and shape, and what was left out (memory, sharding)."""
    gpu, model = get_gpu(gpu_name), get_model(shape.model)

    def skip(what: str, reason: str) -> Skip:
        return Skip(gpu_name, shape.model, shape.tp, what, reason)

    why = model.tp_error(shape.tp)
    if why:
        return [], [skip("shape", why)]
    budget = kv_budget_bytes(model, gpu, shape.tp)
    if budget <= 0:
        need = model.weight_bytes("bf16") / shape.tp / 1e9
        return [], [skip("shape", f"weights {need:.1f} GB per GPU leave no KV room on {gpu.name}")]
    kv = model.kv_bytes_per_token("bf16", shape.tp)
    rows: list[RowSpec] = []
    skips: list[Skip] = []
    if shape.is_fit:
        rows += [RowSpec("linear", tokens=t) for t in FIT_LINEAR_TOKENS]
    batches = FIT_DECODE_BATCHES if shape.is_fit else SHAPE_DECODE_BATCHES
    for b in batches:
        for c in DECODE_CTXS:
            if b * (c + 1) * kv > budget:
                gb = b * (c + 1) * kv / 1e9
                skips.append(
                    skip(f"decode batch={b} ctx={c}", f"KV {gb:.1f} GB > {budget / 1e9:.1f} GB free")
                )
            else:
                rows.append(RowSpec("decode", batch=b, ctx=c))
    rows += [RowSpec("prefill", prompt=p) for p in PREFILL_PROMPTS]
    for ch in FIT_CHUNKS if shape.is_fit else SHAPE_CHUNKS:
        rows.append(
            RowSpec("chunked_prefill", prompt=CHUNK_PROMPT, chunk=ch, decodes=CHUNK_DECODES, ctx=CHUNK_CTX)
        )
    return rows, skips


# --- operation times -> rows -------------------------------------------------------------------

OpTimes = Mapping[str, float]  # aiconfigurator operation (prefix removed) -> ms


def strip_phase(ops: Mapping[str, float]) -> dict[str, float]:
    """{'context_qkv_gemm': t} -> {'qkv_gemm': t}: one vocabulary for both phases."""
    out: dict[str, float] = {}
    for name, ms in ops.items():
        for prefix in ("context_", "generation_"):
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        out[name] = out.get(name, 0.0) + float(ms)
    return out


def total_ms(ops: OpTimes) -> float:
    return math.fsum(ops.values())


def linear_ms(ops: OpTimes) -> float:
    """A `linear` row: every layer's projections and gated MLP (activation included, as
    tools/measure_steps.py times it), no attention, norms, embedding or logits."""
    missing = [k for k in LINEAR_OPS if k not in ops]
    if missing:
        raise ValueError(f"no {', '.join(missing)} among the operations: {', '.join(sorted(ops))}")
    return math.fsum(ops[k] for k in LINEAR_OPS)


def mixed_step_ms(tokens_ops: OpTimes, chunk_attention_ms: float, decode_attention_ms: float) -> float:
    """One step of a prefill chunk and decodes, composed as vLLM runs it: every non-attention
    operation once over all the step's tokens (chunk + decodes), the chunk's attention over its
    prefix, and the decodes' attention over their contexts."""
    rest = math.fsum(v for k, v in tokens_ops.items() if k not in ATTENTION_OPS)
    return rest + chunk_attention_ms + decode_attention_ms


def chunk_offsets(prompt: int, chunk: int) -> list[tuple[int, int]]:
    """(tokens, prefix) of each chunk of a prompt, in order."""
    return [(min(chunk, prompt - p), p) for p in range(0, prompt, chunk)]


class OpSource:
    """What the extraction needs from aiconfigurator: per-operation ms of one context pass
    (`batch` prompts of `isl` tokens, the first `prefix` already cached) and of one generation
    step (`batch` sequences at context `ctx`). Tests substitute their own."""

    def context_ops(self, isl: int, prefix: int = 0, batch: int = 1) -> dict[str, float]:
        raise NotImplementedError

    def generation_ops(self, batch: int, ctx: int) -> dict[str, float]:
        raise NotImplementedError


def row_times(spec: RowSpec, src: OpSource) -> tuple[float, float | None]:
    """(ms, worst step ms or None) of one row from the source's operation times."""
    if spec.kind == "linear":
        return linear_ms(src.context_ops(spec.tokens)), None
    if spec.kind == "decode":
        return total_ms(src.generation_ops(spec.batch, spec.ctx)), None
    if spec.kind == "prefill":
        return total_ms(src.context_ops(spec.prompt)), None
    if spec.kind == "chunked_prefill":
        decode_attn = src.generation_ops(spec.decodes, spec.ctx)["attention"] if spec.decodes else 0.0
        steps = []
        for tokens, prefix in chunk_offsets(spec.prompt, spec.chunk):
            own = src.context_ops(tokens + spec.decodes)
            attn = src.context_ops(prefix + tokens, prefix)["attention"]
            steps.append(mixed_step_ms(own, attn, decode_attn))
        return math.fsum(steps), max(steps)
    raise ValueError(f"unknown kind {spec.kind!r}")


# --- CSV ---------------------------------------------------------------------------------------


def fmt_ms(ms: float) -> str:
    """Six significant digits: far below the tables' own accuracy, stable across platforms."""
    return format(ms, ".6g")


def row_cells(spec: RowSpec, ms: float, worst_ms: float | None) -> dict[str, str]:
    cells = dict.fromkeys(KINDS_COLUMNS, "")
    cells["kind"] = spec.kind
    used = {
        "linear": ("tokens",),
        "decode": ("batch", "ctx"),
        "prefill": ("prompt",),
        "chunked_prefill": ("prompt", "chunk", "decodes", "ctx"),
    }[spec.kind]
    for k in used:
        cells[k] = str(getattr(spec, k))
    cells["ms"] = fmt_ms(ms)
    if worst_ms is not None:
        cells["worst_step_ms"] = fmt_ms(worst_ms)
    return cells


def header_lines(gpu_name: str, what: str) -> list[str]:
    system, version = SYSTEMS[gpu_name]
    return [
        f"# {what}",
        f"# Source: NVIDIA aiconfigurator {AIC_VERSION} (Apache-2.0), its measured vLLM kernel database for",
        f"# system {system} (vLLM perf database {version}), bf16 weights, KV and attention; each row sums",
        "# aiconfigurator's per-operation times (planner/costmodel/data/kernels/README.md says how).",
        "# Regenerate: python3 tools/profiles_from_aiconfigurator.py --out planner/costmodel/data/kernels",
    ]


def render_csv(lines: Sequence[str], columns: Sequence[str], rows: Iterable[Mapping[str, str]]) -> str:
    buf = io.StringIO()
    for line in lines:
        buf.write(line + "\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([r[c] for c in columns])
    return buf.getvalue()


def render_skipped(skips: Iterable[Skip]) -> str:
    lines = ["# Shapes and rows tools/profiles_from_aiconfigurator.py left out, and why."]
    return render_csv(
        lines,
        ("gpu", "model", "tp", "what", "reason"),
        (
            {"gpu": s.gpu, "model": s.model, "tp": str(s.tp), "what": s.what, "reason": s.reason}
            for s in skips
        ),
    )


def extract(
    gpus: Sequence[str], source_for: Callable[[str, Shape], OpSource], log: Callable[[str], None]
) -> dict[str, str]:
    """File name -> CSV text for every GPU, from `source_for(gpu, shape)`."""
    files: dict[str, str] = {}
    all_skips: list[Skip] = []
    for gpu_name in gpus:
        fit_rows: list[dict[str, str]] = []
        shape_rows: list[dict[str, str]] = []
        for shape in shapes():
            specs, skips = plan(gpu_name, shape)
            all_skips += skips
            if not specs:
                continue
            src = source_for(gpu_name, shape)
            for spec in specs:
                ms, worst = row_times(spec, src)
                cells = row_cells(spec, ms, worst)
                if shape.is_fit:
                    fit_rows.append(cells)
                else:
                    shape_rows.append({"model": shape.model, "tp": str(shape.tp), **cells})
            log(f"{gpu_name} {shape.model} tp={shape.tp}: {len(specs)} rows")
        files[f"{gpu_name}.csv"] = render_csv(
            header_lines(
                gpu_name, f"{FIT_MODEL} at TP {FIT_TP} on {gpu_name}: the rows its profile is fitted to."
            ),
            KINDS_COLUMNS,
            fit_rows,
        )
        files[f"{gpu_name}-shapes.csv"] = render_csv(
            header_lines(gpu_name, f"Other shapes on {gpu_name}, for the cross-model check (not fitted)."),
            SHAPES_COLUMNS,
            shape_rows,
        )
    files["skipped.csv"] = render_skipped(all_skips)
    return files


# --- aiconfigurator (imported only here) ---------------------------------------------------------


def aiconfigurator_source(gpu_name: str, shape: Shape) -> OpSource:
    """An OpSource backed by aiconfigurator's SDK (SILICON database mode: measured tables, with
    its own empirical fill only for the elementwise operations it never timed)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from aiconfigurator.sdk import config
    from aiconfigurator.sdk.backends.factory import get_backend
    from aiconfigurator.sdk.inference_session import InferenceSession
    from aiconfigurator.sdk.models import get_model as aic_model
    from aiconfigurator.sdk.perf_database import get_database

    system, version = SYSTEMS[gpu_name]
    db = get_database(system, "vllm", version)
    if db is None:
        raise SystemExit(f"aiconfigurator has no vLLM {version} database for {system}")
    moe = get_model(shape.model).is_moe
    mc = config.ModelConfig(
        tp_size=shape.tp, moe_tp_size=shape.tp if moe else None, moe_ep_size=1 if moe else None
    )
    session = InferenceSession(aic_model(AIC_MODELS[shape.model], mc, "vllm"), db, get_backend("vllm"))

    class Aic(OpSource):
        def context_ops(self, isl: int, prefix: int = 0, batch: int = 1) -> dict[str, float]:
            rc = config.RuntimeConfig(batch_size=batch, isl=isl, osl=1, prefix=prefix)
            summary = session.run_static(runtime_config=rc, mode="static_ctx")
            return strip_phase(summary.get_context_latency_dict())

        def generation_ops(self, batch: int, ctx: int) -> dict[str, float]:
            # osl=2: one decode step, at context ctx (tpot = generation time / (osl - 1))
            rc = config.RuntimeConfig(batch_size=batch, isl=ctx, osl=2)
            summary = session.run_static(runtime_config=rc, mode="static_gen")
            return strip_phase(summary.get_generation_latency_dict())

    return Aic()


# --- profiles from the committed tables (no aiconfigurator) -------------------------------------

KERNELS_DIR = ROOT / "planner" / "costmodel" / "data" / "kernels"
SERVING_RESULTS = ROOT / "tests" / "data" / "vllm_bench_serve.json"
EXTRACTED_ON = "2026-11-30"  # the date the committed tables were extracted (kernels/README.md)
# GPUs whose shipped profile comes from its table. The H200 keeps the profile fitted to our own
# measured rows; its table is a cross-check of the method (docs/calibration.md).
PROFILE_GPUS = ("a100-80gb-sxm", "h100-sxm", "b200", "l40s")


@dataclass(frozen=True)
class EngineCost:
    """The per-step cost vLLM adds to the kernels, the per-request cost its front end adds to the
    time to first token, and the published runs both were read from."""

    seconds: float
    runs: tuple[str, ...]  # observation ids
    gpus: tuple[str, ...]  # where those runs were measured
    request_overhead_s: float = 0.0


def kernel_table(gpu_name: str, kernels_dir: Path = KERNELS_DIR) -> Path:
    return kernels_dir / f"{gpu_name}.csv"


def fit_kernels(
    gpu_name: str,
    kernels_dir: Path = KERNELS_DIR,
    fixed: Mapping[str, float] | None = None,
    sampled_logits: bool | None = None,
) -> Any:
    """`capplan calibrate <gpu>.csv --model Qwen/Qwen3-8B --gpu <gpu>`, as a Calibration (`fixed`
    and `sampled_logits`: the variants --report compares)."""
    from planner.costmodel.calibrated import fit_profile
    from planner.costmodel.fit_data import load_measurements
    from planner.costmodel.fitting import SAMPLED_LOGITS

    return fit_profile(
        load_measurements(kernel_table(gpu_name, kernels_dir)),
        get_model(FIT_MODEL),
        get_gpu(gpu_name),
        fixed=fixed,
        sampled_logits=SAMPLED_LOGITS if sampled_logits is None else sampled_logits,
    )


def _one_row_s(profile: Any, model: str, gpu_name: str, **row: Any) -> float:
    """One measurement row as the profile predicts it, through the same predictor the fit uses."""
    from planner.costmodel.calibrated import predict
    from planner.costmodel.fit_data import StepRow

    return predict([StepRow(**row)], get_model(model), get_gpu(gpu_name), profile)[0]


def decode_step_s(profile: Any, model: str, gpu_name: str, batch: int, ctx: int) -> float:
    """The profile's decode step."""
    return _one_row_s(profile, model, gpu_name, kind="decode", batch=batch, ctx=ctx)


def prefill_step_s(profile: Any, model: str, gpu_name: str, prompt: int) -> float:
    """One step prefilling a whole prompt on an idle engine."""
    return _one_row_s(profile, model, gpu_name, kind="prefill", prompt=prompt)


def mean_prompt(obs: Mapping[str, Any]) -> int:
    return round(obs["total_input_tokens"] / obs["num_prompts"])


def mean_context(obs: Mapping[str, Any]) -> int:
    """A decode's mean context over a run: mean input plus half the mean output."""
    n = obs["num_prompts"]
    return round(obs["total_input_tokens"] / n + obs["total_output_tokens"] / n / 2)


def load_serving(path: Path = SERVING_RESULTS) -> list[dict[str, Any]]:
    import json

    return list(json.loads(path.read_text())["observations"])


def engine_cost(serving: Sequence[Mapping[str, Any]], kernel_profiles: Mapping[str, Any]) -> EngineCost:
    """Median, over published runs at concurrency 1 (TPOT is then decode steps only: no other
    request's prefill shares them) of single-GPU bf16 models on a GPU with a kernel table, of the
    median TPOT minus the kernel-fitted decode step at that run's mean context."""
    import statistics

    used = [
        o
        for o in serving
        if o["max_concurrency"] == 1
        and o["tp"] == 1
        and o["weight_dtype"] == "bf16"
        and o["gpu"] in kernel_profiles
    ]
    if not used:
        raise SystemExit(
            "no published concurrency-1 run on a GPU with a kernel table: cannot set the engine cost"
        )
    deltas = [
        o["tpot_ms"]["median"] / 1e3
        - decode_step_s(kernel_profiles[o["gpu"]], o["model"], o["gpu"], 1, mean_context(o))
        for o in used
    ]
    engine_s = statistics.median(deltas)
    # At concurrency 1 the engine is idle when a request arrives (the previous one has finished):
    # its first token takes one step prefilling the prompt. What the published median TTFT holds
    # beyond that step (kernels + the engine cost) is the front end's.
    front = [
        o["ttft_ms"]["median"] / 1e3
        - (prefill_step_s(kernel_profiles[o["gpu"]], o["model"], o["gpu"], mean_prompt(o)) + engine_s)
        for o in used
    ]
    return EngineCost(
        seconds=engine_s,
        runs=tuple(o["id"] for o in used),
        gpus=tuple(sorted({o["gpu"] for o in used})),
        request_overhead_s=max(0.0, statistics.median(front)),
    )


def decode_attention_note(cal: Any) -> str:
    """What the fit made of the decode attention parallelism term (Profile field)."""
    a = cal.profile.decode_attention_items_per_sm
    if cal.notes:
        return "; ".join(cal.notes) + "."
    return f"decode_attention_items_per_sm = {a:.3g} fitted (the decode rows span batch x context)."


def shipped_profile(gpu_name: str, cal: Any, engine: EngineCost, table_sha256: str) -> Any:
    """The fitted efficiencies and prefix passes; per-step overhead = fitted + engine cost."""
    system, version = SYSTEMS[gpu_name]
    kernel_s = cal.profile.step_overhead_s
    kinds = ", ".join(sorted({r["kind"] for r in cal.rows}))
    where = (
        f"measured on {', '.join(engine.gpus)}"
        if engine.gpus == (gpu_name,)
        else f"measured on {', '.join(engine.gpus)} and applied here unchanged (host-side cost; no published "
        f"low-concurrency vLLM run on {gpu_name} was found)"
    )
    source = (
        f"Fitted by capplan calibrate to NVIDIA aiconfigurator {AIC_VERSION}'s measured vLLM kernel tables "
        f"(system {system}, vLLM perf database {version}; extracted {EXTRACTED_ON}): "
        f"planner/costmodel/data/kernels/{gpu_name}.csv (sha256 {table_sha256[:12]}...), {len(cal.rows)} timings "
        f"of {FIT_MODEL} at TP {FIT_TP} ({kinds}); in-sample MAPE {100 * cal.mape:.1f}%. "
        f"{decode_attention_note(cal)} "
        f"step_overhead_s = {1e3 * kernel_s:.3f} ms fitted to the kernel sums + {1e3 * engine.seconds:.3f} ms "
        "vLLM engine cost per step (scheduling, sampling, detokenizing, streaming), the median TPOT minus the "
        f"kernel-fitted decode step of published vllm bench serve runs at concurrency 1 "
        f"(tests/data/vllm_bench_serve.json: {', '.join(engine.runs)}), {where}. "
        f"request_overhead_s = {1e3 * engine.request_overhead_s:.1f} ms per request (vLLM's front end: HTTP, chat "
        "template, tokenizing, streaming), the median TTFT of the same runs minus one step prefilling the mean "
        "prompt on the idle engine."
    )
    return cal.profile.model_copy(
        update={
            "name": f"{gpu_name}-aiconfigurator-vllm",
            "step_overhead_s": kernel_s + engine.seconds,
            "request_overhead_s": engine.request_overhead_s,
            "source": source,
        }
    )


def build_profiles(kernels_dir: Path = KERNELS_DIR, serving_path: Path = SERVING_RESULTS) -> dict[str, Any]:
    """GPU -> the profile that ships for it, from the committed tables and serving results."""
    import hashlib

    cals = {g: fit_kernels(g, kernels_dir) for g in PROFILE_GPUS}
    engine = engine_cost(load_serving(serving_path), {g: c.profile for g, c in cals.items()})
    out = {}
    for g, cal in cals.items():
        digest = hashlib.sha256(kernel_table(g, kernels_dir).read_bytes()).hexdigest()
        out[g] = shipped_profile(g, cal, engine, digest)
    return out


def load_shapes_text(text: str, name: str) -> dict[Shape, Any]:
    """A `<gpu>-shapes.csv` as one Measurements per (model, TP), read by fit_data's CSV reader."""
    from planner.costmodel.fit_data import parse_csv

    records = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    groups: dict[Shape, list[dict[str, str]]] = {}
    for r in csv.DictReader(records):
        groups.setdefault(Shape(r["model"], int(r["tp"])), []).append(r)
    return {
        shape: parse_csv(render_csv([], KINDS_COLUMNS, group), f"{name} [{shape.model} tp={shape.tp}]")
        for shape, group in groups.items()
    }


def load_shapes(path: Path) -> dict[Shape, Any]:
    return load_shapes_text(path.read_text(), path.name)


def shape_step_times_s(rep: Any, row: Any) -> list[float]:
    """A decode, prefill or chunked_prefill row as the planner times it (Replica's step code; the
    same reading as the fit's: a chunked row is its steps, decodes riding on each at `ctx`):
    [time] or, for a chunked row, [total, worst step]."""
    from planner.costmodel.roofline import chunks

    if row.kind == "decode":
        return [rep.step_time_s((), row.batch, row.batch * row.ctx)]
    if row.kind == "prefill":
        return [rep.step_time_s([(row.prompt, 0)], 0, 0.0)]
    if row.kind == "chunked_prefill":
        steps = [
            rep.step_time_s([cp], row.decodes, row.decodes * row.ctx) for cp in chunks(row.prompt, row.chunk)
        ]
        return [math.fsum(steps), max(steps)]
    raise ValueError(f"{row.kind} rows are not part of the cross-model check")


def cross_model_errors(
    gpu_name: str, profile: Any, kernels_dir: Path = KERNELS_DIR, kinds: Iterable[str] | None = None
) -> dict[Shape, list[float]]:
    """Relative error (predicted / tabled - 1) of every timing of the other shapes (of `kinds`
    only, if given), predicted by a profile fitted on the fit shape: the profile is a GPU's, so
    it must carry to other models."""
    from planner.costmodel.roofline import Replica

    out: dict[Shape, list[float]] = {}
    gpu = get_gpu(gpu_name)
    only = None if kinds is None else set(kinds)
    for shape, meas in load_shapes(kernels_dir / f"{gpu_name}-shapes.csv").items():
        rep = Replica(model=get_model(shape.model), gpu=gpu, tp=shape.tp, profile=profile)
        errs: list[float] = []
        for row in meas.rows:
            if only is not None and row.kind not in only:
                continue
            tabled = [row.time_s] if row.worst_step_s is None else [row.time_s, row.worst_step_s]
            errs += [p / t - 1.0 for p, t in zip(shape_step_times_s(rep, row), tabled, strict=True)]
        out[shape] = errs
    return out


def report(
    kernels_dir: Path = KERNELS_DIR,
    fixed: Mapping[str, float] | None = None,
    sampled_logits: bool | None = None,
    log: Callable[[str], None] = print,
) -> None:
    """The per-GPU figures of docs/calibration.md: each table's fit (parameters, in-sample MAPE)
    and its cross-model check (MAPE and mean error per other shape), from the committed tables."""
    import statistics

    from planner.costmodel.fitting import PARAMETERS, mape
    from planner.costmodel.steptime import query_heads_per_kv_head

    for gpu_name in SYSTEMS:
        cal = fit_kernels(gpu_name, kernels_dir, fixed, sampled_logits)
        params = ", ".join(f"{k} {getattr(cal.profile, k):.4g}" for k in PARAMETERS)
        log(
            f"{gpu_name}: {len(cal.rows)} timings, in-sample MAPE {100 * cal.mape:.2f}% "
            f"(max {100 * cal.max_abs_error:.0f}%); {params}"
        )
        for shape, errs in cross_model_errors(gpu_name, cal.profile, kernels_dir).items():
            log(
                f"    {shape.model} tp={shape.tp}: MAPE {100 * mape(errs):.1f}%, "
                f"mean {100 * statistics.mean(errs):+.1f}% ({len(errs)} timings)"
            )
        # the prefix re-read per query head against the same fit charged per KV byte (P = q G)
        g = query_heads_per_kv_head(get_model(FIT_MODEL))
        per_kv = cal.profile.model_copy(
            update={
                "prefix_kv_passes": cal.profile.prefix_query_kv_passes * g,
                "prefix_query_kv_passes": 0.0,
            }
        )
        chunked = ("chunked_prefill",)
        for (shape, q), kv in zip(
            cross_model_errors(gpu_name, cal.profile, kernels_dir, chunked).items(),
            cross_model_errors(gpu_name, per_kv, kernels_dir, chunked).values(),
            strict=True,
        ):
            if query_heads_per_kv_head(get_model(shape.model), shape.tp) != g:
                log(
                    f"    chunked rows of {shape.model} tp={shape.tp}: re-read per query head "
                    f"{100 * mape(q):.1f}% (mean {100 * statistics.mean(q):+.1f}%), per KV byte "
                    f"{100 * mape(kv):.1f}% (mean {100 * statistics.mean(kv):+.1f}%)"
                )


# --- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Extract vLLM step-time tables from aiconfigurator's kernel database as capplan "
        "measurement CSVs, and/or fit the shipped profiles to the committed tables (see the module docstring)."
    )
    p.add_argument("--out", help="extract the tables (needs aiconfigurator) into this directory")
    p.add_argument("--profiles", help="fit and write the profile JSONs (one per GPU) into this directory")
    p.add_argument(
        "--report",
        action="store_true",
        help="print every table's fit and cross-model check (docs/calibration.md's per-GPU figures)",
    )
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --report: hold a parameter (the variants docs/calibration.md compares)",
    )
    p.add_argument(
        "--seed-accounting",
        action="store_true",
        help="with --report: the seed's vocabulary accounting (every token through the lm_head)",
    )
    p.add_argument(
        "--gpus",
        default=",".join(SYSTEMS),
        help=f"comma-separated capplan GPUs to extract (default: all of {', '.join(SYSTEMS)})",
    )
    a = p.parse_args(argv)
    if not a.out and not a.profiles and not a.report:
        p.error("nothing to do: pass --out DIR (extract tables), --profiles DIR (fit profiles) or --report")
    fixed: dict[str, float] = {}
    for item in a.fix:
        name, _, value = item.partition("=")
        try:
            fixed[name.strip()] = float(value)
        except ValueError:
            p.error(f"--fix: expected NAME=VALUE, got {item!r}")
    a.fix = fixed
    gpus = [g.strip() for g in a.gpus.split(",") if g.strip()]
    unknown = [g for g in gpus if g not in SYSTEMS]
    if not gpus or unknown:
        p.error(f"--gpus: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(SYSTEMS)}")
    a.gpus = gpus
    return a


def check_version() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("aiconfigurator-core")
    except PackageNotFoundError:
        raise SystemExit(
            f"aiconfigurator is not installed: pip install -e '.[profiles]' (aiconfigurator=={AIC_VERSION})"
        ) from None
    if found != AIC_VERSION:
        raise SystemExit(f"aiconfigurator-core {found} installed; the tables are pinned to {AIC_VERSION}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.out:
        check_version()
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        files = extract(args.gpus, aiconfigurator_source, lambda s: print(s, file=sys.stderr))
        if args.gpus != list(SYSTEMS):  # a partial run must not drop the other GPUs' skips
            files.pop("skipped.csv")
        for name, text in files.items():
            (out / name).write_text(text)
            print(out / name)
    if args.profiles:
        from planner.costmodel.profile import profile_to_json

        target = Path(args.profiles)
        target.mkdir(parents=True, exist_ok=True)
        kernels = Path(args.out) if args.out else KERNELS_DIR
        for gpu_name, prof in build_profiles(kernels).items():
            path = target / f"{gpu_name}.json"
            path.write_text(profile_to_json(prof))
            print(path)
    if args.report:
        report(
            Path(args.out) if args.out else KERNELS_DIR,
            args.fix,
            False if args.seed_accounting else None,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
