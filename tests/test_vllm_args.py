"""Every flag a plan emits is one `vllm serve` of the release planner/export.py deploys accepts,
with a value it accepts: checked against the argument list tools/vllm_serve_args.py extracted
from that release's source (planner/data/vllm/serve-args-<version>.json). The extraction tool
itself is checked on a small source tree written here in vLLM's shape.
"""

from __future__ import annotations

import copy
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from planner.export import VLLM_IMAGE
from planner.plan import plan

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = ROOT / "planner" / "data" / "vllm"
RELEASE = VLLM_IMAGE.rsplit(":v", 1)[1]  # vllm/vllm-openai:v0.11.0 -> 0.11.0


@cache
def serve_args() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"serve-args-{RELEASE}.json").read_text())
    return data


def _value_errors(flag: str, value: str, kind: dict[str, Any]) -> list[str]:
    """Why vLLM would refuse `value` for an argument of this kind (argparse's type and choices;
    JSON arguments: pydantic's field names and literal choices)."""
    t = kind["type"]
    if t == "json":
        try:
            obj = json.loads(value)
        except json.JSONDecodeError as exc:
            return [f"{flag} {value!r}: not JSON ({exc})"]
        fields = kind.get("fields")
        if fields is None or not isinstance(obj, dict):
            return []
        out = []
        for key, v in obj.items():
            if key not in fields:
                out.append(f"{flag}: {key!r} is no field of it")
            elif "choices" in fields[key] and v not in fields[key]["choices"]:
                out.append(f"{flag}: {key} {v!r} is not one of {fields[key]['choices']}")
        return out
    parse = {"int": int, "float": float}.get(t, str)
    try:
        parsed = parse(value)
    except ValueError:
        return [f"{flag} {value!r}: not {t}"]
    if "choices" in kind and parsed not in kind["choices"]:
        return [f"{flag} {value!r}: not one of {kind['choices']}"]
    return []


def flag_errors(args: list[str]) -> list[str]:
    """Every flag of `args` (after `vllm serve MODEL`) that vLLM would refuse."""
    known = serve_args()["arguments"]
    out: list[str] = []
    i = 0
    while i < len(args):  # each step consumes a flag and its value, if it takes one
        flag = args[i]
        kind = known.get(flag)
        if kind is None:
            out.append(f"{flag}: not an argument of vllm serve {RELEASE}")
            i += 1
            continue
        if kind["type"] == "bool":
            i += 1
            continue
        if i + 1 >= len(args) or args[i + 1].startswith("--"):
            out.append(f"{flag}: takes a value")
            i += 1
            continue
        out += _value_errors(flag, args[i + 1], kind)
        i += 2
    return out


def test_the_list_is_the_release_the_plans_deploy() -> None:
    data = serve_args()
    assert data["vllm_version"] == RELEASE
    assert data["commit"] and data["files"] and "Apache" in data["license"]
    # the arguments the plans rely on, as vLLM 0.11.0's arg_utils.py declares them
    args = data["arguments"]
    assert args["--max-model-len"]["type"] == "int"
    assert "fp8" in args["--kv-cache-dtype"]["choices"] and "fp8" in args["--quantization"]["choices"]
    kv_role = args["--kv-transfer-config"]["fields"]["kv_role"]["choices"]
    assert set(kv_role) == {"kv_producer", "kv_consumer", "kv_both"}  # vllm/config/kv_transfer.py


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--max-model-length", "8192"], "not an argument"),
        (["--max-model-len", "8k1"], "not int"),
        (["--kv-cache-dtype", "fp4"], "not one of"),
        (["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"producer"}'], "not one of"),
        (["--kv-transfer-config", '{"kv_connector":"NixlConnector","role":"kv_both"}'], "no field"),
        (["--max-num-seqs"], "takes a value"),
    ],
)
def test_the_check_refuses_what_vllm_refuses(args: list[str], why: str) -> None:
    errors = flag_errors(args)
    assert errors and why in errors[0], errors


