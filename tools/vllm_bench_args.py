"""Extract `vllm bench serve`'s argument names (and whether each takes a value) from a vLLM
source tree into the data file the `--emit bench` test parses emitted commands with
(tests/test_export_bench.py).

    python tools/vllm_bench_args.py --source DIR [--source-label TEXT] [--out FILE]

DIR is the root of a vLLM source tree or unpacked release wheel (it holds `vllm/`). In vLLM 0.11
`vllm bench serve` (vllm/entrypoints/cli/benchmark/serve.py) builds its parser with
`add_cli_args` of vllm/benchmarks/serve.py, which calls `add_dataset_parser` of
vllm/benchmarks/datasets.py; this reads both functions with `ast` (importing vLLM needs torch) and
records every `add_argument("--flag", ...)`: `store_true` flags take no value, `nargs` "*"/"+"
flags take a list, the rest one value. Output: planner/data/vllm/bench-serve-args-<version>.json.
Dev-time only: rerun when VLLM_IMAGE (planner/export.py) moves to another release.

Copies no vLLM code: argument names and arities as data, with their source (vLLM is Apache-2.0).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FILES = (("vllm/benchmarks/serve.py", "add_cli_args"), ("vllm/benchmarks/datasets.py", "add_dataset_parser"))
LICENSE = (
    "Argument names extracted from vLLM (https://github.com/vllm-project/vllm), Copyright contributors "
    "to the vLLM project, licensed under the Apache License 2.0"
)


def _kind(call: ast.Call) -> str:
    """`flag` (store_true / store_false: no value), `list` (nargs * or +), else `value`."""
    for kw in call.keywords:
        if (
            kw.arg == "action"
            and isinstance(kw.value, ast.Constant)
            and kw.value.value in ("store_true", "store_false")
        ):
            return "flag"
        if kw.arg == "nargs" and isinstance(kw.value, ast.Constant) and kw.value.value in ("*", "+"):
            return "list"
    return "value"


def arguments_of(tree: ast.Module, function: str) -> dict[str, str]:
    """Every `--flag` a `*.add_argument(...)` call inside `function` adds, with its kind."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument"
                ):
                    for arg in call.args:
                        if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                            out[str(arg.value)] = _kind(call)
            return out
    raise SystemExit(f"{function} not found")


def version_of(root: Path) -> tuple[str, str]:
    text = (root / "vllm" / "_version.py").read_text()
    version = re.search(r"__version__ = version = '([^']+)'", text)
    commit = re.search(r"commit_id = '([^']+)'", text)
    if version is None:
        raise SystemExit("vllm/_version.py: no version")
    return version.group(1), "" if commit is None else commit.group(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--source-label", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    version, commit = version_of(args.source)
    arguments: dict[str, str] = {}
    for path, function in FILES:
        arguments.update(arguments_of(ast.parse((args.source / path).read_text(), path), function))
    data: dict[str, Any] = {
        "vllm_version": version,
        "commit": commit,
        "source": args.source_label or f"vllm {version} source tree",
        "files": [f"{p} ({f})" for p, f in FILES],
        "license": LICENSE,
        "generated_by": "tools/vllm_bench_args.py",
        "arguments": dict(sorted(arguments.items())),
    }
    out = args.out or ROOT / "planner" / "data" / "vllm" / f"bench-serve-args-{version}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{out}: {len(arguments)} arguments")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
