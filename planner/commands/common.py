"""What the subcommands share: flag text -> request values, request field paths -> flag names in
errors, and printing a report (its JSON dump, or a rendering of it).

Flags are taken as text and handed to the request as is: the request models own every range
(planner/schema/inputs.py), so a flag and a YAML key are checked by the same rule. An error about a
field a flag set is reported under the flag (`--requests-per-s: ...`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import InvalidInput, echo

if TYPE_CHECKING:  # `capplan --help` imports no pydantic
    from pydantic import BaseModel


# The exit status of every command (README.md; `capplan plan --help`).
EXIT_OK = 0  # an answer (for plan: a plan)
EXIT_INTERNAL = 1  # a bug, or a service that failed
EXIT_BAD_INPUT = 2  # one line on stderr naming the field
EXIT_NO_PLAN = 3  # an INFEASIBLE or NO_SOLUTION plan (its report printed), or nothing to emit or draw


def flag_name(field: str) -> str:
    """`context_tokens` -> `--context-tokens`."""
    return "--" + field.replace("_", "-")


class Flags:
    """Which request fields came from which flags, to name the flag when a field is refused."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def alias(self, path: str, flag: str) -> None:
        self.paths[path] = flag

    def put(self, data: MutableMapping[str, Any], path: str, value: Any, flag: str) -> None:
        """Set `data[path]` (dotted) to a flag's value, unless the flag was not given. A parent
        the file wrote as something other than a mapping is left for validation to refuse."""
        if value is None:
            return
        *parents, key = path.split(".")
        node: MutableMapping[str, Any] = data
        for part in parents:
            child = node.get(part)
            if child is None:
                child = {}
            elif not isinstance(child, Mapping):
                return
            node[part] = child = dict(child)
            node = child
        node[key] = value
        self.paths[path] = flag

    def translate(self, exc: InvalidInput) -> InvalidInput:
        """An error about a field a flag set, named by the flag: `slo.ttft_p99_ms` ->
        `--slo-ttft-p99-ms`; a part below the flag's field goes into the reason
        (`concurrency.concurrency[1]` -> `--concurrency: [1]: ...`) except a trace's line
        (`trace:line 3.ContextTokens` -> `--trace:line 3.ContextTokens`)."""
        field = exc.field
        for path in sorted(self.paths, key=len, reverse=True):
            flag = self.paths[path]
            if field == path:
                return InvalidInput(flag, exc.reason)
            if field.startswith(path) and field[len(path)] == ":":
                return InvalidInput(flag + field[len(path) :], exc.reason)
            if field.startswith(path) and field[len(path)] in ".[":
                return InvalidInput(flag, f"{field[len(path) :].lstrip('.')}: {exc.reason}")
        return exc

    @contextmanager
    def named(self) -> Iterator[None]:
        try:
            yield
        except InvalidInput as exc:
            named = self.translate(exc)
            if named is exc:
                raise
            raise named from None