def _plan_requests() -> list[tuple[str, dict[str, Any]]]:
    """Every plan example, and a small request in every role, dtype and threshold a plan emits."""
    import yaml

    out = []
    for f in sorted(EXAMPLES.glob("*.yaml")):
        data = yaml.safe_load(f.read_text())
        if "deployment" not in data:  # evaluate/simulate examples have no plan
            out.append((f.name, data))
    small: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": 800, "itl_p99_ms": 60},
        "workload": {
            "arrivals": {"requests_per_s": 6.0},
            "input_tokens": {"pairs": [[700, 0.7], [3000, 0.3]]},
            "output_tokens": {"pairs": [[150, 0.8], [600, 0.2]]},
        },
        "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2]},
    }
    for name, cands in {
        "fp8": {"weight_dtype": "fp8", "kv_dtype": "fp8", "disaggregation": "never"},
        "threshold": {"long_prefill_token_thresholds": [1024], "disaggregation": "never"},
        "disaggregated": {"disaggregation": "always", "weight_dtype": "fp8", "kv_dtype": "fp8"},
    }.items():
        req = copy.deepcopy(small)
        req["candidates"].update(cands)
        out.append((name, req))
    lora = copy.deepcopy(small)  # every LoRA flag, --max-cpu-loras included
    lora["candidates"]["disaggregation"] = "never"
    lora["lora"] = {"max_loras": 4, "max_lora_rank": 16, "max_cpu_loras": 16}
    out.append(("lora", lora))
    return out


def test_every_flag_a_plan_emits_is_an_argument_of_the_release() -> None:
    seen: set[str] = set()
    roles: set[str] = set()
    for name, req in _plan_requests():
        report = plan(req, base_dir=EXAMPLES, workers=1)
        assert report.deployments, f"{name}: {report.status}"
        for dep in report.deployments:
            errors = flag_errors(dep.vllm_args)
            assert not errors, f"{name} {dep.id}: {errors}"
            seen.update(a for a in dep.vllm_args if a.startswith("--"))
            roles.add(dep.role)
    # the sweep covered every flag a plan can emit
    assert roles == {"colocated", "prefill", "decode"}
    assert seen == {
        "--tensor-parallel-size", "--max-model-len", "--max-num-batched-tokens", "--max-num-seqs",
        "--gpu-memory-utilization", "--long-prefill-token-threshold", "--quantization", "--kv-cache-dtype",
        "--kv-transfer-config", "--enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras",
        # multi-node replicas (examples/llama405b-fp8-2x8-h100.yaml)
        "--pipeline-parallel-size", "--distributed-executor-backend",
        "--enable-expert-parallel",  # examples/qwen30b-a3b-ep4-h100.yaml
        "--speculative-config",
    }  # fmt: skip


# --- the extraction tool -------------------------------------------------------------------------

CLI_ARGS = """
from dataclasses import dataclass
from typing import Literal, Optional

@dataclass
class FrontendArgs:
    port: int = 8000
    log_level: Literal["debug", "info"] = "info"
    allow_credentials: bool = False

def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--api-server-count", "-asc", type=int, default=1)
    parser.add_argument("--config")
    return parser
"""

ARG_UTILS = """
import argparse
from vllm.config import CacheConfig, VllmConfig
from vllm.engine.helpers import pick

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        cache_kwargs = get_kwargs(CacheConfig)
        group = parser.add_argument_group("cache")
        group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
        group.add_argument("--block-size", **cache_kwargs["block_size"])
        group.add_argument("--enable-prefix-caching", **cache_kwargs["enable_prefix_caching"])
        group.add_argument("--gpu-memory-utilization", **cache_kwargs["gpu_memory_utilization"])
        vllm_kwargs = get_kwargs(VllmConfig)
        parser.add_argument("--kv-transfer-config", **vllm_kwargs["kv_transfer_config"])
        parser.add_argument("--reasoning-parser", choices=list(pick()))
        for arg in ("--old-a", "--old-b"):
            parser.add_argument(arg, deprecated=True)
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
        return parser
"""

