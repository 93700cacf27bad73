"""The catalog's reports (`capplan catalog`, `planner.api.catalog`), and the base of every report
(planner/schema/reports.py, which re-exports these): apart from the others so that listing the catalog
imports no latency model, and so no SciPy."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from planner.catalog.gpus import GpuSpec

__all__ = ["CatalogReport", "GpuCatalogReport", "ModelCatalogReport", "Report"]


class Report(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuCatalogReport(Report):
    gpus: list[GpuSpec]


class ModelEntry(Report):
    """A catalog model: its config.json shape and the sizes computed from it."""

    name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    attention_bias: bool
    qk_norm: bool
    num_experts: int
    experts_per_token: int
    total_params: int
    active_params: int
    kv_bytes_per_token_bf16: int
    weight_bytes_bf16: int


class ExpertRead(Report):
    tokens: int
    experts_touched_per_layer: float
    params_read: float


class ModelCatalogReport(Report):
    """`expert_reads` (a step of N tokens, uniform routing) only for one MoE model; absent from
    the JSON otherwise."""

    models: list[ModelEntry]
    expert_reads: list[ExpertRead] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_reads(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("expert_reads") is None:
            out.pop("expert_reads", None)
        return out


CatalogReport = GpuCatalogReport | ModelCatalogReport
