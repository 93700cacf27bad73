"""Real vLLM serving runs read from the files people have: capplan's corpus format, `vllm bench
serve --save-result` JSON, GuideLLM reports (each normalized to `ServingRun`), plus a vLLM
start-up log (KV cache size, flags) and a Prometheus scrape of /metrics. docs/measurements.md is
the reference."""

from planner.measurements.corpus import builtin_corpus, builtin_corpus_files, load_corpus, read_corpus_file
from planner.measurements.detect import Reading, detect_and_read
from planner.measurements.guidellm import read_guidellm
from planner.measurements.prometheus import HistogramSummary, MetricsScrape, histogram_quantile, read_metrics
from planner.measurements.serving_run import LatencySummary, Load, Measured, PerRequest, ServingRun, Settings
from planner.measurements.startup_log import StartupLog, read_startup_log
from planner.measurements.vllm_bench import METADATA_KEYS, METADATA_PREFIX, read_vllm_bench

__all__ = [
    "METADATA_KEYS",
    "METADATA_PREFIX",
    "HistogramSummary",
    "LatencySummary",
    "Load",
    "Measured",
    "MetricsScrape",
    "PerRequest",
    "Reading",
    "ServingRun",
    "Settings",
    "StartupLog",
    "builtin_corpus",
    "builtin_corpus_files",
    "detect_and_read",
    "histogram_quantile",
    "load_corpus",
    "read_corpus_file",
    "read_guidellm",
    "read_metrics",
    "read_startup_log",
    "read_vllm_bench",
]
