"""The length distribution of a benchmark dataset, for a run that states only its mean lengths.

A burst of prompts (rate inf) lasts until its longest response is done, so a run's throughput
depends on how its lengths spread, not on their means alone. A run that kept its per-request
lengths (`--save-detailed`) is predicted at those; a run of a dataset with a shipped length
sample (planner/data/lengths/, source in its README) at that sample's shape, scaled to the run's
own mean (the tokenizer and the sampled prompts change the mean; the shape is the dataset's).

    from planner.measurements.dataset_lengths import dataset_lengths
    dataset_lengths("sharegpt", "output", mean_tokens=201.6)   # LengthDistribution | None
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

import numpy as np

from planner.workload import LengthDistribution

__all__ = ["DATASET_FILES", "dataset_lengths", "dataset_sample", "scaled_sample"]

# dataset name (the corpus's `bench.dataset`) -> file under planner/data/lengths/
DATASET_FILES: dict[str, str] = {"sharegpt": "sharegpt-vllm-bench.json"}
Side = Literal["input", "output"]


@cache
def dataset_sample(dataset: str, side: Side) -> tuple[int, ...] | None:
    """The shipped per-request lengths of `dataset` (a 0, a request ended at its first token, as
    1), or None when none is shipped."""
    fname = DATASET_FILES.get(dataset)
    if fname is None:
        return None
    path = resources.files("planner") / "data" / "lengths" / fname
    doc = json.loads(path.read_text(encoding="utf-8"))
    return tuple(max(1, int(x)) for x in doc[f"{side}_lens"])


def scaled_sample(sample: tuple[int, ...], mean_tokens: float) -> tuple[int, ...]:
    """`sample` scaled to `mean_tokens` (each length times mean / the sample's mean, rounded, at
    least 1): the same shape (CV), the run's mean (within rounding)."""
    values = np.asarray(sample, dtype=float)
    scaled = np.maximum(np.rint(values * (mean_tokens / float(values.mean()))), 1.0)
    return tuple(int(x) for x in scaled)


def dataset_lengths(dataset: str | None, side: Side, mean_tokens: float) -> LengthDistribution | None:
    """`dataset`'s shipped length sample for `side` scaled to the run's `mean_tokens` (the
    empirical distribution of the scaled sample), or None when capplan ships none for it."""
    if dataset is None:
        return None
    sample = dataset_sample(dataset, side)
    if sample is None:
        return None
    return LengthDistribution(samples=scaled_sample(sample, mean_tokens))
