#!/usr/bin/env python3
"""Time a model's engine steps on your GPU and write the JSON `capplan calibrate` fits.

    pip install -e '.[measure]'          # PyTorch, the optional extra
    python tools/measure_steps.py --model Qwen/Qwen3-8B --gpu h200-sxm -o h200_steps.json
    capplan calibrate h200_steps.json --model Qwen/Qwen3-8B --gpu h200-sxm -o h200.json

What it times, for any dense catalog model shape (or a config.json path), with random bf16
weights built from the ModelSpec (no download):
  linear           every layer's projections and gated MLP for T tokens (no attention, norms,
                   embedding or lm_head)
  decode           one full decode step (embedding, all layers with attention over a KV cache of
                   `ctx` tokens per sequence, final norm, lm_head) for a batch, captured once as a
                   CUDA graph and replayed
  prefill          one causal prefill of a prompt (logits for its last token only)
  chunked_prefill  a prompt prefilled in chunks, each step also carrying running decodes at a
                   fixed context; every step is timed, `prefill_ms` sums them and `worst_step_ms`
                   is the longest (the ITL the decodes saw). A chunk over a prefix uses a masked
                   attention kernel (PyTorch SDPA with a boolean mask), the first a causal one.
  ceiling          device-to-device copy bandwidth and an 8192^3 bf16 matmul
Timing: CUDA events around each measured call, `--warmup` untimed runs, the median of
`--repeats` timed runs. Configurations that do not fit in free GPU memory are skipped and listed
in the output's `about`. Mixture-of-experts models are refused (time a dense model instead: a
profile describes the GPU and its software stack, and transfers across models).

The script imports PyTorch only inside `main`, so its argument parsing, plan and output writer
are importable and tested without it (tests/test_calibrate_measure_tool.py). `--device cpu`
exists to smoke-test the script without a GPU; its timings mean nothing for a GPU profile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from planner.catalog.gpus import get_gpu
from planner.catalog.models import ModelSpec, get_model
from planner.costmodel.fit_data import Measurements, StepRow, measurements_to_json, parse_json
from planner.errors import InvalidInput

DEFAULT_LINEAR_TOKENS = "1,16,64,128,256,384,512,768,1024,2048,4096,8192"
DEFAULT_DECODE_BATCHES = "1,8,32,64,128,256"
DEFAULT_DECODE_CTX = "1500"
DEFAULT_PREFILL_PROMPTS = "512,2048,16000"
DEFAULT_CHUNKS = "512,1024,2048,4096,8192,16000"
KINDS = ("linear", "decode", "prefill", "chunked_prefill")
WORKSPACE_BYTES = 2 * 2**30  # activations, logits, allocator slack per configuration


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    gpu: str | None
    output: Path
    device: str
    repeats: int
    warmup: int
    linear_tokens: tuple[int, ...]
    decode: tuple[tuple[int, int], ...]  # (batch, ctx)
    prefill: tuple[int, ...]
    chunked: tuple[tuple[int, int, int, int], ...]  # (prompt, chunk, decodes, ctx)
    ceilings: bool
    seed: int = 0
    notes: list[str] = field(default_factory=list)


def _ints(parser: argparse.ArgumentParser, flag: str, text: str, allow_zero: bool = False) -> tuple[int, ...]:
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            v = int(item)
        except ValueError:
            parser.error(f"{flag}: expected comma-separated integers, got {item!r}")
        if v < 0 or (v == 0 and not allow_zero):
            parser.error(f"{flag}: values must be {'>= 0' if allow_zero else 'positive'}, got {v}")
        out.append(v)
    return tuple(out)


class _Parser(argparse.ArgumentParser):
    """One line on stderr and exit 2 for bad input (no usage dump), like capplan."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="measure_steps.py",
        description="Time linear, decode, prefill and chunked-prefill steps of a model shape on this GPU "
        "and write the measurements JSON that `capplan calibrate` reads.",
    )
    p.add_argument("--model", required=True, help="catalog model (e.g. Qwen/Qwen3-8B) or a config.json path")
    p.add_argument("--gpu", help="catalog name of this GPU (recorded, and checked by capplan calibrate)")
    p.add_argument("-o", "--output", required=True, help="measurements JSON to write")
    p.add_argument(
        "--device", default="cuda", help="torch device (default cuda; cpu only smoke-tests the script)"
    )
    p.add_argument("--repeats", default="10", help="timed runs per configuration; the median is kept")
    p.add_argument("--warmup", default="3", help="untimed runs before timing")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(KINDS)}")
    p.add_argument("--linear-tokens", default=DEFAULT_LINEAR_TOKENS)
    p.add_argument("--decode-batches", default=DEFAULT_DECODE_BATCHES)
    p.add_argument(
        "--decode-ctx", default=DEFAULT_DECODE_CTX, help="contexts of the decode rows (comma list)"
    )
    p.add_argument("--prefill-prompts", default=DEFAULT_PREFILL_PROMPTS)
    p.add_argument("--chunk-prompt", default="16000", help="prompt length of the chunked-prefill rows")
    p.add_argument("--chunks", default=DEFAULT_CHUNKS, help="chunk sizes of the chunked-prefill rows")
    p.add_argument("--chunk-decodes", default="64", help="decodes riding on each chunked-prefill step")
    p.add_argument("--chunk-ctx", default="1500", help="context of those decodes")
    p.add_argument("--no-ceilings", action="store_true", help="skip the copy and matmul ceiling rows")
    p.add_argument("--seed", default="0", help="seed of the random weights and token ids")
    return p


