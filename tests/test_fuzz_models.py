"""Fuzz the request models and the Python API (planner/api/) with hostile values, and the
library calls underneath them (workload sampling, traces, the simulator) with hostile arrays.

Contract: a bad value raises `InvalidInput` (or `CapplanError` for an answer such as
"infeasible") whose message is one line naming a field; anything else returns a result whose
numbers are finite (a report's `model_dump(mode="json")` is strict JSON). Never another
exception, never over 20 s (tests/fuzz_support.py). Derandomized, like every property test here.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fuzz_support import HOSTILE_VALUES, MAX_SECONDS, fuzz_settings, memory_guard
from hypothesis import given
from hypothesis import strategies as st

from planner import api
from planner.deployment import Deployment
from planner.errors import CapplanError, InvalidInput
from planner.schema.inputs import TraceWorkload
from planner.simulate import SchedulerConfig, simulate
from planner.slo import Slo
from planner.traces import Trace
from planner.validation import validate
from planner.workload import Arrivals, LengthDistribution, Workload

ROOT = Path(__file__).resolve().parent.parent
CHAT = yaml.safe_load((ROOT / "examples" / "chat-qwen3-8b-h100.yaml").read_text())
PLAN = yaml.safe_load((ROOT / "examples" / "chat.yaml").read_text())
DISAGG = yaml.safe_load((ROOT / "examples" / "disagg-llama70b-h100.yaml").read_text())
MEASUREMENTS = ROOT / "planner" / "costmodel" / "data" / "measurements" / "h200_qwen3_8b_shape.json"


@pytest.fixture(scope="module", autouse=True)
def _guard() -> Any:
    with memory_guard():
        yield


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(base: Any, rnd: random.Random) -> Any:
    """`base` with one value replaced (hostile, or its own number scaled), dropped or added to."""
    doc = copy.deepcopy(base)
    paths = _paths(doc)
    if not paths:
        return rnd.choice(HOSTILE_VALUES)
    path = rnd.choice(paths)
    node = doc
    for part in path[:-1]:
        node = node[part]
    last = path[-1]
    op = rnd.choice(["hostile", "scale", "scale", "drop", "extra"])
    old = node[last]
    if op == "drop" and isinstance(node, dict):
        del node[last]
    elif op == "extra" and isinstance(node, dict):
        node["unexpected_key"] = rnd.choice(HOSTILE_VALUES)
    elif op == "scale" and isinstance(old, int | float) and not isinstance(old, bool):
        f = rnd.choice([0, 1e-9, 1e-3, 0.1, 0.5, 2, 10, 1e3, 1e6, 1e9])
        node[last] = type(old)(old * f) if math.isfinite(old * f) else old
    else:
        node[last] = rnd.choice([*HOSTILE_VALUES, 10 ** rnd.uniform(-12, 40), -rnd.randint(1, 10**9)])
    return doc


def _one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text and "\n" not in text, f"error message is not one line: {text!r}"
    if isinstance(exc, InvalidInput):
        assert exc.field, f"InvalidInput without a field: {text!r}"


def _finite_json(data: Any) -> None:
    text = json.dumps(data, allow_nan=False)  # raises on NaN/inf
    json.loads(text)


def _call(fn: Callable[[], Any]) -> Any:
    """fn() under the contract: the value, or None when it refused with a one-line error."""
    t0 = time.perf_counter()
    try:
        out = fn()
    except (InvalidInput, CapplanError) as exc:
        _one_line(exc)
        out = None
    elapsed = time.perf_counter() - t0
    assert elapsed < MAX_SECONDS, f"took {elapsed:.1f} s"
    return out


seeds = st.integers(0, 2**31)


# --- the pydantic models -------------------------------------------------------------------------

MODELS: list[tuple[type[Any], Any, str]] = [
    (Workload, CHAT["workload"], "workload"),
    (Workload, {**CHAT["workload"], "arrivals": {"buckets": [{"duration_s": 60, "requests_per_s": 3}] * 3}}, "workload"),
    (Deployment, CHAT["deployment"], "deployment"),
    (Deployment, DISAGG["deployment"], "deployment"),
    (TraceWorkload, {"trace": "azure-conv-2023", "bucket_s": 60, "bins": 32, "requests_per_s": 5}, "workload"),
    (Slo, {"ttft_p99_s": 1.0, "itl_p99_s": 0.05}, "slo"),
    (LengthDistribution, {"histogram": {"edges": [1, 10, 100, 1000], "counts": [1, 5, 2]}}, "input_tokens"),
    (LengthDistribution, {"samples": [5, 50, 500, 5000]}, "input_tokens"),
    (Arrivals, {"requests_per_s": 3.0, "burstiness": 0.5}, "arrivals"),
]  # fmt: skip


def _exercise(obj: Any) -> None:
    """Use a validated model the way the planner does; numbers must stay finite."""
    if isinstance(obj, Workload):
        for d in (obj.input_tokens, obj.output_tokens):
            _exercise(d)
        _exercise(obj.arrivals)
        s = _call(lambda: obj.sample_requests(7, count=32))
        if s is not None:
            assert np.isfinite(s.arrival_s).all() and (s.prompt_tokens >= 1).all()
    elif isinstance(obj, LengthDistribution):
        vals = [obj.mean(), obj.std(), obj.quantile(0.99), obj.expected_max(64), obj.max_tokens]
        assert all(math.isfinite(v) for v in vals), vals
        v, p = obj.support()
        assert np.isfinite(v).all() and abs(p.sum() - 1) < 1e-9
        assert (obj.sample(np.random.default_rng(0), 16) >= 1).all()
    elif isinstance(obj, Arrivals):
        assert math.isfinite(obj.mean_requests_per_s) and obj.mean_requests_per_s > 0
        t = _call(lambda: obj.sample_times(np.random.default_rng(0), count=16))
        if t is not None:
            assert np.isfinite(t).all()
        _call(lambda: obj.sample_times(np.random.default_rng(0), horizon_s=60.0))


@pytest.mark.parametrize("case", range(len(MODELS)))
def test_models(case: int) -> None:
    cls, base, root = MODELS[case]

    @fuzz_settings(25)
    @given(seeds)
    def fuzz(seed: int) -> None:
        data = _mutate(base, random.Random(seed))
        obj = _call(lambda: validate(cls, data, root))
        if obj is not None:
            _exercise(obj)

    fuzz()


# --- the Python API --------------------------------------------------------------------------------

SIMULATE = {**CHAT, "requests": 48}
ANALYZE = [
    {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "concurrency": {"context_tokens": 2048, "concurrency": [1, 64]}},
    {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "static_batching": {"context_tokens": 1024, "batch": [8], "output_lengths": {"pairs": [[100, 0.5], [300, 0.5]]}}},
    {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "chunked_prefill": {"prompt_tokens": 4096, "decodes": 32, "context_tokens": 1024, "sizes_tokens": [512, 0]}},
    {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "prefill": {"prompt_tokens": 2048}},
    {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "utilization": {"context_tokens": 1024, "output_tokens_per_day": 1e9}},
    {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "h100-sxm", "tp": 4, "kv_capacity": {"context_tokens": 8192}},
]  # fmt: skip
API: list[tuple[str, Callable[..., Any], Any]] = [
    ("evaluate", api.evaluate, CHAT),
    ("evaluate-disagg", api.evaluate, DISAGG),
    ("simulate", api.simulate, SIMULATE),
    ("simulate-disagg", api.simulate, {**DISAGG, "requests": 48}),
    ("simulate-trace", api.simulate, {**SIMULATE, "trace": "azure-conv-2023", "requests_per_s": 8.0}),
    *[(f"analyze-{i}", api.analyze, a) for i, a in enumerate(ANALYZE)],
    (
        "calibrate",
        api.calibrate,
        {"measurements": str(MEASUREMENTS), "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm"},
    ),
    ("catalog", api.catalog, {"kind": "models", "name": "Qwen/Qwen3-30B-A3B", "batch_tokens": [1, 64]}),
    ("plan", functools.partial(api.plan, workers=1), PLAN),
]


def _unbounded_simulation(req: Any) -> bool:
    """A simulation the mutation made legitimately long (many requests or a long horizon):
    valid input, not what this test is about."""
    if not isinstance(req, dict):
        return False
    n = req.get("requests")
    h = req.get("horizon_s")
    big_n = isinstance(n, int | float) and not isinstance(n, bool) and n > 2000
    big_h = isinstance(h, int | float) and not isinstance(h, bool) and h > 600
    return big_n or big_h


@pytest.mark.parametrize("case", [name for name, _, _ in API])
def test_api(case: str) -> None:
    _, fn, base = next(x for x in API if x[0] == case)
    examples = 3 if case == "plan" else 4 if case.startswith(("calibrate", "simulate-trace")) else 12

    @fuzz_settings(examples)
    @given(seeds)
    def fuzz(seed: int) -> None:
        req = _mutate(base, random.Random(seed))
        if _unbounded_simulation(req):
            return
        report = _call(lambda: fn(req, base_dir=ROOT / "examples"))
        if report is not None:
            _finite_json(report.model_dump(mode="json"))

    fuzz()


# --- hostile arrays into the library -----------------------------------------------------------------

ARRAYS: list[Any] = [
    [],
    [float("nan")],
    [float("inf"), 1.0],
    [-1.0, 2.0],
    [1e30, 1.0],
    [0.5, 1.5],
    ["a", "b"],
    [None, 1],
    [[1, 2], [3]],
    [10**30, 1],
    [True, False],
    list(range(1, 40)),
]


@st.composite
def columns(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    rnd = random.Random(draw(seeds))
    n = rnd.randint(0, 12)
    good = (
        [0.01 * i for i in range(n)],
        [rnd.randint(1, 4000) for _ in range(n)],
        [rnd.randint(1, 500) for _ in range(n)],
    )
    cols = list(good)
    cols[rnd.randrange(3)] = rnd.choice(ARRAYS)
    return cols[0], cols[1], cols[2]


def test_simulator_and_traces_take_hostile_arrays() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=2000, max_num_seqs=64, max_num_batched_tokens=2048)

    class Timer:
        def step_time_s(self, chunks: Any, n: int, ctx: int) -> float:
            return 1e-3 + 1e-6 * (sum(c for c, _ in chunks) + n) + 1e-9 * ctx

        def decode_run_time_s(self, n: int, ctx: int, steps: int) -> float:
            return sum(self.step_time_s((), n, ctx + j * n) for j in range(steps))

    @fuzz_settings(40)
    @given(columns())
    def fuzz(cols: tuple[Any, Any, Any]) -> None:
        res = _call(lambda: simulate(cols, Timer(), cfg, replicas=2))
        if res is not None:
            _finite_json(res.to_dict())
        tr = _call(lambda: Trace.from_arrays(*cols))
        if tr is not None and tr.num_requests > 2 and tr.duration_s > 0:
            _call(lambda: tr.to_workload(bucket_s=1.0, bins=8))

    fuzz()


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"count": 10**12}, "count"),
        ({"count": -1}, "count"),
        ({"horizon_s": 1e30}, "horizon_s"),
        ({"horizon_s": float("nan")}, "horizon_s"),
        ({"horizon_s": 1e7}, "horizon_s"),  # 12/s x 1e7 s: more arrivals than a sample holds
    ],
)
def test_sampling_refuses_runaway_sizes_quickly(kw: dict[str, Any], field: str) -> None:
    wl = Workload.from_mapping(CHAT["workload"])
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput) as exc:
        wl.sample_requests(0, **kw)
    assert exc.value.field == field and time.perf_counter() - t0 < 1.0
