"""Plans vLLM starts: `--max-model-len` always emitted and held by the KV cache, and prefill and
decode pools NixlConnector can pair (issue #32's audit: Llama-3.1-70B at TP 2 on 80 GB GPUs
planned without `--max-model-len`, which vLLM refuses; prefill TP 4 paired with decode TP 2).
The flags' names and values against vLLM's own list: tests/test_vllm_args.py.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.models import get_model
from planner.costmodel.feasibility import feasibility
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.plan import plan
from planner.plan.capacity import CapacityPoint, ReplicaConfig
from planner.plan.flags import incompatible_pairs, nixl_pairing_error
from planner.plan.search import prune_divisible
from planner.schema.plan_report import PlanReport

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
GIB = 2**30

WORKLOAD: dict[str, Any] = {
    "arrivals": {"requests_per_s": 2.0},
    "input_tokens": {"percentiles": {"p50": 1500, "p99": 6000}},
    "output_tokens": {"percentiles": {"p50": 300, "p99": 1000}},
}


def llama70(**over: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "model": LLAMA70,
        "slo": {"ttft_p99_ms": 2000, "itl_p99_ms": 100},
        "workload": copy.deepcopy(WORKLOAD),
        "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [2], "disaggregation": "never"},
    }
    req.update(over)
    return req


def flags_of(args: list[str]) -> dict[str, str]:
    return dict(zip(args[::2], args[1::2], strict=True))


# --- --max-model-len -----------------------------------------------------------------------------


def test_llama70b_at_tp2_on_h100_gets_a_max_model_len_its_kv_cache_holds() -> None:
    """The audit's case. By hand: the longest prompt is the percentiles' line through p50 1500
    and p99 6000 extended to p100, 6000 + 4500 / 0.49 x 0.01 = 6091.8 -> 6092 tokens; the longest
    answer 1000 + 700 / 0.49 x 0.01 = 1014.3 -> 1015; 7107 rounded up to a multiple of 1,024 is
    7,168. Llama-3.1-70B's KV per token on one GPU of TP 2: K and V x 80 layers x (8 KV heads / 2)
    x 128 dims x 2 bytes = 163,840 bytes, a 16-token block 2,621,440 bytes; one 7,168-token
    sequence is 448 blocks (1.09 GiB). vLLM's default, the model's 131,072-token context, is
    8,192 blocks (20 GiB): more than such a replica has (about 1.7 GiB at vLLM's default budget)."""
    report = plan(llama70(), workers=1)
    assert report.status == "OPTIMAL"
    (dep,) = report.deployments
    assert dep.tensor_parallel_size == 2 and dep.gpu == "h100-sxm"
    flags = flags_of(dep.vllm_args)
    assert flags["--max-model-len"] == "7168"
    block_bytes = 2 * 80 * (8 // 2) * 128 * 2 * 16
    assert block_bytes == 2_621_440
    need_blocks = math.ceil(7168 / 16)
    assert need_blocks == 448
    # the replica as the flags run it: the memory vLLM leaves for KV, in whole blocks
    deployment = Deployment(
        model=LLAMA70,
        gpu="h100-sxm",
        tp=2,
        max_num_batched_tokens=int(flags["--max-num-batched-tokens"]),
        max_num_seqs=int(flags["--max-num-seqs"]),
        gpu_memory_utilization=float(flags["--gpu-memory-utilization"]),
        max_model_len=int(flags["--max-model-len"]),
    )
    kv = deployment.resolve().kv  # the plan's profile: auto
    assert kv.kv_bytes_per_token * 16 == block_bytes
    assert kv.budget is not None
    blocks = int(kv.budget.available_bytes // block_bytes)
    assert kv.kv_cache_blocks == blocks >= need_blocks
    # without --max-model-len vLLM would need the whole context in the cache: it refuses
    assert math.ceil(131_072 / 16) == 8192 > blocks
    default_budget = Deployment(model=LLAMA70, gpu="h100-sxm", tp=2).resolve().kv
    assert default_budget.kv_cache_bytes < 2 * GIB < 8192 * block_bytes


def test_a_shape_whose_kv_cache_cannot_hold_max_model_len_is_unfit_with_the_reason() -> None:
    """50,000 tokens at TP 2 need 3,125 blocks (7.63 GiB per GPU): more than even the smallest
    budget leaves (6.5 GiB), so TP 2 is listed unfit, and the plan runs at TP 4."""
    report = plan(llama70(max_model_len=50_000, candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [2, 4], "disaggregation": "never"}), workers=1)  # fmt: skip
    assert report.status == "OPTIMAL"
    (unfit,) = report.search.unfit
    assert unfit.startswith("h100-sxm TP2:")
    assert "cannot hold one sequence of max_model_len 50,000 tokens (3,125 blocks of 16" in unfit
    assert "vLLM refuses to start" in unfit
    assert {d.tensor_parallel_size for d in report.deployments} == {4}
    assert all(flags_of(d.vllm_args)["--max-model-len"] == "50000" for d in report.deployments)


def test_only_unfit_shapes_make_a_plan_infeasible() -> None:
    report = plan(llama70(max_model_len=50_000), workers=1)
    assert report.status == "INFEASIBLE" and not report.deployments
    assert any("max_model_len 50,000" in u for u in report.search.unfit)


def test_the_feasibility_screen_counts_whole_blocks() -> None:
    """One token more than the whole blocks hold is refused, as vLLM's check_enough_kv_cache_memory
    (ceil(max_model_len / 16) blocks) refuses it."""
    from planner.catalog.gpus import get_gpu

    model, gpu = get_model(LLAMA70), get_gpu("h100-sxm")
    kv = Deployment(model=LLAMA70, gpu="h100-sxm", tp=2, max_num_batched_tokens=8192, max_num_seqs=1024)
    blocks = kv.resolve().kv.kv_cache_blocks  # a measured profile: vLLM's budget, as the screen's
    fits = feasibility(
        model, gpu, 2, max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=blocks * 16
    )
    over = feasibility(
        model, gpu, 2, max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=blocks * 16 + 1
    )
    assert fits == [] and [w.field for w in over] == ["max_model_len"]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"max_model_len": 1}, "max_model_len", "greater than or equal to 2"),
        ({"max_model_len": 200_000}, "max_model_len", "exceeds meta-llama/Llama-3.1-70B-Instruct's context"),
        ({"max_model_len": 6092}, "max_model_len", "longest prompt (6,092 tokens)"),
        (
            {"workload": {**WORKLOAD, "output_tokens": {"constant": 130_000}}},
            "workload.output_tokens",
            "exceeds meta-llama/Llama-3.1-70B-Instruct's context",
        ),
        (
            {"workload": {**WORKLOAD, "input_tokens": {"constant": 131_072}}},
            "workload.input_tokens",
            "max_position_embeddings 131,072",
        ),
    ],
)
def test_a_length_the_model_cannot_serve_is_bad_input(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        plan(llama70(**change), workers=1)
    assert exc.value.field == field and words in exc.value.reason, exc.value


def test_a_given_max_model_len_is_emitted_and_answers_past_it_are_cut() -> None:
    """A given max_model_len above the longest prompt is used as is (answers longer than it stop
    there, as vLLM stops them); the workload's own default is capped at the model's context."""
    report = plan(llama70(max_model_len=6093), workers=1)
    assert {flags_of(d.vllm_args)["--max-model-len"] for d in report.deployments} == {"6093"}
    long = {**WORKLOAD, "input_tokens": {"constant": 100_000}, "output_tokens": {"constant": 31_000}}
    req = llama70(
        workload=long,
        slo={"ttft_p99_ms": 600_000, "itl_p99_ms": 1000},
        candidates={"gpus": ["h200-sxm"], "tensor_parallel_sizes": [4], "disaggregation": "never"},
    )
    assert {flags_of(d.vllm_args)["--max-model-len"] for d in plan(req, workers=1).deployments} == {"131072"}


def test_an_evaluated_deployment_with_max_model_len_is_checked_like_vllm() -> None:
    with pytest.raises(InvalidInput) as exc:
        Deployment(model=LLAMA70, gpu="h100-sxm", tp=2, max_model_len=131_072).resolve()
    assert exc.value.field == "deployment.max_model_len"
    with pytest.raises(InvalidInput) as exc:
        Deployment(model=LLAMA70, gpu="h100-sxm", tp=4, max_model_len=131_073).resolve()
    assert exc.value.field == "deployment.max_model_len" and "context" in exc.value.reason
    resolved = Deployment(model=LLAMA70, gpu="h100-sxm", tp=4, max_model_len=8192).resolve()
    assert resolved.scheduler.max_model_len == 8192


# --- NixlConnector pairing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefill_tp", "decode_tp", "kv_heads", "ok"),
    [
        (1, 1, 8, True),
        (1, 8, 8, True),
        (2, 4, 8, True),
        (4, 4, 8, True),
        (4, 2, 8, False),  # the audit's pair: decode TP below prefill TP
        (4, 1, 8, False),
        (2, 3, 8, False),  # not a multiple
        (4, 8, 4, True),  # prefill cache replicated (TP >= KV heads): one head per GPU on both sides
        (2, 8, 4, False),  # a split prefill cache cannot feed a decode TP that replicates heads
        (2, 4, 4, True),
    ],
)
def test_nixl_pairing_rule(prefill_tp: int, decode_tp: int, kv_heads: int, ok: bool) -> None:
    """vLLM 0.11's NixlConnectorWorker.add_remote_agent: tp_ratio = divide(decode TP, prefill TP)
    (asserts divisibility, "Decode TP cannot be smaller than prefill TP"); a replicated prefill
    cache must match the decode block; a split one must be tp_ratio decode blocks."""
    assert (nixl_pairing_error(prefill_tp, decode_tp, kv_heads) is None) == ok


