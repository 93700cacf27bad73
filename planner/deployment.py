"""A deployment to evaluate: model, GPU, tensor parallelism, replicas, vLLM scheduler flags, and
colocated or disaggregated (prefill / decode pools joined by a KV-transfer link).

`Deployment` is what a user writes (YAML `deployment:`); `Deployment.resolve(profile)` looks up
the catalogs, fills vLLM's defaults for the GPU and sizes the KV cache, giving a
`ResolvedDeployment` of plain values for the latency model's hot path. Every error names the
field as the user wrote it (`deployment.max_num_seqs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import Dtype, ModelSpec
from planner.costmodel.memory import KvCapacity
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.roofline import Replica
from planner.errors import InvalidInput
from planner.validation import validate

__all__ = [
    "DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S",
    "DEFAULT_KV_TRANSFER_LATENCY_S",
    "Deployment",
    "Disaggregation",
    "ResolvedDeployment",
]

# One 400 Gb/s RDMA NIC per GPU (ConnectX-7 / NDR InfiniBand), the usual NixlConnector fabric,
# and a per-transfer setup latency. Used when a disaggregated deployment names no link.
DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S = 50e9
DEFAULT_KV_TRANSFER_LATENCY_S = 1e-3
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Disaggregation(BaseModel):
    """Prefill/decode disaggregation: `prefill_replicas` replicas compute prompts and the first
    token, then ship the KV cache over the link to `decode_replicas` replicas that decode."""

    model_config = _CONFIG
    prefill_replicas: int = Field(ge=1)
    decode_replicas: int = Field(ge=1)
    kv_transfer_bandwidth_bytes_per_s: float = Field(default=DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S, gt=0)
    kv_transfer_latency_s: float = Field(default=DEFAULT_KV_TRANSFER_LATENCY_S, ge=0)


class Deployment(BaseModel):
    """One serving deployment. Unset scheduler flags take vLLM V1's defaults for the GPU
    (`max_num_batched_tokens` 8192 / `max_num_seqs` 1024 on >= 70 GiB GPUs other than A100,
    2048 / 256 otherwise); `gpu_memory_utilization` 0.92; `long_prefill_token_threshold` 0 (off).
    `usd_per_gpu_hour` defaults to the catalog's on-demand price. `replicas` counts colocated
    replicas; with `disaggregated` the pool sizes are given there instead."""

    model_config = _CONFIG
    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    tp: int = Field(default=1, ge=1)
    replicas: int = Field(default=1, ge=1)
    weight_dtype: Dtype = "bf16"
    kv_dtype: Dtype = "bf16"
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    long_prefill_token_threshold: int = Field(default=0, ge=0)
    gpu_memory_utilization: float = Field(default=DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    disaggregated: Disaggregation | None = None

    @model_validator(mode="after")
    def _replicas_or_pools(self) -> Deployment:
        if self.disaggregated is not None and "replicas" in self.model_fields_set:
            raise ValueError(
                "give either replicas (colocated) or disaggregated.prefill_replicas/decode_replicas, not both"
            )
        return self

    @classmethod
    def from_mapping(cls, data: Any, root: str = "deployment") -> Deployment:
        """Validate a YAML/JSON mapping; errors are InvalidInput naming the dotted field."""
        return validate(cls, data, root)

    @property
    def mode(self) -> Literal["colocated", "disaggregated"]:
        return "colocated" if self.disaggregated is None else "disaggregated"

    @property
    def total_replicas(self) -> int:
        d = self.disaggregated
        return self.replicas if d is None else d.prefill_replicas + d.decode_replicas

    def resolve(self, profile: Profile | None = None, root: str = "deployment") -> ResolvedDeployment:
        """Catalog look-ups, vLLM defaults and KV sizing. `root` prefixes field names in errors."""
        from planner.catalog.gpus import get_gpu
        from planner.catalog.models import get_model
        from planner.costmodel.memory import kv_capacity

        gpu = get_gpu(self.gpu, f"{root}.gpu")
        model = get_model(self.model, f"{root}.model")
        if self.tp > gpu.max_gpus_per_node:
            raise InvalidInput(
                f"{root}.tp", f"{self.tp} exceeds the {gpu.max_gpus_per_node} GPUs of one {gpu.name} node"
            )
        if (why := model.tp_error(self.tp)) is not None:
            raise InvalidInput(f"{root}.tp", why)
        seqs = self.max_num_seqs or gpu.vllm_default_max_num_seqs
        budget = self.max_num_batched_tokens or gpu.vllm_default_max_num_batched_tokens
        if budget < seqs:
            which = "max_num_batched_tokens" if self.max_num_batched_tokens is not None else "max_num_seqs"
            raise InvalidInput(
                f"{root}.{which}",
                f"vLLM requires max_num_batched_tokens ({budget}) >= max_num_seqs ({seqs})",
            )
        prof = profile or THEORETICAL
        if prof.gpu is not None and prof.gpu != gpu.name:
            raise InvalidInput("profile", f"profile {prof.name} was fitted on {prof.gpu}, not {gpu.name}")
        replica = Replica(
            model=model,
            gpu=gpu,
            tp=self.tp,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            profile=prof,
        )
        kv = kv_capacity(replica, self.gpu_memory_utilization, budget, seqs)
        if kv.kv_cache_blocks <= 0:
            gib = 2**30
            raise InvalidInput(
                f"{root}.tp",
                f"{model.name} on {self.tp} x {gpu.name}: weights ({kv.weight_bytes / gib:.1f} GiB per GPU) and "
                f"activations ({kv.activation_bytes / gib:.1f} GiB) leave no KV cache at "
                f"gpu_memory_utilization {self.gpu_memory_utilization}; raise tp or gpu_memory_utilization",
            )
        d = self.disaggregated
        return ResolvedDeployment(
            spec=self,
            replica=replica,
            kv=kv,
            max_num_seqs=seqs,
            max_num_batched_tokens=budget,
            long_prefill_token_threshold=self.long_prefill_token_threshold,
            usd_per_gpu_hour=self.usd_per_gpu_hour if self.usd_per_gpu_hour is not None else gpu.price,
            replicas=self.replicas if d is None else 0,
            prefill_replicas=0 if d is None else d.prefill_replicas,
            decode_replicas=0 if d is None else d.decode_replicas,
            kv_transfer_bandwidth_bytes_per_s=(
                DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S
                if d is None
                else d.kv_transfer_bandwidth_bytes_per_s
            ),
            kv_transfer_latency_s=DEFAULT_KV_TRANSFER_LATENCY_S if d is None else d.kv_transfer_latency_s,
        )


@dataclass(frozen=True, eq=False)
class ResolvedDeployment:
    """A deployment with every default filled and the catalogs looked up: plain values."""

    spec: Deployment
    replica: Replica
    kv: KvCapacity
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    usd_per_gpu_hour: float
    replicas: int  # colocated replicas (0 when disaggregated)
    prefill_replicas: int  # 0 when colocated
    decode_replicas: int
    kv_transfer_bandwidth_bytes_per_s: float
    kv_transfer_latency_s: float

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def mode(self) -> str:
        return "disaggregated" if self.disaggregated else "colocated"

    @property
    def total_replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas if self.disaggregated else self.replicas

    @property
    def gpus(self) -> int:
        return self.total_replicas * self.replica.tp

    @property
    def usd_per_hour(self) -> float:
        """All GPUs, billed whether busy or not."""
        return self.gpus * self.usd_per_gpu_hour

    @property
    def model(self) -> ModelSpec:
        return self.replica.model

    @property
    def gpu(self) -> GpuSpec:
        return self.replica.gpu

    def summary(self) -> dict[str, Any]:
        """What was deployed, with vLLM's defaults filled in: the `deployment` block that
        `capplan evaluate` and `capplan simulate` both report."""
        d = self.spec
        return {
            "model": self.model.name,
            "gpu": self.gpu.name,
            "tp": self.replica.tp,
            "mode": self.mode,
            "replicas": self.total_replicas,
            "prefill_replicas": self.prefill_replicas if self.disaggregated else None,
            "decode_replicas": self.decode_replicas if self.disaggregated else None,
            "weight_dtype": d.weight_dtype,
            "kv_dtype": d.kv_dtype,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "long_prefill_token_threshold": self.long_prefill_token_threshold,
        }
