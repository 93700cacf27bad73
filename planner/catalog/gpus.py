"""GPU catalog: one JSON file per GPU under data/gpus/, SI units, each value with its source.

Every sourced value is stored as {"value": x, "source": "...", "checked": "YYYY-MM-DD"} so a
report can say where a number came from. Prices are not in the GPU files: `usd_per_gpu_hour` is
filled from the price lists (planner/catalog/prices.py), the default list's price else the
fallback list's, and `price_list` names the list; a caller may override it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from planner.catalog.quantization import weight_format
from planner.errors import InvalidInput, echo
from planner.vllm_defaults import default_max_num_batched_tokens, default_max_num_seqs


class Sourced(BaseModel):
    """A number and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float | None
    source: str = Field(min_length=1)
    checked: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class GpuSpec(BaseModel):
    """One accelerator. `fp8_dense_flops_per_s` is null where the GPU has no fp8 tensor cores
    (fp8 weights then run as weight-only quantization at the bf16 matmul rate)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    display_name: str
    vendor: str
    memory_bytes: Sourced
    memory_bandwidth_bytes_per_s: Sourced
    bf16_dense_flops_per_s: Sourced
    fp8_dense_flops_per_s: Sourced
    int8_dense_ops_per_s: Sourced  # int8 tensor-core rate: W8A8 int8 GEMMs
    # FP4 tensor-core rate (NVFP4 GEMMs): Blackwell only, absent elsewhere.
    fp4_dense_flops_per_s: Sourced | None = None
    interconnect_bandwidth_bytes_per_s: Sourced  # per GPU, one direction, within a node
    interconnect_latency_s: Sourced  # per all-reduce call, small-message floor
    max_gpus_per_node: int = Field(gt=0)
    usd_per_gpu_hour: Sourced  # on-demand default, from `price_list`; overridable everywhere
    price_list: str  # the price list usd_per_gpu_hour comes from (planner.catalog.prices)
    # Total memory the driver reports (torch.cuda.mem_get_info), what vLLM budgets from: an "80 GB"
    # H100 reports 79.19 GiB. A null value: no reading, memory_bytes stands in
    # (planner.costmodel.memory.reported_memory_bytes).
    memory_reported_bytes: Sourced
    # Streaming multiprocessors (NVIDIA) or compute units (AMD): how many attention work items the
    # GPU runs at once (Profile.decode_attention_items_per_sm).
    sm_count: Sourced
    # Beyond one node (planner.costmodel.multinode, docs/multi-node.md): GPUs joined by NVLink
    # (NVSwitch: the HGX node's 8; an NVLink bridge: 2; none: 1), and each GPU's share of the
    # scale-out fabric (InfiniBand/RoCE NIC per GPU, one direction) with its per-call latency.
    nvlink_domain_gpus: Sourced
    inter_node_bandwidth_bytes_per_s: Sourced
    inter_node_latency_s: Sourced

    # Plain-float accessors: the cost model reads these, reports read the Sourced fields.
    @property
    def memory(self) -> float:
        return _req(self.memory_bytes)

    @property
    def bandwidth(self) -> float:
        return _req(self.memory_bandwidth_bytes_per_s)

    @property
    def sms(self) -> float:
        return _req(self.sm_count)

    @property
    def interconnect_bandwidth(self) -> float:
        return _req(self.interconnect_bandwidth_bytes_per_s)

    @property
    def interconnect_latency(self) -> float:
        return _req(self.interconnect_latency_s)

    @property
    def nvlink_domain(self) -> int:
        return int(_req(self.nvlink_domain_gpus))

    @property
    def inter_node_bandwidth(self) -> float:
        return _req(self.inter_node_bandwidth_bytes_per_s)

    @property
    def inter_node_latency(self) -> float:
        return _req(self.inter_node_latency_s)

    @property
    def price(self) -> float:
        return _req(self.usd_per_gpu_hour)

    def matmul_flops(self, weight_dtype: str) -> float:
        """Dense matmul rate for a weight format's GEMMs (planner.catalog.quantization): fp8 at the
        fp8 rate, falling back to bf16 where fp8 is absent; int8 W8A8 at the int8 rate; NVFP4 at
        the FP4 rate; bf16 and the weight-only int4 formats (dequantized to bf16 in the Marlin
        kernel) at the bf16 rate."""
        kind = weight_format(weight_dtype).matmul
        if kind == "fp8" and self.fp8_dense_flops_per_s.value is not None:
            return float(self.fp8_dense_flops_per_s.value)
        if kind == "int8":
            return _req(self.int8_dense_ops_per_s)
        if kind == "fp4":
            return _req(_present(self.fp4_dense_flops_per_s, f"{self.name} has no FP4 tensor cores"))
        return _req(self.bf16_dense_flops_per_s)

    @property
    def vllm_default_max_num_batched_tokens(self) -> int:
        """vLLM V1's online default for this GPU (planner.vllm_defaults)."""
        return default_max_num_batched_tokens(self.memory, self.name)

    @property
    def vllm_default_max_num_seqs(self) -> int:
        return default_max_num_seqs(self.memory, self.name)


def _present(s: Sourced | None, why: str) -> Sourced:
    if s is None:
        raise ValueError(why)
    return s


def _req(s: Sourced) -> float:
    if s.value is None:
        raise ValueError(f"value missing ({s.source})")
    return float(s.value)


@cache
def _all() -> dict[str, GpuSpec]:
    out: dict[str, GpuSpec] = {}
    root = resources.files("planner.catalog") / "data" / "gpus"
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text())
            spec = GpuSpec.model_validate({**data, **_price(data["name"])})
            out[spec.name] = spec
    return out


def _price(gpu: str) -> dict[str, object]:
    """The catalog's price of `gpu`: the default list's, else the fallback list's."""
    from planner.catalog.prices import DEFAULT_PRICE_LIST, fallback, get_price_list

    lst = get_price_list(DEFAULT_PRICE_LIST)
    if gpu not in lst.prices:
        other = fallback(gpu, DEFAULT_PRICE_LIST)
        if other is None:
            raise ValueError(f"no price list prices {gpu} (planner/catalog/data/prices)")
        lst = other
    sourced = Sourced(value=lst.prices[gpu].usd_per_gpu_hour, source=lst.source_of(gpu), checked=lst.checked)
    return {"usd_per_gpu_hour": sourced, "price_list": lst.name}


def gpu_names() -> list[str]:
    return sorted(_all())


def get_gpu(name: str, field: str = "gpu") -> GpuSpec:
    try:
        return _all()[name.lower()]
    except KeyError:
        raise InvalidInput(field, f"unknown GPU {echo(name)}; valid: {', '.join(gpu_names())}") from None
