"""`detect_and_read`: one entry point for any measurement file, telling the formats apart by
their content (not their names): a corpus file (`about`, `source`, `runs`), a `vllm bench serve`
result (`duration`, `completed`), a GuideLLM report (`benchmarks`), a Prometheus scrape of vLLM's
/metrics, or a vLLM start-up log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from planner.errors import InvalidInput
from planner.files import MEASUREMENTS, read_text
from planner.measurements.corpus import runs_of_corpus_document
from planner.measurements.guidellm import runs_of_guidellm
from planner.measurements.prometheus import MetricsScrape, looks_like_metrics, parse_metrics
from planner.measurements.reader_base import parse_json_documents
from planner.measurements.serving_run import ServingRun
from planner.measurements.startup_log import StartupLog, looks_like_startup_log, parse_startup_log
from planner.measurements.vllm_bench import runs_of_vllm_bench

__all__ = ["EXPECTED", "Reading", "detect_and_read"]

Kind = Literal["corpus", "vllm-bench", "guidellm", "prometheus", "startup-log"]
EXPECTED = (
    "a capplan corpus JSON (about/source/runs), a `vllm bench serve --save-result` JSON "
    "(duration/completed), a GuideLLM report JSON (benchmarks), a Prometheus scrape of vLLM's "
    "/metrics, or a vLLM start-up log (a 'GPU KV cache size' line)"
)


@dataclass(frozen=True)
class Reading:
    """What a file held: serving runs (corpus, vllm-bench, guidellm), a scrape or a log."""

    kind: Kind
    runs: tuple[ServingRun, ...] = field(default=())
    scrape: MetricsScrape | None = None
    startup: StartupLog | None = None


def _json_kind(doc: Any) -> Kind | None:
    if not isinstance(doc, dict):
        return None
    if {"about", "source", "runs"} <= doc.keys():
        return "corpus"
    if isinstance(doc.get("benchmarks"), list):
        return "guidellm"
    if {"duration", "completed"} <= doc.keys():
        return "vllm-bench"
    return None


def _read_json(text: str, name: str, fld: str, overrides: Mapping[str, Any] | None) -> Reading:
    docs = parse_json_documents(text, name, fld)
    kinds = {_json_kind(d) for d in docs}
    if None in kinds or len(kinds) != 1:
        raise InvalidInput(fld, f"{name}: a JSON file capplan does not know; expected {EXPECTED}")
    kind = kinds.pop()
    if kind == "vllm-bench":
        many = len(docs) > 1
        return Reading(
            kind,
            tuple(runs_of_vllm_bench(d, name, i if many else None, overrides) for i, d in enumerate(docs)),
        )
    if len(docs) != 1:
        raise InvalidInput(fld, f"{name}: a {kind} file is one JSON object, found {len(docs)}")
    if kind == "corpus":
        if overrides:
            raise InvalidInput("overrides", "a corpus file states its settings; overrides do not apply")
        return Reading(kind, tuple(runs_of_corpus_document(docs[0], name)))
    return Reading("guidellm", tuple(runs_of_guidellm(docs[0], name, overrides)))


def detect_and_read(
    path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    model_name: str | None = None,
    field: str = "run",
) -> Reading:
    """Read `path` as whichever supported format it is. `overrides` (Settings/Load field names)
    fill what a vllm-bench or GuideLLM file lacks; `model_name` picks a model in a scrape."""
    name = str(path)
    text = read_text(path, field, MEASUREMENTS, encoding="utf-8-sig")
    if text.lstrip().startswith(("{", "[")):
        return _read_json(text, name, field, overrides)
    if looks_like_metrics(text):
        return Reading("prometheus", scrape=parse_metrics(text, model_name, f"{field} {name}"))
    if looks_like_startup_log(text):
        return Reading("startup-log", startup=parse_startup_log(text, f"{field} {name}"))
    raise InvalidInput(field, f"{name}: not a format capplan reads; expected {EXPECTED}")