def _point(gpu: str, tp: int, role: str, rate: float) -> CapacityPoint:
    from planner.plan.capacity import unfit

    cfg = ReplicaConfig(gpu, tp, role, 1024, 64)  # type: ignore[arg-type]
    p = unfit(cfg, "")
    return p.__class__(**{**p.__dict__, "fits": True, "feasible": True, "requests_per_s": rate})


def test_incompatible_pairs_name_every_pair_nixl_refuses() -> None:
    pts = [
        _point("h100-sxm", 4, "prefill", 10),
        _point("h100-sxm", 2, "decode", 5),
        _point("h100-sxm", 4, "decode", 9),
    ]
    assert incompatible_pairs(pts, 8) == (
        ("h100-sxm/tp4/prefill/b1024/s64", "h100-sxm/tp2/decode/b1024/s64"),
    )


def test_a_decode_replica_the_prefill_pool_needs_is_not_pruned() -> None:
    """Two decode TP 2 replicas serve more than one TP 4 replica on the same GPUs, but a prefill
    TP 4 pool can only pair with the TP 4 one: without the pairing rule it would be dropped."""
    pre4 = _point("h100-sxm", 4, "prefill", 10)
    dec2, dec4 = _point("h100-sxm", 2, "decode", 5), _point("h100-sxm", 4, "decode", 9)
    kept, _ = prune_divisible([pre4, dec2, dec4])
    assert dec4 not in kept  # the rule the MILP would otherwise see
    kept, dropped = prune_divisible([pre4, dec2, dec4], lambda p, d: nixl_pairing_error(p, d, 8) is None)
    assert kept == [pre4, dec2, dec4] and dropped == 0
    pre2 = _point("h100-sxm", 2, "prefill", 6)  # a TP 2 prefill: pairs with both decode TPs
    kept, _ = prune_divisible([pre2, dec2, dec4], lambda p, d: nixl_pairing_error(p, d, 8) is None)
    assert dec4 not in kept


