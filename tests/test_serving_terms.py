"""The serving-level terms of a profile (issue 35): `sequence_overhead_s`, engine seconds per
decode in a step, added outside the roofline max in every branch of the step-time formula; and
the front end per endpoint kind (`completions_overhead_s`, selected by a workload's
`endpoint`). Each check is a hand derivation: n decodes cost exactly n x the term more, a
prefill-only step nothing more, and the completions endpoint's TTFT moves by the difference of
the two front ends and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from planner import api
from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.steptime import (
    batch_time_s,
    chunks_time_s,
    decode_run_time_s,
    step_coefficients,
    step_time_s,
)
from planner.errors import InvalidInput

SEQ_S = 2.5e-5  # 25 us a decode: inside the documented 0 .. 10 ms


def _coefficients(sequence_s: float, model: str = "Qwen/Qwen3-8B", tp: int = 1):  # type: ignore[no-untyped-def]
    prof = resolve_profile("calibrated", "h100-sxm").model_copy(update={"sequence_overhead_s": sequence_s})
    return step_coefficients(get_model(model), get_gpu("h100-sxm"), prof, tp)


@pytest.mark.parametrize(("model", "tp"), [("Qwen/Qwen3-8B", 1), ("Qwen/Qwen3-32B", 2)])
@pytest.mark.parametrize("n", [1, 7, 256])
def test_a_step_of_n_decodes_costs_n_times_the_term_more_in_every_branch(model: str, tp: int, n: int) -> None:
    on, off = _coefficients(SEQ_S, model, tp), _coefficients(0.0, model, tp)
    s = 1500.0 * n
    want = n * SEQ_S
    # the scalar branch, with and without a prefill chunk beside the decodes
    assert batch_time_s(on, float(n), s) - batch_time_s(off, float(n), s) == pytest.approx(want, abs=1e-15)
    assert step_time_s(on, 512.0, 300.0, float(n), s) - step_time_s(off, 512.0, 300.0, float(n), s) == (
        pytest.approx(want, abs=1e-15)
    )
    assert chunks_time_s(on, [(256.0, 0.0), (128.0, 900.0)], n, s) - chunks_time_s(
        off, [(256.0, 0.0), (128.0, 900.0)], n, s
    ) == pytest.approx(want, abs=1e-15)
    # the array branch (decode counts as an array) and the one-decode-batch branch (n, s floats)
    ns = np.array([float(n), 2.0 * n])
    diff = step_time_s(on, np.array([0.0, 64.0]), 0.0, ns, s) - step_time_s(
        off, np.array([0.0, 64.0]), 0.0, ns, s
    )
    np.testing.assert_allclose(diff, [want, 2 * want], rtol=0, atol=1e-15)
    chunk = np.array([0.0, 512.0, 2048.0])
    diff = step_time_s(on, chunk, 0.0, float(n), s) - step_time_s(off, chunk, 0.0, float(n), s)
    np.testing.assert_allclose(diff, [want] * 3, rtol=0, atol=1e-15)
    # a run of `steps` decode steps: steps x n x the term
    steps = 33
    run = decode_run_time_s(on, n, s, steps) - decode_run_time_s(off, n, s, steps)
    assert run == pytest.approx(steps * want, abs=1e-12)


def test_a_prefill_chunk_alone_is_not_charged() -> None:
    """Prefill chunks are not sequences of the term (Profile.sequence_overhead_s)."""
    on, off = _coefficients(SEQ_S), _coefficients(0.0)
    assert step_time_s(on, 2048.0, 0.0, 0.0, 0.0) == step_time_s(off, 2048.0, 0.0, 0.0, 0.0)
    assert step_time_s(on, 0.0, 0.0, 0.0, 0.0) == 0.0  # an empty step still takes 0 s


def test_the_term_sits_outside_the_roofline_max() -> None:
    """Added after the max, like the all-reduce: on a memory-bound and a compute-bound step alike."""
    on, off = _coefficients(SEQ_S), _coefficients(0.0)
    for n, s in ((4.0, 4000.0), (4096.0, 0.0)):
        assert batch_time_s(on, n, s) - batch_time_s(off, n, s) == pytest.approx(n * SEQ_S, abs=1e-15)


def test_the_endpoint_selects_the_front_end() -> None:
    prof = resolve_profile("calibrated", "h100-sxm")
    chat_s = prof.request_overhead_s
    assert chat_s > 0
    # no completions figure: one front end for both (what every profile meant before the field)
    assert prof.for_endpoint("completions") is prof
    two = prof.model_copy(update={"completions_overhead_s": 0.020})
    assert two.for_endpoint("chat").request_overhead_s == chat_s
    assert two.for_endpoint("completions").request_overhead_s == 0.020
    assert two.front_end_s("completions") == 0.020 and two.front_end_s("chat") == chat_s


def _profile_file(tmp_path: Path, completions_s: float) -> Path:
    data = json.loads(resolve_profile("calibrated", "h100-sxm").model_dump_json())
    data["completions_overhead_s"] = completions_s
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "two-front-ends.json"
    path.write_text(json.dumps(data))
    return path


def _evaluate(profile: Path, endpoint: str | None) -> dict:  # type: ignore[type-arg]
    workload = {
        "arrivals": {"requests_per_s": 2.0},
        "input_tokens": {"constant": 1000},
        "output_tokens": {"constant": 100},
    }
    if endpoint is not None:
        workload["endpoint"] = endpoint
    req = {
        "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
        "workload": workload,
        "profile": str(profile),
    }
    return api.evaluate(req).model_dump()


def test_evaluate_adds_the_workloads_endpoint_front_end(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, 0.020)
    chat_s = resolve_profile(str(path), "h100-sxm").request_overhead_s
    default, chat, completions = (_evaluate(path, e) for e in (None, "chat", "completions"))
    assert default == chat
    p_chat, p_comp = chat, completions
    assert p_chat["ttft_p50_ms"] - p_comp["ttft_p50_ms"] == pytest.approx(1e3 * (chat_s - 0.020), abs=1e-6)
    assert p_chat["itl_p99_ms"] == p_comp["itl_p99_ms"]


def test_an_unknown_endpoint_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        _evaluate(_profile_file(tmp_path, 0.020), "responses")
    assert err.value.field.startswith("workload")
    assert "endpoint" in err.value.field


def test_the_terms_ranges_are_enforced(tmp_path: Path) -> None:
    data = json.loads(resolve_profile("calibrated", "h100-sxm").model_dump_json())
    data = {k: v for k, v in data.items() if v is not None}
    for key, bad in (
        ("sequence_overhead_s", 0.5),
        ("sequence_overhead_s", -1e-6),
        ("completions_overhead_s", 11.0),
    ):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(data | {key: bad}))
        with pytest.raises(InvalidInput) as err:
            resolve_profile(str(path), "h100-sxm")
        assert key in err.value.reason
