"""A deployment to evaluate: model, GPU, tensor parallelism, replicas, vLLM scheduler flags, and
colocated or disaggregated (prefill / decode pools joined by a KV-transfer link).

`Deployment` is what a user writes (YAML `deployment:`); `Deployment.resolve(profile)` looks up
the catalogs, resolves the profile (default `auto`), checks that vLLM can run it
(planner.costmodel.feasibility), fills vLLM's defaults for the GPU and sizes the KV cache, giving a
`ResolvedDeployment` of plain values for the latency model's hot path. Every error names the
field as the user wrote it (`deployment.max_num_seqs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import MAX_POSITION_EMBEDDINGS, Dtype, ModelSpec
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, GroupSize, WeightDtype
from planner.costmodel.expert_parallel import (
    MAX_DATA_PARALLEL_SIZE,
    MAX_ROUTING_SKEW,
    ExpertParallel,
    experts_per_gpu,
)
from planner.costmodel.lora import LoraConfig
from planner.costmodel.memory import KvCapacity
from planner.costmodel.multinode import MAX_PIPELINE_PARALLEL
from planner.costmodel.profile import Profile
from planner.costmodel.roofline import Replica
from planner.costmodel.speculative import (
    SpeculativeConfig,
    draft_shape,
    speculative_summary,
    with_measured_acceptance,
)
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.validation import validate
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION

__all__ = [
    "DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S",
    "DEFAULT_KV_TRANSFER_LATENCY_S",
    "Deployment",
    "Disaggregation",
    "Mode",
    "ResolvedDeployment",
]

Mode = Literal["colocated", "disaggregated"]

# One 400 Gb/s RDMA NIC per GPU (ConnectX-7 / NDR InfiniBand), the usual NixlConnector fabric,
# and a per-transfer setup latency. Used when a disaggregated deployment names no link.
DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S = 50e9
DEFAULT_KV_TRANSFER_LATENCY_S = 1e-3

# Ranges of the fields (inclusive unless said): what a real deployment can ask for, with room.
MAX_TP = 64  # GPUs in one tensor-parallel group (the GPU's node size also applies)
MAX_REPLICAS = 100_000  # replicas of a deployment, or of one disaggregated pool
MAX_NUM_SEQS = 65_536  # vLLM's max_num_seqs
MAX_NUM_BATCHED_TOKENS = 1_048_576  # vLLM's max_num_batched_tokens (and the prefill threshold)
MAX_USD_PER_GPU_HOUR = 1_000.0  # exclusive of 0
MIN_KV_TRANSFER_BANDWIDTH_BYTES_PER_S = 1e6  # 1 MB/s: slower is no serving link
MAX_KV_TRANSFER_BANDWIDTH_BYTES_PER_S = 1e13  # 10 TB/s: beyond any NIC or NVLink
MAX_KV_TRANSFER_LATENCY_S = 10.0
# max_model_len: a prompt token and an output token at least; at most the model's context
# (max_position_embeddings, checked by `resolve`) and the catalog's largest context.
MIN_MAX_MODEL_LEN = 2
MAX_MAX_MODEL_LEN = MAX_POSITION_EMBEDDINGS

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Disaggregation(BaseModel):
    """Prefill/decode disaggregation: `prefill_replicas` replicas compute prompts and the first
    token, then ship the KV cache over the link to `decode_replicas` replicas that decode.
    Ranges: replicas 1..MAX_REPLICAS per pool; link bandwidth 1e6..1e13 bytes/s; latency
    0..10 s."""

    model_config = _CONFIG
    prefill_replicas: int = Field(ge=1, le=MAX_REPLICAS)
    decode_replicas: int = Field(ge=1, le=MAX_REPLICAS)
    kv_transfer_bandwidth_bytes_per_s: float = Field(
        default=DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
        ge=MIN_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
        le=MAX_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
    )
    kv_transfer_latency_s: float = Field(
        default=DEFAULT_KV_TRANSFER_LATENCY_S, ge=0, le=MAX_KV_TRANSFER_LATENCY_S
    )


class Deployment(BaseModel):
    """One serving deployment. Unset scheduler flags take vLLM V1's defaults for the GPU
    (planner.vllm_defaults: `max_num_batched_tokens` 8192 / `max_num_seqs` 1024 on >= 70 GiB
    GPUs other than A100, 2048 / 256 otherwise; `gpu_memory_utilization` 0.92);
    `long_prefill_token_threshold` 0 (off); `max_model_len` the model's context
    (max_position_embeddings, vLLM's default: a given value is also checked to fit one sequence
    in the KV cache, as vLLM checks it at startup; the default is not, as before). `usd_per_gpu_hour` defaults to the catalog's
    on-demand price. `replicas` counts colocated replicas; with `disaggregated` the pool sizes
    are given there instead.

    Ranges: tp 1..64, replicas 1..100,000, max_num_seqs 1..65,536, max_num_batched_tokens and
    long_prefill_token_threshold up to 1,048,576 (the threshold from 0), gpu_memory_utilization
    in (0, 1], usd_per_gpu_hour in (0, 1000], max_model_len in [2, the model's context]; `lora`
    (vLLM --enable-lora; None: off): max_loras 1..256, max_lora_rank one of vLLM's ranks
    (planner.costmodel.lora.LoraConfig); pipeline_parallel_size 1..16 (the replica is tp x
    pipeline_parallel_size GPUs; planner.costmodel.multinode); `expert_parallel` (vLLM
    --enable-expert-parallel, MoE models), `data_parallel_size` 1..64 (DP ranks per instance:
    each replica is then that many engine ranks of `tp` GPUs) and `routing_skew` 1..64 (the
    hottest EP rank's load over the mean; planner.costmodel.expert_parallel), both only with
    expert_parallel; `speculative_decoding` (vLLM --speculative-config; None: off): method,
    num_speculative_tokens 1..16, acceptance_rate in (0, 1)
    (planner.costmodel.speculative.SpeculativeConfig). Whether
    vLLM can run the combination (heads over TP, node size, budget vs seqs, memory, one
    max_model_len sequence in the KV cache) is `planner.costmodel.feasibility`, checked by
    `resolve`."""

    model_config = _CONFIG
    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    tp: int = Field(default=1, ge=1, le=MAX_TP)
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: Dtype = "bf16"
    max_num_seqs: int | None = Field(default=None, ge=1, le=MAX_NUM_SEQS)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=MAX_NUM_BATCHED_TOKENS)
    long_prefill_token_threshold: int = Field(default=0, ge=0, le=MAX_NUM_BATCHED_TOKENS)
    gpu_memory_utilization: float = Field(default=GPU_MEMORY_UTILIZATION, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=MIN_MAX_MODEL_LEN, le=MAX_MAX_MODEL_LEN)
    weight_group_size: GroupSize = DEFAULT_GROUP_SIZE  # AWQ/GPTQ checkpoints' group (32, 64, 128)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_GPU_HOUR)
    disaggregated: Disaggregation | None = None
    lora: LoraConfig | None = None
    # Pipeline stages (vLLM --pipeline-parallel-size): a replica is tp x this many GPUs, over
    # several nodes where more than one node's (planner.costmodel.multinode)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=MAX_PIPELINE_PARALLEL)
    expert_parallel: bool = False
    data_parallel_size: int = Field(default=1, ge=1, le=MAX_DATA_PARALLEL_SIZE)
    routing_skew: float = Field(default=1.0, ge=1.0, le=MAX_ROUTING_SKEW)
    speculative_decoding: SpeculativeConfig | None = None
    # The pre-quantized checkpoint vLLM serves (a Hugging Face id): where the catalog lists its
    # unquantized modules (planner.catalog.checkpoints) they count at bf16; None: `model` in
    # `weight_dtype` throughout
    checkpoint: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _speculative_k(self) -> Deployment:
        sd = self.speculative_decoding
        if sd is not None and sd.num_speculative_tokens is None and sd.acceptance_from is None:
            raise ValueError(
                "speculative_decoding.num_speculative_tokens is required on a deployment (1..16) unless "
                "acceptance_from gives the measured one"
            )
        return self

    @model_validator(mode="after")
    def _replicas_or_pools(self) -> Deployment:
        if self.disaggregated is not None and "replicas" in self.model_fields_set:
            raise ValueError(
                "give either replicas (colocated) or disaggregated.prefill_replicas/decode_replicas, not both"
            )
        if self.disaggregated is not None and self.pipeline_parallel_size > 1:
            raise ValueError(
                "pipeline_parallel_size > 1 is modelled for colocated replicas only; give prefill/decode pools "
                "one stage (docs/multi-node.md)"
            )
        return self

    @classmethod
    def from_mapping(cls, data: Any, root: str = "deployment") -> Deployment:
        """Validate a YAML/JSON mapping; errors are InvalidInput naming the dotted field."""
        return validate(cls, data, root)

    @property
    def mode(self) -> Mode:
        return "colocated" if self.disaggregated is None else "disaggregated"

    @property
    def total_replicas(self) -> int:
        d = self.disaggregated
        return self.replicas if d is None else d.prefill_replicas + d.decode_replicas

    def expert_parallelism(self, root: str = "deployment") -> ExpertParallel | None:
        """The EP layout (None: off); data_parallel_size and routing_skew need expert_parallel."""
        if self.expert_parallel:
            return ExpertParallel(self.data_parallel_size, self.routing_skew)
        for key, default in (("data_parallel_size", 1), ("routing_skew", 1.0)):
            if getattr(self, key) != default:
                raise InvalidInput(
                    f"{root}.{key}",
                    f"applies with expert_parallel: true only (DP attention and routing skew are modelled "
                    f"for expert-parallel MoE deployments); got {getattr(self, key):g}",
                )
        return None

    def resolve(self, profile: Profile | str | None = None, root: str = "deployment") -> ResolvedDeployment:
        """Catalog look-ups, vLLM defaults, the feasibility check and KV sizing. `profile`: a
        Profile, or a name or file the registry resolves for this GPU (planner.costmodel.profiles;
        None = DEFAULT_PROFILE, `auto`). `root` prefixes field names in errors."""
        from planner.catalog.gpus import get_gpu
        from planner.catalog.models import get_model
        from planner.costmodel.memory import kv_capacity

        gpu = get_gpu(self.gpu, f"{root}.gpu")
        model = get_model(self.model, f"{root}.model")
        if self.speculative_decoding is not None and self.speculative_decoding.acceptance_from is not None:
            # read here relative to the working directory (the api reads it from its base_dir first)
            sd = with_measured_acceptance(self.speculative_decoding, None, f"{root}.speculative_decoding")
            return self.model_copy(update={"speculative_decoding": sd}).resolve(profile, root)
        prof = _profile_on(profile, gpu)
        replica = self._startup_checked_replica(model, gpu, prof, root)
        seqs = self.max_num_seqs or gpu.vllm_default_max_num_seqs
        budget = self.max_num_batched_tokens or gpu.vllm_default_max_num_batched_tokens
        kv = kv_capacity(replica, self.gpu_memory_utilization, budget, seqs)
        if kv.kv_cache_blocks <= 0:  # feasibility leaves a block; rounding at the edge may not
            raise InvalidInput(
                f"{root}.tp", f"{model.name} on {self.tp} x {gpu.name}: no room for the KV cache"
            )
        d = self.disaggregated
        ranks = self.data_parallel_size  # engine ranks per replica (1 without DP)
        return ResolvedDeployment(
            spec=self,
            replica=replica,
            kv=kv,
            scheduler=SchedulerConfig(
                kv_cache_blocks=kv.kv_cache_blocks,
                max_num_seqs=seqs,
                max_num_batched_tokens=budget,
                long_prefill_token_threshold=self.long_prefill_token_threshold,
                max_model_len=model.max_position_embeddings
                if self.max_model_len is None
                else self.max_model_len,
            ),
            usd_per_gpu_hour=self.usd_per_gpu_hour if self.usd_per_gpu_hour is not None else gpu.price,
            replicas=self.replicas * ranks if d is None else 0,
            prefill_replicas=0 if d is None else d.prefill_replicas * ranks,
            decode_replicas=0 if d is None else d.decode_replicas * ranks,
            kv_transfer_bandwidth_bytes_per_s=(
                DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S
                if d is None
                else d.kv_transfer_bandwidth_bytes_per_s
            ),
            kv_transfer_latency_s=DEFAULT_KV_TRANSFER_LATENCY_S if d is None else d.kv_transfer_latency_s,
        )

    def _startup_checked_replica(self, model: ModelSpec, gpu: GpuSpec, prof: Profile, root: str) -> Replica:
        """The replica, once what vLLM refuses at start-up is ruled out: a max_model_len past the
        model's context, and every feasibility problem (weights, KV room, flags), the first one
        named under `root`."""
        from planner.costmodel.feasibility import feasibility

        if self.max_model_len is not None and self.max_model_len > model.max_position_embeddings:
            raise InvalidInput(
                f"{root}.max_model_len",
                f"{self.max_model_len:,} tokens exceeds {model.name}'s context (max_position_embeddings "
                f"{model.max_position_embeddings:,}), which vLLM refuses",
            )
        ep = self.expert_parallelism(root)
        draft = draft_shape(self.speculative_decoding, f"{root}.speculative_decoding.draft_model")
        problems = feasibility(
            model,
            gpu,
            self.tp,
            self.weight_dtype,
            self.kv_dtype,
            self.max_num_batched_tokens,
            self.max_num_seqs,
            self.gpu_memory_utilization,
            prof,
            self.max_model_len,  # unset: the model's context, not checked (evaluate's defaults as before)
            self.lora,
            self.weight_group_size,
            self.pipeline_parallel_size,
            ep,
            self.speculative_decoding,
            draft,
            checkpoint=self.checkpoint,
        )
        if problems:
            raise InvalidInput(f"{root}.{problems[0].field}", problems[0].reason)
        return Replica(
            model=model,
            gpu=gpu,
            tp=self.tp,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            profile=prof,
            lora=self.lora,
            weight_group_size=self.weight_group_size,
            pp=self.pipeline_parallel_size,
            expert_parallel=ep,
            speculative=self.speculative_decoding,
            draft=draft,
            checkpoint=self.checkpoint,
        )


@dataclass(frozen=True, eq=False)
class ResolvedDeployment:
    """A deployment with every default filled and the catalogs looked up: plain values.
    `scheduler` is the one scheduler configuration of every replica (the latency model and
    the simulator both run it)."""

    spec: Deployment
    replica: Replica
    kv: KvCapacity
    scheduler: SchedulerConfig
    usd_per_gpu_hour: float
    replicas: int  # colocated replicas (0 when disaggregated)
    prefill_replicas: int  # 0 when colocated
    decode_replicas: int
    kv_transfer_bandwidth_bytes_per_s: float
    kv_transfer_latency_s: float
    # With data_parallel_size D, `replicas` and the pools count DP ranks (instances x D): each
    # rank is its own scheduler and KV cache of `replica.tp` GPUs (planner.costmodel.expert_parallel)

    @property
    def max_num_seqs(self) -> int:
        return self.scheduler.max_num_seqs

    @property
    def max_num_batched_tokens(self) -> int:
        return self.scheduler.max_num_batched_tokens

    @property
    def long_prefill_token_threshold(self) -> int:
        return self.scheduler.long_prefill_token_threshold

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def mode(self) -> Mode:
        return "disaggregated" if self.disaggregated else "colocated"

    @property
    def total_replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas if self.disaggregated else self.replicas

    @property
    def gpus(self) -> int:
        return self.total_replicas * self.replica.gpus

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
            **({} if d.lora is None else {"lora": self.lora_memory()}),
            **({} if self.replica.pp == 1 else {"pipeline_parallel_size": self.replica.pp}),
            **({} if not d.expert_parallel else {"expert_parallel": self.expert_parallel_summary()}),
            **({} if d.speculative_decoding is None else {"speculative_decoding": self.speculative_summary()}),
        }

    def expert_parallel_summary(self) -> dict[str, Any] | None:
        """The report's `expert_parallel` block (schema ExpertParallelSummary), per GPU of a DP
        rank: the EP group, experts held and their GiB, the KV cache of the rank; None when off."""
        ep = self.replica.expert_parallel
        if ep is None:
            return None
        m, tp = self.model, self.replica.tp
        gib = 2.0**30
        _, expert_bytes, _ = m.weight_bytes_parts(self.spec.weight_dtype, self.spec.weight_group_size)
        held = experts_per_gpu(m, ep.ep_size(tp))
        return {
            "data_parallel_size": ep.data_parallel_size,
            "ep_size": ep.ep_size(tp),
            "routing_skew": ep.routing_skew,
            "experts_per_gpu": held,
            "expert_gib_per_gpu": expert_bytes * held / m.num_experts / gib,
            "kv_cache_tokens_per_rank": self.kv.kv_cache_tokens,
        }

    def speculative_summary(self) -> dict[str, Any] | None:
        """The report's `speculative_decoding` block (schema SpeculativeSummary): k, alpha, the
        tokens a decode step yields (E), the proposer's own weights per GPU and the KV cache left;
        None without speculative decoding."""
        sd = self.spec.speculative_decoding
        if sd is None or sd.num_speculative_tokens is None:
            return None
        return speculative_summary(sd, self.kv.speculative_bytes, self.kv.kv_cache_tokens)

    def lora_memory(self) -> dict[str, Any] | None:
        """The report's `lora` block (schema LoraMemory): adapters, their buffers and the KV
        cache left, per GPU; None without LoRA."""
        lora = self.spec.lora
        if lora is None:
            return None
        gib = 2.0**30
        return {
            "max_loras": lora.max_loras,
            "max_lora_rank": lora.max_lora_rank,
            "adapter_gib": self.kv.lora_bytes / gib,
            "kv_cache_gib": self.kv.kv_cache_bytes / gib,
            "kv_cache_tokens": self.kv.kv_cache_tokens,
        }


def _profile_on(profile: Profile | str | None, gpu: GpuSpec) -> Profile:
    """A Profile as given, or the registry's for a name or file (None: DEFAULT_PROFILE); refused
    when it was fitted on another GPU."""
    if profile is None or isinstance(profile, str):
        from planner.costmodel.profiles import DEFAULT_PROFILE, resolve_profile

        prof = resolve_profile(DEFAULT_PROFILE if profile is None else profile, gpu.name, "profile")
    else:
        prof = profile
    if prof.gpu is not None and prof.gpu != gpu.name:
        raise InvalidInput("profile", f"profile {prof.name} was fitted on {prof.gpu}, not {gpu.name}")
    return prof
