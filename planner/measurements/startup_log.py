"""vLLM's start-up log: the size of the KV cache it allocated and the flags it was started with.

The lines read, as vLLM prints them (the first match of each counts; a log holding several
starts should be cut to one):

    GPU KV cache size: 1,234,560 tokens                     v1 engine (0.8+), kv_cache_utils.py
    Maximum concurrency for 32,768 tokens per request: 37.68x   v1, and v0 from 0.6.4
    # GPU blocks: 7713, # CPU blocks: 2048                  v0 (0.6), gpu_executor.py
    # cuda blocks: 7713, # CPU blocks: 2048                 v0 (0.6.x-0.7), executor_base.py
    Available KV cache memory: 33.42 GiB                    v1 gpu_worker.py
    non-default args: {'model': ..., 'max_num_seqs': 256}   0.9+, cli_args.py (a Python dict)

`settings_overrides()` turns the non-default args into `ServingRun` settings overrides.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput, echo
from planner.files import MEASUREMENTS, read_text

__all__ = ["StartupLog", "looks_like_startup_log", "parse_startup_log", "read_startup_log"]

MAX_ARGS_CHARS = 65_536  # the non-default args dict's text
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BLOCKS = re.compile(r"# (\w+) blocks: (\d+), # CPU blocks: (\d+)")
_AVAILABLE = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
_ARGS = re.compile(r"non-default args: (.*?)\s*$")
_ARG_PAIR = re.compile(r"'(\w+)': ('[^'\\]*'|-?\d+(?:\.\d+)?(?:[eE]-?\d+)?|True|False|None)(?=[,}])")
_VERSION = re.compile(r"vLLM API server version ([0-9][\w.+-]*)")
# non-default args -> ServingRun settings (same names; dtype words mapped below)
_ARG_SETTINGS = (
    "model",
    "tensor_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "kv_cache_dtype",
)


class StartupLog(BaseModel):
    """What a start-up log says about the KV cache (None where the release does not print it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kv_cache_tokens: int | None = Field(default=None, ge=0)
    gpu_blocks: int | None = Field(default=None, ge=0)
    max_concurrency: float | None = Field(default=None, ge=0.0)  # requests of max_model_len tokens
    max_model_len: int | None = Field(default=None, ge=1)  # from the concurrency line
    available_kv_cache_gib: float | None = None  # negative: vLLM refuses to start
    vllm_version: str | None = None
    non_default_args: dict[str, Any] = Field(default_factory=dict)

    def settings_overrides(self) -> dict[str, Any]:
        """The server flags the log names, as overrides for the measurement readers."""
        args = self.non_default_args
        out: dict[str, Any] = {k: args[k] for k in _ARG_SETTINGS if k in args}
        if "kv_cache_dtype" in out:
            out["kv_cache_dtype"] = "fp8" if str(out["kv_cache_dtype"]).startswith("fp8") else "auto"
        if args.get("quantization") == "fp8":
            out["weight_dtype"] = "fp8"
        if self.max_model_len is not None:
            out.setdefault("max_model_len", self.max_model_len)
        if self.vllm_version is not None:
            out["vllm_version"] = self.vllm_version
        return out


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _args(text: str, lineno: int, field: str) -> dict[str, Any]:
    """The dict a `non-default args:` line prints. Some releases print values that are not
    literals (a config object's repr); then the simple `'name': literal` pairs are kept."""
    if len(text) > MAX_ARGS_CHARS:
        raise InvalidInput(
            field, f"line {lineno}: non-default args is {len(text):,} chars; at most {MAX_ARGS_CHARS:,}"
        )
    try:
        value = ast.literal_eval(text)  # literals only: no code runs
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pairs = _ARG_PAIR.finditer(text) if text.startswith("{") else iter(())
        value = {m.group(1): ast.literal_eval(m.group(2)) for m in pairs}
        if not value:
            raise InvalidInput(
                field, f"line {lineno}: non-default args is not a dict of literals: {echo(text)}"
            ) from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidInput(field, f"line {lineno}: non-default args is not a dict of names")
    return value


def _match_line(found: dict[str, Any], line: str, lineno: int, field: str) -> None:
    """Record what `line` says (first occurrence of each line kind wins)."""
    if "kv_cache_tokens" not in found and (m := _KV_TOKENS.search(line)):
        found["kv_cache_tokens"] = _int(m.group(1))
    if "max_concurrency" not in found and (m := _CONCURRENCY.search(line)):
        found["max_model_len"], found["max_concurrency"] = _int(m.group(1)), float(m.group(2))
    if "gpu_blocks" not in found and (m := _BLOCKS.search(line)) and m.group(1).lower() in ("gpu", "cuda"):
        found["gpu_blocks"] = int(m.group(2))
    if "available_kv_cache_gib" not in found and (m := _AVAILABLE.search(line)):
        found["available_kv_cache_gib"] = float(m.group(1))
    if "vllm_version" not in found and (m := _VERSION.search(line)):
        found["vllm_version"] = m.group(1)
    if "non_default_args" not in found and (m := _ARGS.search(line)):
        found["non_default_args"] = _args(m.group(1), lineno, field)


def parse_startup_log(text: str, field: str = "log") -> StartupLog:
    """The KV-cache figures and flags in a log's text; a log with none of the lines is refused."""
    found: dict[str, Any] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        _match_line(found, line, lineno, field)
    if not any(k in found for k in ("kv_cache_tokens", "gpu_blocks", "available_kv_cache_gib")):
        raise InvalidInput(
            field,
            "no KV cache line (expected 'GPU KV cache size: N tokens', '# GPU blocks: N' or "
            "'Available KV cache memory: X GiB')",
        )
    return StartupLog(**found)


def looks_like_startup_log(text: str) -> bool:
    """Whether `text` holds one of the KV cache lines."""
    return any(r.search(text) for r in (_KV_TOKENS, _BLOCKS, _AVAILABLE))


def read_startup_log(path: str | Path, field: str = "log") -> StartupLog:
    """`parse_startup_log` of a file read within the measurements limit (16 MiB)."""
    text = read_text(path, field, MEASUREMENTS, encoding="utf-8")
    return parse_startup_log(text, f"{field} {path}" if field != str(path) else field)