def parse_args(argv: Sequence[str] | None = None) -> Plan:
    """Everything that can be checked without PyTorch; exits 2 with one line on bad input."""
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        model = get_model(a.model, "--model")
        gpu = get_gpu(a.gpu, "--gpu").name if a.gpu else None
    except InvalidInput as exc:
        parser.error(f"{exc.field}: {exc.reason}")
    if model.is_moe:
        parser.error(
            f"--model: {model.name} is a mixture of experts; this script times dense models only "
            "(a profile describes the GPU and stack: time a dense model on the same GPU)"
        )
    kinds = set(KINDS)
    if a.only:
        kinds = {k.strip() for k in a.only.split(",")}
        bad = kinds - set(KINDS)
        if bad:
            parser.error(f"--only: unknown kind(s) {', '.join(sorted(bad))}; valid: {', '.join(KINDS)}")
    (repeats,) = _ints(parser, "--repeats", a.repeats)
    (warmup,) = _ints(parser, "--warmup", a.warmup, allow_zero=True)
    (seed,) = _ints(parser, "--seed", a.seed, allow_zero=True)
    limit = model.max_position_embeddings

    def within(flag: str, tokens: int) -> None:
        if tokens > limit:
            parser.error(f"{flag}: {tokens} tokens exceed {model.name}'s maximum context of {limit}")

    linear: tuple[int, ...] = ()
    decode: tuple[tuple[int, int], ...] = ()
    prefill: tuple[int, ...] = ()
    chunked: tuple[tuple[int, int, int, int], ...] = ()
    if "linear" in kinds:
        linear = _ints(parser, "--linear-tokens", a.linear_tokens)
    if "decode" in kinds:
        ctxs = _ints(parser, "--decode-ctx", a.decode_ctx)
        within("--decode-ctx", max(ctxs) + 1)
        decode = tuple((b, c) for c in ctxs for b in _ints(parser, "--decode-batches", a.decode_batches))
    if "prefill" in kinds:
        prefill = _ints(parser, "--prefill-prompts", a.prefill_prompts)
        within("--prefill-prompts", max(prefill))
    if "chunked_prefill" in kinds:
        (prompt,) = _ints(parser, "--chunk-prompt", a.chunk_prompt)
        (decodes,) = _ints(parser, "--chunk-decodes", a.chunk_decodes, allow_zero=True)
        (ctx,) = _ints(parser, "--chunk-ctx", a.chunk_ctx)
        within("--chunk-prompt", prompt)
        within("--chunk-ctx", ctx + 1)
        chunked = tuple((prompt, c, decodes, ctx) for c in _ints(parser, "--chunks", a.chunks))
    return Plan(
        model=model,
        gpu=gpu,
        output=Path(a.output),
        device=a.device,
        repeats=repeats,
        warmup=warmup,
        linear_tokens=linear,
        decode=decode,
        prefill=prefill,
        chunked=chunked,
        ceilings=not a.no_ceilings,
        seed=seed,
    )