@contextmanager
def computing() -> Iterator[None]:
    """While a command computes, whatever writes to standard output (a solver's C++ log line
    written straight to file descriptor 1, a library's print, a subprocess, the worker processes
    a plan forks, which inherit descriptor 1 as it is when they start) goes to stderr: stdout
    carries the command's answer and nothing else (`--json | python -m json.tool`). Descriptor 1
    is pointed at descriptor 2 and restored, C's stdio buffers flushed first, before the answer
    is printed. No descriptor 1 (closed): nothing to keep clean."""
    if sys.stdout is not None:
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    try:
        try:
            os.dup2(2, 1)
        except OSError:  # no stderr either: the output is dropped
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _flush_c_stdio()
        if sys.stdout is not None:
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _flush_c_stdio() -> None:
    """fflush(NULL): what native code printed is still in C's buffer (a pipe is fully buffered)
    and would reach the restored stdout at exit."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to ask (not POSIX): nothing buffered there
        pass


def split_list(text: str | None, none_as: str | None = None) -> list[str] | None:
    """'1,8, 32' -> ['1', '8', '32'] (the request validates each); `none_as` replaces 'none'."""
    if text is None:
        return None
    items = [item.strip() for item in text.split(",")]
    if none_as is not None:
        items = [none_as if item.lower() == "none" else item for item in items]
    return items


def pairs(flag: str, text: str) -> list[list[str]]:
    """'100:0.5,300:0.5' -> [['100', '0.5'], ['300', '0.5']] (a length distribution's pairs)."""
    out: list[list[str]] = []
    for item in text.split(","):
        tokens, sep, prob = item.strip().partition(":")
        if not sep:
            raise InvalidInput(flag, f"expected TOKENS:PROBABILITY items, got {echo(item.strip())}")
        out.append([tokens.strip(), prob.strip()])
    return out


def cwd_path(text: str | None, builtin: Sequence[str] = ()) -> str | None:
    """A path given on the command line is relative to the working directory, while paths in a
    request are relative to its file: make an existing one absolute (built-in names, and names no
    file can have, stay as written)."""
    if text is None or text in builtin:
        return text
    try:
        return str(Path(text).absolute()) if Path(text).exists() else text
    except (OSError, ValueError):  # a name no file can have (too long, NUL): its reader refuses it
        return text


def emit(report: BaseModel, as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    data = report.model_dump(mode="json")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(render(data) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


PROFILE_HELP = {
    "auto": "auto (the default: the built-in calibrated profile where one ships for the GPU, else "
    "theoretical), theoretical (roofline bound), calibrated, or a profile JSON file",
    "theoretical": "theoretical (roofline bound, the default here), calibrated, auto (calibrated where "
    "one ships for the GPU), or a profile JSON file",
}


def add_profile_flag(p: argparse.ArgumentParser, default: str) -> None:
    """`--profile`, the same choices everywhere; the default is the request's (not set here,
    so a file's `profile:` holds unless the flag is given)."""
    p.add_argument("--profile", help=PROFILE_HELP[default])


def add_price_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--usd-per-gpu-hour", help="GPU price (default: the catalog's on-demand price)")


SLO_FLAGS = (
    ("--slo-ttft-p99-ms", "ttft_p99_ms", "TTFT p99 target"),
    ("--slo-itl-p99-ms", "itl_p99_ms", "ITL p99 target"),
    ("--slo-tpot-p99-ms", "tpot_p99_ms", "TPOT p99 target (simulate: also per request, for goodput)"),
    ("--slo-e2e-p99-ms", "e2el_p99_ms", "end-to-end latency p99 target (simulate: also per request)"),
)


def add_slo_flags(p: argparse.ArgumentParser, which: Sequence[str]) -> None:
    """SLO flags, the same names and meaning for every command that takes them; each overrides
    that target of the file's `slo:` and keeps the others."""
    for flag, _, help_ in SLO_FLAGS:
        if flag in which:
            p.add_argument(flag, help=help_)


def add_concurrency_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--concurrency",
        help="a closed loop of this many clients (1 .. 100000; vllm bench serve --max-concurrency): "
        "workload.arrivals.concurrency; a requests_per_s in the file is then its rate cap",
    )


def put_slo_flags(args: argparse.Namespace, data: MutableMapping[str, Any], flags: Flags) -> None:
    for flag, key, _ in SLO_FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"), None)
        flags.put(data, f"slo.{key}", value, flag)


def deployment_line(dep: Mapping[str, Any]) -> str:
    """'Qwen/Qwen3-8B on h100-sxm x TP2, 2 replicas, colocated (4 GPUs)' from a deployment block."""
    tp = f" x TP{dep['tp']}" if dep["tp"] > 1 else ""
    pp = dep.get("pipeline_parallel_size") or 1
    tp += f" x PP{pp}" if pp > 1 else ""
    if dep["mode"] == "disaggregated":
        shape = f"disaggregated: {dep['prefill_replicas']} prefill + {dep['decode_replicas']} decode replicas"
    else:
        shape = f"{dep['replicas']} replica{'s' if dep['replicas'] != 1 else ''}, colocated"
    gpus = dep["replicas"] * dep["tp"] * pp
    return f"{dep['model']} on {dep['gpu']}{tp}, {shape} ({gpus} GPU{'s' if gpus != 1 else ''})"


def warning_lines(warning: str | None) -> list[str]:
    """A report's warning as the human summary shows it: one `warning:` line, none when unset."""
    return [] if warning is None else [f"warning: {warning}"]


def lora_lines(lora: dict[str, Any] | None, indent: str = "  ") -> list[str]:
    """The LoRA adapters' memory and the KV cache left beside them (none without LoRA)."""
    if lora is None:
        return []
    return [
        f"{indent}LoRA: {lora['max_loras']} adapters of rank {lora['max_lora_rank']}, "
        f"{lora['adapter_gib']:.2f} GiB per GPU; KV cache left {lora['kv_cache_gib']:.2f} GiB per GPU "
        f"({lora['kv_cache_tokens']:,} tokens)"
    ]


def expert_parallel_lines(ep: dict[str, Any] | None, indent: str = "  ") -> list[str]:
    """The EP group, the experts one GPU holds and a DP rank's KV cache (none without EP)."""
    if ep is None:
        return []
    dp = ep["data_parallel_size"]
    ranks = f", {dp} DP ranks per instance (replicas count ranks)" if dp > 1 else ""
    return [
        f"{indent}expert parallel: EP {ep['ep_size']}{ranks}, {ep['experts_per_gpu']} experts per GPU "
        f"({ep['expert_gib_per_gpu']:.2f} GiB), routing skew {ep['routing_skew']:g}; KV cache "
        f"{ep['kv_cache_tokens_per_rank']:,} tokens per rank"
    ]


def speculative_lines(sd: dict[str, Any] | None, indent: str = "  ") -> list[str]:
    """Speculative decoding's k, alpha, tokens a step, the proposer's memory and the KV left
    (none without it)."""
    if sd is None:
        return []
    return [
        f"{indent}speculative decoding: {sd['method']} k={sd['num_speculative_tokens']} at acceptance "
        f"{sd['acceptance_rate']:.3g}: {sd['tokens_per_step']:.3g} tokens a step (TPOT = ITL / "
        f"{sd['tokens_per_step']:.3g}); proposer {sd['proposer_gib']:.2f} GiB per GPU, KV cache "
        f"{sd['kv_cache_tokens']:,} tokens"
    ]