def _pairs_ok(report: PlanReport, kv_heads: int) -> None:
    """No deployed prefill pool beside a decode pool NixlConnector refuses, in the plan or in any
    alternative it reports."""
    plans = [report.deployments, *(a.deployments for a in report.alternatives)]
    for deps in plans:
        pre = [d.tensor_parallel_size for d in deps if d.role == "prefill"]
        dec = [d.tensor_parallel_size for d in deps if d.role == "decode"]
        for p in pre:
            for d in dec:
                assert d % p == 0, (p, d)  # the audit's rule, as the test reads it
                assert nixl_pairing_error(p, d, kv_heads) is None


def test_azure_code_bursty_pairs_only_what_nixl_accepts() -> None:
    """The audit's example: its cheapest pools were prefill TP 4 with decode TP 1 or 2."""
    from planner.schema.plan_request import load_plan_file

    req = load_plan_file(EXAMPLES / "azure-code-bursty.yaml")
    report = plan(req, base_dir=EXAMPLES, workers=1)
    assert report.deployments
    _pairs_ok(report, get_model(req.model).kv_heads)


@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(["Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B-Instruct"]),
    tps=st.sets(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4),
    rate=st.floats(0.5, 60.0),
    prompt=st.integers(64, 6000),
    answer=st.integers(2, 1500),
    ttft_ms=st.sampled_from([150.0, 400.0, 1500.0]),
    itl_ms=st.sampled_from([8.0, 15.0, 40.0]),
    mixed=st.booleans(),
)
def test_disaggregated_plans_pair_only_what_nixl_accepts(
    model: str,
    tps: set[int],
    rate: float,
    prompt: int,
    answer: int,
    ttft_ms: float,
    itl_ms: float,
    mixed: bool,
) -> None:
    req = {
        "model": model,
        "slo": {"ttft_p99_ms": ttft_ms, "itl_p99_ms": itl_ms},
        "workload": {
            "arrivals": {"requests_per_s": rate},
            "input_tokens": {"pairs": [[prompt, 0.8], [prompt * 2, 0.2]]},
            "output_tokens": {"constant": answer},
        },
        "candidates": {
            "gpus": ["h100-sxm", "a100-80gb-sxm"] if mixed else ["h100-sxm"],
            "tensor_parallel_sizes": sorted(tps),
            "disaggregation": "always",
            "mixed_gpu_types": mixed,
        },
    }
    report = plan(req, workers=1)
    if report.deployments:
        _pairs_ok(report, get_model(model).kv_heads)
    else:
        assert report.infeasibility is not None and report.infeasibility.reason
