"""Pre-quantized checkpoints that keep some linear modules unquantized, as catalog data.

A quantized checkpoint's config.json may name linear modules its quantizer left in bf16:
fbgemm_fp8's and AWQ/GPTQ's `modules_to_not_convert`, compressed-tensors' `ignore`. vLLM loads
each named module with `UnquantizedLinearMethod` (quantization/utils/quant_utils.py
`is_layer_skipped`: an exact module name; compressed-tensors also takes `re:` patterns, matched
with `re.match`), so those
matrices take two bytes a weight where the format's figure assumes fewer. One JSON file per
checkpoint under data/checkpoints/ holds that list as config.json gives it, with its source;
`unquantized_layers` turns it into the layers where each linear matrix is bf16, and
planner.costmodel.unquantized prices them. A checkpoint not in the catalog: every linear
matrix in the format (the model as before).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from planner.catalog.models import ModelSpec
from planner.catalog.quantization import WEIGHT_DTYPES

# The linear matrices of a layer, as Hugging Face Llama/Qwen/Mistral checkpoints name them.
ATTENTION_MATRICES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MATRICES = ("gate_proj", "up_proj", "down_proj")
MATRICES = ATTENTION_MATRICES + MLP_MATRICES
# Modules that are bf16 in every format capplan models (lm_head, embeddings; MoE routers too):
# a list naming them changes nothing.
ALWAYS_BF16 = ("lm_head", "model.embed_tokens")
# vLLM fuses q/k/v into qkv_proj and gate/up into gate_up_proj; a fused module is skipped only
# when every shard is, and refuses a checkpoint whose shards disagree ("Detected some but not
# all shards ... are quantized").
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
MAX_LIST = 10_000  # entries in one list (a 1,000-layer model's 7 matrices is 7,000)


@dataclass(frozen=True)
class Checkpoint:
    """One pre-quantized checkpoint: its weight format, and the modules its config keeps in
    bf16 (`unquantized`: names or `re:` patterns exactly as config.json lists them)."""

    name: str
    base_model: str
    weight_dtype: str
    quant_method: str
    unquantized: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class UnquantizedLayers:
    """Per linear matrix (MATRICES order), the layers where the checkpoint keeps it bf16."""

    by_matrix: tuple[tuple[int, ...], ...]

    def layers(self, matrix: str) -> tuple[int, ...]:
        return self.by_matrix[MATRICES.index(matrix)]

    @property
    def empty(self) -> bool:
        return not any(self.by_matrix)


def _data_dir() -> Any:
    return resources.files("planner.catalog") / "data" / "checkpoints"


def _parse(entry: dict[str, Any], file: str) -> Checkpoint:
    """A checkpoint file, checked: keys present, the format known, the list bounded."""
    keys = ("checkpoint", "base_model", "weight_dtype", "quant_method", "unquantized", "source")
    missing = [k for k in keys if k not in entry]
    if missing:
        raise ValueError(f"{file}: missing {', '.join(missing)}")
    if entry["weight_dtype"] not in WEIGHT_DTYPES or entry["weight_dtype"] == "bf16":
        raise ValueError(f"{file}: weight_dtype {entry['weight_dtype']!r} is not a quantized format")
    names = entry["unquantized"]
    if not isinstance(names, list) or len(names) > MAX_LIST or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{file}: unquantized must be a list of at most {MAX_LIST:,} module names")
    if not str(entry["source"]).startswith("https://huggingface.co/"):
        raise ValueError(f"{file}: source must be the checkpoint's config.json on Hugging Face")
    return Checkpoint(
        entry["checkpoint"], entry["base_model"], entry["weight_dtype"], entry["quant_method"],
        tuple(names), entry["source"],
    )


@cache
def _catalog() -> dict[str, Checkpoint]:
    out: dict[str, Checkpoint] = {}
    for f in sorted(_data_dir().iterdir(), key=lambda e: e.name):
        if f.name.endswith(".json"):
            c = _parse(json.loads(f.read_text()), f.name)
            out[c.name.lower()] = c
    return out


def checkpoint_names() -> list[str]:
    return sorted(c.name for c in _catalog().values())


def get_checkpoint(name: str | None) -> Checkpoint | None:
    """The catalog's entry for a Hugging Face id (case-insensitive); None when it has none."""
    return None if name is None else _catalog().get(name.lower())


def _module_names(model: ModelSpec) -> list[tuple[str, int, str | None]]:
    """(module name, layer, matrix) of every module a list may name: the linear matrices (dense
    MLPs only: a MoE model's experts are `mlp.experts.N.*`, which no catalog checkpoint keeps in
    bf16), and, with matrix None, the modules bf16 in every format here (lm_head, the
    embeddings, MoE routers `mlp.gate`), which a list may name to no effect."""
    out: list[tuple[str, int, str | None]] = [(name, -1, None) for name in ALWAYS_BF16]
    for layer in range(model.layers):
        for m in ATTENTION_MATRICES:
            out.append((f"model.layers.{layer}.self_attn.{m}", layer, m))
        if model.is_moe:
            out.append((f"model.layers.{layer}.mlp.gate", layer, None))
        else:
            for m in MLP_MATRICES:
                out.append((f"model.layers.{layer}.mlp.{m}", layer, m))
    return out


@cache
def unquantized_layers(checkpoint: Checkpoint, model: ModelSpec) -> UnquantizedLayers:
    """The layers where each matrix of `model` is bf16 in `checkpoint`. Every list entry must
    name a module of the model (a typo or another model's list is refused, not ignored), and
    fused shards must agree, as vLLM requires."""
    modules = _module_names(model)
    by_name = {name: (layer, m) for name, layer, m in modules}
    hit: dict[str, set[int]] = {m: set() for m in MATRICES}
    for entry in checkpoint.unquantized:
        if entry.startswith("re:"):  # compressed-tensors: re.match, anchored at the start only
            found = [(layer, m) for name, layer, m in modules if re.match(entry[3:], name)]
        else:  # an exact module name (fbgemm_fp8, AWQ, GPTQ; compressed-tensors without re:)
            found = [by_name[entry]] if entry in by_name else []
        if not found:
            raise ValueError(f"{checkpoint.name}: {entry!r} names no module of {model.name}")
        for layer, m in found:
            if m is not None:
                hit[m].add(layer)
    for group in FUSED:
        if len({frozenset(hit[m]) for m in group}) > 1:
            raise ValueError(f"{checkpoint.name}: {'/'.join(group)} quantized in some layers but not all shards")
    return UnquantizedLayers(tuple(tuple(sorted(hit[m])) for m in MATRICES))