CONFIG_INIT = """
from vllm.config.cache import CacheConfig
from vllm.config.kv_transfer import KVTransferConfig

class VllmConfig:
    kv_transfer_config: Optional[KVTransferConfig] = None
"""

CACHE = """
from typing import TYPE_CHECKING, Literal, Optional
if TYPE_CHECKING:
    from vllm.config.dtypes import CacheDType
else:
    CacheDType = Any
BlockSize = Literal[8, 16, 32]

class CacheConfig:
    cache_dtype: CacheDType = "auto"
    block_size: Optional[BlockSize] = None
    enable_prefix_caching: Optional[bool] = None
    gpu_memory_utilization: float = 0.9
"""

DTYPES = """
Fp8 = Literal["fp8", "fp8_e4m3"]
CacheDType = Literal["auto", Fp8]
"""

KV_TRANSFER = """
KVProducer = Literal["kv_producer", "kv_both"]
KVConsumer = Literal["kv_consumer", "kv_both"]
KVRole = Literal[KVProducer, KVConsumer]

class KVTransferConfig:
    kv_connector: Optional[str] = None
    kv_role: Optional[KVRole] = None
    kv_port: int = 14579
    _private: int = 0
"""


def test_the_tool_reads_arguments_as_vllm_builds_them(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import vllm_serve_args as tool
    finally:
        sys.path.remove(str(ROOT / "tools"))
    files = {
        "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
        "vllm/engine/arg_utils.py": ARG_UTILS,
        "vllm/config/__init__.py": CONFIG_INIT,
        "vllm/config/cache.py": CACHE,
        "vllm/config/dtypes.py": DTYPES,
        "vllm/config/kv_transfer.py": KV_TRANSFER,
        "vllm/_version.py": "__version__ = version = '9.9.9'\n__commit_id__ = commit_id = 'gabc'\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    out = tmp_path / "out.json"
    assert tool.main(["--source", str(tmp_path), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["vllm_version"], data["commit"]) == ("9.9.9", "gabc")
    args = data["arguments"]
    assert "model_tag" not in args
    assert args["--headless"]["type"] == "bool" and "--no-headless" not in args  # store_true
    assert args["-asc"] == args["--api-server-count"] and args["-asc"]["type"] == "int"
    assert args["--config"]["type"] == "str"
    assert args["--port"]["type"] == "int" and args["--log-level"]["choices"] == ["debug", "info"]
    assert "--no-allow-credentials" in args  # a bool field: BooleanOptionalAction
    # a Literal alias of aliases, imported under TYPE_CHECKING (an `Any` stand-in at run time)
    assert args["--kv-cache-dtype"] == {
        "aliases": ["--kv-cache-dtype"], "type": "str", "choices": ["auto", "fp8", "fp8_e4m3"],
    }  # fmt: skip
    assert args["--block-size"]["choices"] == [8, 16, 32] and args["--block-size"]["type"] == "int"
    assert args["--enable-prefix-caching"]["type"] == "bool" and "--no-enable-prefix-caching" in args
    assert args["--gpu-memory-utilization"]["type"] == "float"
    kv = args["--kv-transfer-config"]
    assert kv["type"] == "json" and sorted(kv["fields"]) == ["kv_connector", "kv_port", "kv_role"]
    assert kv["fields"]["kv_role"]["choices"] == ["kv_producer", "kv_both", "kv_consumer"]
    assert "--no-enable-log-requests" in args
    assert "choices" not in args["--reasoning-parser"]  # computed at run time: not guessed
    assert len(data["unresolved"]) == 2 and "--old-a" not in args
    assert data["files"] == sorted(set(files) - {"vllm/_version.py"})