# --- memory plan (pure) -------------------------------------------------------------------------


def weight_bytes(model: ModelSpec) -> int:
    return model.weight_bytes("bf16")


def config_bytes(model: ModelSpec, kind: str, **shape: int) -> int:
    """GPU memory one configuration needs beyond the weights (KV caches and a workspace)."""
    kv = model.kv_bytes_per_token("bf16")
    if kind == "decode":
        return shape["batch"] * (shape["ctx"] + 1) * kv + WORKSPACE_BYTES
    if kind == "chunked_prefill":
        return (shape["prompt"] + shape["decodes"] * (shape["ctx"] + 1)) * kv + WORKSPACE_BYTES
    if kind == "prefill":
        # q, k, v, attention output and the MLP intermediate of the whole prompt, per layer reused
        m = model
        per_token = (
            m.query_dim * 2 + 2 * m.kv_heads * m.head_dim + 3 * m.intermediate_size + 2 * m.hidden_size
        ) * 2
        return shape["prompt"] * per_token + WORKSPACE_BYTES
    if kind == "linear":
        m = model
        return (
            shape["tokens"] * (3 * m.intermediate_size + m.query_dim + 2 * m.hidden_size) * 2
            + WORKSPACE_BYTES
        )
    raise ValueError(kind)


def fits(plan: Plan, free_bytes: float, kind: str, **shape: int) -> bool:
    """Whether a configuration fits beside the weights; a skipped one is noted in the output."""
    ok = config_bytes(plan.model, kind, **shape) <= free_bytes
    if not ok:
        plan.notes.append(f"skipped {kind} {shape}: needs more than the {free_bytes / 2**30:.1f} GiB free")
    return ok


# --- output (pure) ------------------------------------------------------------------------------


def about_text(plan: Plan, device_name: str, torch_version: str) -> str:
    m = plan.model
    text = (
        f"Step times measured on one {device_name} by tools/measure_steps.py for a decoder with "
        f"{m.name}'s shapes ({m.layers} layers, hidden {m.hidden_size}, {m.attention_heads} query / "
        f"{m.kv_heads} KV heads of {m.head_dim}, MLP {m.intermediate_size}, vocab {m.vocab_size}; "
        f"random bf16 weights), PyTorch {torch_version}, "
        + (
            "decode steps replayed as CUDA graphs, "
            if plan.device.startswith("cuda")
            else "on CPU (a smoke test of the script, not a GPU profile), "
        )
        + f"median of {plan.repeats} timed runs "
        + ("with CUDA events " if plan.device.startswith("cuda") else "")
        + f"after {plan.warmup} warm-up runs. 'linear' = all "
        "layers' projections and MLP for T tokens (no attention, no lm_head). 'decode' = one full decode "
        "step for a batch at a KV context of ctx tokens. 'prefill' = one causal prefill (logits for the "
        "last token). 'chunked_prefill' = the prompt in chunks, each step with `decodes` decodes at `ctx`; "
        "prefill_ms sums the steps, worst_step_ms is the longest; chunks over a prefix use a masked SDPA "
        "kernel. 'ceiling' = device-to-device copy (bytes read + written) and an 8192^3 bf16 matmul."
    )
    if plan.notes:
        text += " Notes: " + "; ".join(plan.notes) + "."
    return text


def document(
    plan: Plan,
    rows: Sequence[StepRow],
    ceilings: dict[str, float],
    device_name: str,
    torch_version: str,
    extra_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    m = plan.model
    info: dict[str, Any] = {
        "device": device_name,
        "torch": torch_version,
        "model": m.name,
        **({"gpu": plan.gpu} if plan.gpu else {}),
        "dtype": "bf16",
        "params": m.total_params,
        "kv_bytes_per_token": m.kv_bytes_per_token("bf16"),
        "weights_bytes": m.weight_bytes("bf16"),
        "repeats": plan.repeats,
        "warmup": plan.warmup,
        **(extra_info or {}),
    }
    meas = Measurements(
        source=plan.output.name,
        rows=tuple(rows),
        about=about_text(plan, device_name, torch_version),
        info=info,
        ceilings=ceilings,
    )
    return measurements_to_json(meas)


def write_document(path: Path, doc: dict[str, Any]) -> None:
    text = json.dumps(doc, indent=1) + "\n"
    parse_json(text, path.name)  # what capplan calibrate will read: fail here, not there
    path.write_text(text)


# --- timing (PyTorch) ---------------------------------------------------------------------------


def _median_time_s(torch: Any, fn: Callable[[], Any], plan: Plan) -> float:
    """Median wall time of `fn` over plan.repeats runs after plan.warmup untimed ones."""
    for _ in range(plan.warmup):
        fn()
    times = []
    cuda = plan.device.startswith("cuda")
    for _ in range(plan.repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


class _Net:
    """Random bf16 weights with the ModelSpec's shapes and the forward pieces a step needs."""

    def __init__(self, torch: Any, model: ModelSpec, device: str, seed: int) -> None:
        self.t = torch
        self.F = torch.nn.functional
        self.m = model
        self.dev = device
        self.dt = torch.bfloat16
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        self.gen = g
        m = model
        self.hd = m.head_dim
        self.kvd = m.kv_heads * m.head_dim
        self.group = m.attention_heads // m.kv_heads

        def w(*shape: int) -> Any:
            x = torch.empty(*shape, device=device, dtype=self.dt)
            return x.normal_(0.0, 0.02, generator=g)

        def ones(n: int) -> Any:
            return torch.ones(n, device=device, dtype=self.dt)

        self.layers = []
        for _ in range(m.layers):
            layer = {
                "wqkv": w(m.query_dim + 2 * self.kvd, m.hidden_size),
                "bqkv": w(m.query_dim + 2 * self.kvd) if m.attention_bias else None,
                "wo": w(m.hidden_size, m.query_dim),
                "wgu": w(2 * m.intermediate_size, m.hidden_size),
                "wd": w(m.hidden_size, m.intermediate_size),
                "ln1": ones(m.hidden_size),
                "ln2": ones(m.hidden_size),
                "qn": ones(self.hd) if m.qk_norm else None,
                "kn": ones(self.hd) if m.qk_norm else None,
            }
            self.layers.append(layer)
        self.embed = w(m.vocab_size, m.hidden_size)
        self.lm_head = self.embed if m.tie_word_embeddings else w(m.vocab_size, m.hidden_size)
        self.norm = ones(m.hidden_size)
        half = self.hd // 2
        self.inv_freq = 1.0 / (1e6 ** (torch.arange(0, half, device=device, dtype=torch.float32) / half))

    # pieces
    def ids(self, n: int) -> Any:
        return self.t.randint(0, self.m.vocab_size, (n,), device=self.dev, generator=self.gen)

    def rms(self, x: Any, weight: Any) -> Any:
        return self.F.rms_norm(x, (x.shape[-1],), weight, 1e-6)

    def rope(self, x: Any, pos: Any) -> Any:
        """x [T, heads, hd], pos [T]: rotary embedding (neox layout)."""
        freqs = pos.float()[:, None] * self.inv_freq[None, :]
        cos, sin = freqs.cos().to(self.dt)[:, None, :], freqs.sin().to(self.dt)[:, None, :]
        x1, x2 = x.chunk(2, dim=-1)
        return self.t.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def qkv(self, layer: dict[str, Any], h: Any, pos: Any) -> tuple[Any, Any, Any]:
        m = self.m
        y = self.F.linear(h, layer["wqkv"], layer["bqkv"])
        q, k, v = y.split([m.query_dim, self.kvd, self.kvd], dim=-1)
        q = q.reshape(-1, m.attention_heads, self.hd)
        k = k.reshape(-1, m.kv_heads, self.hd)
        v = v.reshape(-1, m.kv_heads, self.hd)
        if layer["qn"] is not None:
            q, k = self.rms(q, layer["qn"]), self.rms(k, layer["kn"])
        return self.rope(q, pos), self.rope(k, pos), v

    def mlp(self, layer: dict[str, Any], h: Any) -> Any:
        g, u = self.F.linear(h, layer["wgu"]).chunk(2, dim=-1)
        return self.F.linear(self.F.silu(g) * u, layer["wd"])

    def linear_only(self, x: Any) -> Any:
        """Every layer's projections and MLP, no attention or norms (the `linear` rows)."""
        m = self.m
        for layer in self.layers:
            y = self.F.linear(x, layer["wqkv"], layer["bqkv"])
            o = self.F.linear(y[:, : m.query_dim], layer["wo"])
            x = self.mlp(layer, o)
        return x

    def attend_decode(self, q: Any, kc: Any, vc: Any) -> Any:
        """q [n, H, hd] against caches [n, KVH, S, hd]: the query heads sharing a KV head ride as
        the query-length axis, so no KV is expanded."""
        n = q.shape[0]
        qg = q.reshape(n, self.m.kv_heads, self.group, self.hd)
        o = self.F.scaled_dot_product_attention(qg, kc, vc)
        return o.reshape(n, self.m.query_dim)

    def attend_prompt(self, q: Any, k: Any, v: Any, prefix: int) -> Any:
        """q [C, H, hd]; k, v [1, KVH, prefix + C, hd]. Causal kernel without a prefix, masked with one."""
        t = self.t
        c = q.shape[0]
        qh = q.transpose(0, 1)[None]
        kw: dict[str, Any] = {}
        if prefix == 0:
            kw["is_causal"] = True
        else:
            rows = t.arange(c, device=self.dev)[:, None]
            cols = t.arange(prefix + c, device=self.dev)[None, :]
            kw["attn_mask"] = cols <= rows + prefix
        try:
            o = self.F.scaled_dot_product_attention(qh, k, v, enable_gqa=True, **kw)
        except TypeError:  # PyTorch < 2.5: expand the KV heads instead
            k = k.repeat_interleave(self.group, dim=1)
            v = v.repeat_interleave(self.group, dim=1)
            o = self.F.scaled_dot_product_attention(qh, k, v, **kw)
        return o[0].transpose(0, 1).reshape(c, self.m.query_dim)


def _decode_fn(torch: Any, net: _Net, batch: int, ctx: int, cuda: bool) -> Callable[[], Any]:
    """One decode step of `batch` sequences at context `ctx` (the new token is written at slot
    ctx, so every replay is the same step); a CUDA graph replay on CUDA."""
    m = net.m
    caches = [
        (
            torch.zeros(batch, m.kv_heads, ctx + 1, net.hd, device=net.dev, dtype=net.dt),
            torch.zeros(batch, m.kv_heads, ctx + 1, net.hd, device=net.dev, dtype=net.dt),
        )
        for _ in range(m.layers)
    ]
    ids = net.ids(batch)
    pos = torch.full((batch,), ctx, device=net.dev, dtype=torch.long)

    def step() -> Any:
        x = net.embed[ids]
        for layer, (kc, vc) in zip(net.layers, caches, strict=True):
            h = net.rms(x, layer["ln1"])
            q, k, v = net.qkv(layer, h, pos)
            kc[:, :, ctx] = k
            vc[:, :, ctx] = v
            x = x + net.F.linear(net.attend_decode(q, kc, vc), layer["wo"])
            x = x + net.mlp(layer, net.rms(x, layer["ln2"]))
        return net.F.linear(net.rms(x, net.norm), net.lm_head)

    if not cuda:
        return step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()

    def replay(keep: Any = (caches, ids, pos)) -> None:  # the graph writes into these: keep them alive
        graph.replay()

    return replay


def _chunked_steps(
    torch: Any, net: _Net, prompt: int, chunk: int, decodes: int, ctx: int
) -> list[Callable[[], Any]]:
    """The steps of a prompt prefilled in chunks beside `decodes` decodes at `ctx` (eager)."""
    m = net.m
    pcache = [
        (
            torch.zeros(1, m.kv_heads, prompt, net.hd, device=net.dev, dtype=net.dt),
            torch.zeros(1, m.kv_heads, prompt, net.hd, device=net.dev, dtype=net.dt),
        )
        for _ in range(m.layers)
    ]
    dcache = [
        (
            torch.zeros(decodes, m.kv_heads, ctx + 1, net.hd, device=net.dev, dtype=net.dt),
            torch.zeros(decodes, m.kv_heads, ctx + 1, net.hd, device=net.dev, dtype=net.dt),
        )
        for _ in range(m.layers if decodes else 0)
    ]
    prompt_ids = net.ids(prompt)
    dec_ids = net.ids(decodes)
    dec_pos = torch.full((decodes,), ctx, device=net.dev, dtype=torch.long)

    def make(p: int) -> Callable[[], Any]:
        c = min(chunk, prompt - p)
        ids = torch.cat((prompt_ids[p : p + c], dec_ids))
        pos = torch.cat((torch.arange(p, p + c, device=net.dev), dec_pos))

        def step() -> Any:
            x = net.embed[ids]
            for i, layer in enumerate(net.layers):
                h = net.rms(x, layer["ln1"])
                q, k, v = net.qkv(layer, h, pos)
                kc, vc = pcache[i]
                kc[0, :, p : p + c] = k[:c].transpose(0, 1)
                vc[0, :, p : p + c] = v[:c].transpose(0, 1)
                outs = [net.attend_prompt(q[:c], kc[:, :, : p + c], vc[:, :, : p + c], p)]
                if decodes:
                    dk, dv = dcache[i]
                    dk[:, :, ctx] = k[c:]
                    dv[:, :, ctx] = v[c:]
                    outs.append(net.attend_decode(q[c:], dk, dv))
                x = x + net.F.linear(torch.cat(outs), layer["wo"])
                x = x + net.mlp(layer, net.rms(x, layer["ln2"]))
            last = torch.cat((x[c - 1 : c], x[c:]))  # logits: the chunk's last token and the decodes
            return net.F.linear(net.rms(last, net.norm), net.lm_head)

        return step

    return [make(p) for p in range(0, prompt, chunk)]


def _time_chunked(torch: Any, steps: list[Callable[[], Any]], plan: Plan) -> tuple[float, float]:
    """Per-step medians over repeated runs of the whole prompt: (sum, max)."""
    cuda = plan.device.startswith("cuda")
    per_step: list[list[float]] = [[] for _ in steps]
    for run in range(plan.warmup + plan.repeats):
        for i, step in enumerate(steps):
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                step()
                e.record()
                e.synchronize()
                dt = s.elapsed_time(e) / 1e3
            else:
                t0 = time.perf_counter()
                step()
                dt = time.perf_counter() - t0
            if run >= plan.warmup:
                per_step[i].append(dt)
    medians = [float(statistics.median(t)) for t in per_step]
    return sum(medians), max(medians)


def measure(
    torch: Any, plan: Plan, log: Callable[[str], None]
) -> tuple[list[StepRow], dict[str, float], dict[str, Any]]:
    cuda = plan.device.startswith("cuda")
    dev = plan.device
    torch.manual_seed(plan.seed)
    net = _Net(torch, plan.model, dev, plan.seed)
    rows: list[StepRow] = []
    ceilings: dict[str, float] = {}

    def free() -> float:
        if not cuda:
            return float("inf")
        torch.cuda.empty_cache()
        return float(torch.cuda.mem_get_info()[0])

    with torch.inference_mode():
        if plan.ceilings:
            n = 2**29  # 1 GiB of bf16
            a = torch.empty(n, device=dev, dtype=torch.bfloat16)
            b = torch.empty_like(a)
            t = _median_time_s(torch, lambda: b.copy_(a), plan)
            ceilings["d2d_copy_TBps"] = 2 * n * 2 / t / 1e12
            del a, b
            a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
            b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
            t = _median_time_s(torch, lambda: a @ b, plan)
            ceilings["bf16_gemm_TFLOPs"] = 2 * 8192**3 / t / 1e12
            del a, b
            log(f"ceilings: {ceilings}")
        for tokens in plan.linear_tokens:
            if not fits(plan, free(), "linear", tokens=tokens):
                continue
            x = torch.randn(tokens, plan.model.hidden_size, device=dev, dtype=torch.bfloat16)
            t = _median_time_s(torch, partial(net.linear_only, x), plan)
            rows.append(StepRow(kind="linear", tokens=tokens, time_s=t))
            log(f"linear tokens={tokens}: {t * 1e3:.3f} ms")
            del x
        for batch, ctx in plan.decode:
            if not fits(plan, free(), "decode", batch=batch, ctx=ctx):
                continue
            fn = _decode_fn(torch, net, batch, ctx, cuda)
            t = _median_time_s(torch, fn, plan)
            rows.append(StepRow(kind="decode", batch=batch, ctx=ctx, time_s=t))
            log(f"decode batch={batch} ctx={ctx}: {t * 1e3:.3f} ms")
            del fn
        for prompt in plan.prefill:
            if not fits(plan, free(), "prefill", prompt=prompt):
                continue
            (step,) = _chunked_steps(torch, net, prompt, prompt, 0, 1)
            t = _median_time_s(torch, step, plan)
            rows.append(StepRow(kind="prefill", prompt=prompt, time_s=t))
            log(f"prefill prompt={prompt}: {t * 1e3:.3f} ms")
            del step
        for prompt, chunk, decodes, ctx in plan.chunked:
            if not fits(plan, free(), "chunked_prefill", prompt=prompt, decodes=decodes, ctx=ctx):
                continue
            steps = _chunked_steps(torch, net, prompt, chunk, decodes, ctx)
            total, worst = _time_chunked(torch, steps, plan)
            rows.append(
                StepRow(
                    kind="chunked_prefill",
                    prompt=prompt,
                    chunk=chunk,
                    decodes=decodes,
                    ctx=ctx,
                    time_s=total,
                    worst_step_s=worst,
                )
            )
            log(
                f"chunked_prefill prompt={prompt} chunk={chunk}: {total * 1e3:.1f} ms, worst {worst * 1e3:.1f} ms"
            )
            del steps
    extra = (
        {"cuda": str(torch.version.cuda)} if cuda else {"timing": "perf_counter on CPU: not a GPU profile"}
    )
    return rows, ceilings, extra


def main(argv: Sequence[str] | None = None) -> int:
    plan = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("measure_steps.py: error: PyTorch is needed: pip install -e '.[measure]'", file=sys.stderr)
        return 2
    if plan.device.startswith("cuda") and not torch.cuda.is_available():
        print("measure_steps.py: error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    device_name = torch.cuda.get_device_name(plan.device) if plan.device.startswith("cuda") else "CPU"
    need = weight_bytes(plan.model)
    if plan.device.startswith("cuda") and need > torch.cuda.mem_get_info()[0]:
        print(
            f"measure_steps.py: error: {plan.model.name}'s {need / 2**30:.1f} GiB of bf16 weights do not fit "
            "on this GPU; time a smaller dense model (the profile transfers across models)",
            file=sys.stderr,
        )
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    rows, ceilings, extra = measure(torch, plan, log)
    if not rows:
        print("measure_steps.py: error: no configuration could be timed", file=sys.stderr)
        return 2
    doc = document(plan, rows, ceilings, device_name, torch.__version__, extra)
    write_document(plan.output, doc)
    log(f"wrote {len(rows)} rows to {plan.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
