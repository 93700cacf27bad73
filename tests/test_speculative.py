"""Speculative decoding (vLLM --speculative-config): tokens per step, the verify step's token
count, the proposer's memory and KV, the latency model's decode count and ITL, the ranges of
the keys, the flags and the planner's choice of k (planner/costmodel/speculative.py,
docs/speculative.md). Shapes: Qwen/Qwen3-32B's config.json (h 5120, 64 query / 8 KV heads of
128, I 25600, 64 layers, vocab 151936, q/k norms, untied)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.memory import kv_capacity
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.roofline import Replica
from planner.costmodel.speculative import (
    SpeculativeConfig,
    acceptance_rate_from_length,
    expected_tokens_per_step,
    proposer_cost,
)
from planner.costmodel.steptime import batch_time_s, decode_run_time_s, step_coefficients
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.latency.replica import replica_of
from planner.latency.stats import WorkloadStats
from planner.plan import plan
from planner.plan.flags import speculative_config
from planner.scheduler_config import SchedulerConfig
from planner.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
QWEN32B = "Qwen/Qwen3-32B"
EAGLE3 = SpeculativeConfig(method="eagle3", num_speculative_tokens=3, acceptance_rate=0.6)
NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, acceptance_rate=0.6)


def test_tokens_per_step_by_hand() -> None:
    """E = (1 - a^(k+1)) / (1 - a): a = 0.6, k = 3: (1 - 0.1296) / 0.4 = 2.176; k = 0: 1;
    a = 0.8, k = 5: (1 - 0.262144) / 0.2 = 3.68928."""
    assert expected_tokens_per_step(0.6, 3) == pytest.approx(2.176, rel=1e-12)
    assert expected_tokens_per_step(0.6, 0) == 1.0
    assert expected_tokens_per_step(0.8, 5) == pytest.approx(3.68928, rel=1e-12)
    # vLLM's acceptance length back to alpha (the inverse, by bisection)
    assert acceptance_rate_from_length(2.176, 3) == pytest.approx(0.6, abs=1e-12)
    cfg = SpeculativeConfig(method="eagle", num_speculative_tokens=3, acceptance_length=2.176)
    assert cfg.alpha == pytest.approx(0.6, abs=1e-12)


def test_public_eagle3_measurement_gives_a_consistent_acceptance() -> None:
    """vllm-project/vllm PR #25872 (Llama-3.1-8B-Instruct, EAGLE-3 head
    yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, num_speculative_tokens 4, concurrency 1, NVIDIA L20,
    mt-bench; table "main"): mean TPOT 9.91 ms, mean ITL 28.14 ms. A step is one streamed chunk,
    so ITL / TPOT is the tokens a step yields: 2.84, inside (1, k + 1) = (1, 5); the acceptance
    rate it implies (0.7125 by hand: 0.7125^5 = 0.18362, (1 - 0.18362) / 0.2875 = 2.8396)
    reproduces it."""
    length = 28.14 / 9.91
    alpha = acceptance_rate_from_length(length, 4)
    assert alpha == pytest.approx(0.7125, abs=1e-4)
    assert expected_tokens_per_step(alpha, 4) == pytest.approx(length, rel=1e-12)


def test_eagle3_head_memory_by_hand() -> None:
    """One decoder layer with 2h-input q/k/v: attention 5120 x 8192 + 2 x 5120 x 1024 + 8192 x
    5120 + 2 x 128 (q/k norms) = 94,372,096, the q/k/v's second input 5120 x (8192 + 2048) =
    52,428,800, MLP 3 x 5120 x 25600 = 393,216,000, norms 2 x 5120; fc 3 x 5120 x 5120 =
    78,643,200, final norm 5120; own lm_head 32000 x 5120 = 163,840,000: 782,515,456 params,
    bf16: 1,565,030,912 bytes. KV: one layer, 2 x 8 x 128 x 2 = 4,096 bytes a token beside the
    target's 64 x 4,096 = 262,144."""
    m = get_model(QWEN32B)
    p = proposer_cost(m, EAGLE3, 1, "bf16")
    assert p.resident_bytes == 782_515_456 * 2
    assert p.weight_bytes_per_pass == 782_515_456 * 2  # the own lm_head is read every pass
    assert p.kv_bytes_per_token == 4096
    r = Replica(model=m, gpu=get_gpu("h100-sxm"), speculative=EAGLE3)
    assert r.kv_bytes_per_token == 262_144 + 4_096
    # TP 2: every term halves (8 KV heads split 4 + 4)
    assert proposer_cost(m, EAGLE3, 2, "bf16").resident_bytes == 782_515_456


def test_eagle_and_mtp_share_the_lm_head_draft_brings_its_own() -> None:
    """EAGLE / MTP: layer (1-input q/k/v) 94,372,096 + 393,216,000 + 10,240 = 487,598,336, fc
    2 x 5120^2 = 52,428,800, norm 5120: 540,032,256 own; the shared lm_head (151936 x 5120 =
    777,912,320) is read each pass but adds no memory. Draft Qwen3-8B: all its parameters."""
    m = get_model(QWEN32B)
    for method in ("eagle", "mtp"):
        p = proposer_cost(m, SpeculativeConfig(method=method, num_speculative_tokens=2, acceptance_rate=0.5), 1, "bf16")
        assert p.resident_bytes == 540_032_256 * 2
        assert p.weight_bytes_per_pass == (540_032_256 + 777_912_320) * 2
    draft = get_model("Qwen/Qwen3-8B")
    spec = SpeculativeConfig(method="draft", draft_model="Qwen/Qwen3-8B", num_speculative_tokens=2, acceptance_rate=0.5)
    p = proposer_cost(m, spec, 2, "bf16", draft)
    assert p.resident_bytes == draft.total_params * 2 / 2
    assert p.kv_bytes_per_token == draft.kv_bytes_per_token("bf16", 2)
    assert proposer_cost(m, NGRAM, 1, "bf16").resident_bytes == 0.0


def test_proposer_weights_and_kv_leave_fewer_kv_tokens() -> None:
    """KV tokens = (available - proposer weights) // (block x (262,144 + 4,096)) x block."""
    m, g = get_model(QWEN32B), get_gpu("h100-sxm")
    plain = kv_capacity(Replica(model=m, gpu=g, tp=2), 0.92, 8192, 256, "0.11")
    spec = kv_capacity(Replica(model=m, gpu=g, tp=2, speculative=EAGLE3), 0.92, 8192, 256, "0.11")
    assert spec.speculative_bytes == 782_515_456
    free = plain.kv_cache_bytes - 782_515_456
    assert spec.kv_cache_blocks == int(free // (16 * (131_072 + 2_048)))
    assert spec.kv_cache_tokens < plain.kv_cache_tokens


def test_verify_step_runs_k_plus_one_tokens_per_decode() -> None:
    """n-gram (no GPU proposer), k = 3: a decode-only step of n decodes over S context tokens
    runs 4n query tokens: compute 4n linear + 4 S attention pairs (+ logits of 4n rows), the KV
    of S read once; the same formula by hand from the plain coefficients."""
    m, g = get_model(QWEN32B), get_gpu("h100-sxm")
    k0 = step_coefficients(m, g, THEORETICAL, 1)
    ks = step_coefficients(m, g, THEORETICAL, 1, speculative=NGRAM)
    assert ks.speculative_tokens == 3.0 and 1.0 + ks.accepted_tokens_per_step == pytest.approx(2.176)
    for n, s in ((1.0, 2000.0), (64.0, 64 * 1500.0), (512.0, 512 * 3000.0)):
        mem = (k0.weight_bytes + s * k0.kv_bytes_per_token) * k0.s_per_byte
        cmp = k0.linear_s_per_token * 4 * n + k0.attention_s_per_pair * 4 * s + k0.sampled_s_per_decode * 4 * n
        by_hand = max(mem, cmp) + k0.overhead_s + k0.sequence_s * n
        assert batch_time_s(ks, n, s) == pytest.approx(by_hand, rel=1e-12)
        assert batch_time_s(ks, n, s) >= batch_time_s(k0, n, s)
    # the closed-form decode run agrees with the steps summed one by one
    total = sum(batch_time_s(ks, 32.0, 32 * 1000.0 + 32 * j) for j in range(50))
    assert decode_run_time_s(ks, 32, 32 * 1000.0, 50) == pytest.approx(total, rel=1e-9)


def test_eagle3_pays_its_passes() -> None:
    """EAGLE-3, k = 3, TP 1: beside the verify step, 3 passes each reading the head's
    1,565,030,912 bytes (overhead), its KV per context token 3 x 4,096 more, and per decode its
    later 2 passes and 3 logits rows of 2 x 32000 x 5120 FLOPs."""
    m, g = get_model(QWEN32B), get_gpu("h100-sxm")
    ng = step_coefficients(m, g, THEORETICAL, 1, speculative=NGRAM)
    e3 = step_coefficients(m, g, THEORETICAL, 1, speculative=EAGLE3)
    assert e3.overhead_s - ng.overhead_s == pytest.approx(3 * 1_565_030_912 * ng.s_per_byte, rel=1e-12)
    assert e3.kv_bytes_per_token - ng.kv_bytes_per_token == 3 * 4096
    matmul = g.matmul_flops("bf16") * THEORETICAL.eta_matmul
    per_token = 2 * 618_675_456 / matmul
    logits = 3 * 2 * 32000 * 5120 / matmul
    assert e3.sequence_s - ng.sequence_s == pytest.approx(2 * per_token + logits, rel=1e-12)
    assert e3.elementwise_s_per_token - ng.elementwise_s_per_token == pytest.approx(per_token, rel=1e-12)


def _replica(spec: SpeculativeConfig | None) -> Any:
    m, g = get_model(QWEN32B), get_gpu("h100-sxm")
    wl = Workload.model_validate(
        {"arrivals": {"requests_per_s": 1}, "input_tokens": {"constant": 1000}, "output_tokens": {"constant": 301}}
    )
    cfg = SchedulerConfig(kv_cache_blocks=10_000, max_num_seqs=256, max_num_batched_tokens=8192)
    k = step_coefficients(m, g, THEORETICAL, 1, speculative=spec)
    return replica_of(k, WorkloadStats.of(wl), cfg, "colocated")


def test_decode_count_divides_by_e_and_budget_by_k_plus_one() -> None:
    """300 decode steps (301 tokens, the first from prefill) become 300 / 2.176 = 137.87 verify
    steps; each decode takes 4 tokens of the 8192 budget (2048 decodes at most)."""
    plain, spec = _replica(None), _replica(NGRAM)
    assert plain.decode_steps == 300.0
    assert spec.decode_steps == pytest.approx(300.0 / 2.176, rel=1e-12)
    assert spec.decode_cap == min(plain.decode_cap, 8192 / 4)
    # ... and beside prompts: the chunk share at a state is the budget less 4 tokens a decode that
    # rides the step (n_arr = n + z - 1; Poisson z = 1), and the budget's stability limit reads it
    from planner.latency.stability import margins
    from planner.latency.steady import build_state

    s = build_state(spec, decodes=100.0, rate_per_s=None, unshared=False)
    assert s.share_full == 8192 - 4 * s.n_arr
    assert build_state(plain, decodes=100.0, rate_per_s=None, unshared=False).share_full == 8192 - s.n_arr
    assert dict(margins(spec, s))["max_num_batched_tokens"] == (s.share_full - 1.0) / 8192


def test_itl_is_the_step_and_tpot_the_step_over_e() -> None:
    """At a light load evaluate's ITL p50 is the (verify) step a chunk waits for: it rises with
    speculation, while TPOT = step / E (what vLLM's TPOT measures) falls."""
    wl = {"arrivals": {"requests_per_s": 0.2}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 300}}
    dep: dict[str, Any] = {"model": QWEN32B, "gpu": "h100-sxm", "tp": 2}
    from planner.api import evaluate

    plain = evaluate({"deployment": dep, "workload": wl})
    spec = evaluate({"deployment": {**dep, "speculative_decoding": EAGLE3.model_dump(exclude_none=True)}, "workload": wl})
    assert spec.itl_p50_ms is not None and plain.itl_p50_ms is not None
    assert spec.itl_p50_ms > plain.itl_p50_ms
    assert spec.itl_p50_ms / 2.176 < plain.itl_p50_ms
    assert spec.deployment.speculative_decoding is not None
    assert spec.deployment.speculative_decoding.tokens_per_step == pytest.approx(2.176)
    assert "speculative_decoding" not in plain.model_dump(mode="json")["deployment"]


@pytest.mark.parametrize(
    ("sd", "field", "reason"),
    [
        ({"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 1.2}, "acceptance_rate", "less than 1"),
        ({"method": "eagle3", "num_speculative_tokens": 17, "acceptance_rate": 0.5}, "num_speculative_tokens", "16"),
        ({"method": "medusa", "num_speculative_tokens": 2, "acceptance_rate": 0.5}, "method", "eagle3"),
        ({"method": "draft", "num_speculative_tokens": 2, "acceptance_rate": 0.5}, "", "needs draft_model"),
        ({"method": "eagle", "acceptance_rate": 0.5}, "", "num_speculative_tokens is required"),
        ({"method": "eagle", "num_speculative_tokens": 2}, "", "exactly one of"),
    ],
)
def test_bad_speculative_input_names_the_field(sd: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        Deployment.from_mapping({"model": QWEN32B, "gpu": "h100-sxm", "tp": 2, "speculative_decoding": sd})
    assert exc.value.field.startswith("deployment")
    assert field in exc.value.field
    assert reason in exc.value.reason


def test_a_draft_that_does_not_fit_is_refused() -> None:
    """Qwen3-8B as the draft of Qwen3-32B on one H100: 61 GiB + 15.3 GiB leave no KV cache."""
    d = Deployment.from_mapping(
        {
            "model": QWEN32B,
            "gpu": "h100-sxm",
            "speculative_decoding": {
                "method": "draft", "draft_model": "Qwen/Qwen3-8B", "num_speculative_tokens": 3, "acceptance_rate": 0.6,
            },
        }
    )  # fmt: skip
    with pytest.raises(InvalidInput) as exc:
        d.resolve()
    assert exc.value.field == "deployment.tp" and "speculative proposer" in exc.value.reason


def test_flag_is_vllm_speculative_config_json() -> None:
    spec = EAGLE3.model_copy(update={"draft_model": "RedHatAI/Qwen3-32B-speculator.eagle3"})
    assert json.loads(speculative_config(spec)) == {
        "method": "eagle3", "num_speculative_tokens": 3, "model": "RedHatAI/Qwen3-32B-speculator.eagle3",
    }  # fmt: skip
    draft = SpeculativeConfig(method="draft", draft_model="Qwen/Qwen3-8B", num_speculative_tokens=2, acceptance_rate=0.5)
    assert json.loads(speculative_config(draft))["method"] == "draft_model"
    assert "model" not in json.loads(speculative_config(NGRAM))


def test_the_example_chooses_k_and_emits_the_flag() -> None:
    req = yaml.safe_load((ROOT / "examples" / "qwen32b-eagle3-h100.yaml").read_text())
    report = plan(req, base_dir=ROOT / "examples", workers=1)
    assert report.status == "OPTIMAL"
    note = next(n for n in report.notes if n.startswith("candidates.num_speculative_tokens"))
    assert "k=0 INFEASIBLE" in note
    for dep in report.deployments:
        sd = dep.speculative_decoding
        assert sd is not None and sd.num_speculative_tokens >= 1
        i = dep.vllm_args.index("--speculative-config")
        assert json.loads(dep.vllm_args[i + 1])["num_speculative_tokens"] == sd.num_speculative_tokens


def test_k_candidates_need_speculative_decoding() -> None:
    req = yaml.safe_load((ROOT / "examples" / "qwen32b-eagle3-h100.yaml").read_text())
    del req["speculative_decoding"]
    with pytest.raises(InvalidInput) as exc:
        plan(req, base_dir=ROOT / "examples", workers=1)
    assert "needs speculative_decoding" in exc.value.reason


def test_grpc_carries_the_request_keys_and_the_report_block() -> None:
    """The example's request through planner.v1 messages and back is the same mapping (method as
    SPECULATIVE_METHOD_EAGLE3, k candidates as a repeated field), and the plan's report survives
    its response message with the speculative block."""
    from planner.server.convert import (
        RPCS,
        report_from_response,
        request_to_mapping,
        response_from_report,
        to_message,
    )
    from planner.v1 import planner_service_pb2 as pb

    req = yaml.safe_load((ROOT / "examples" / "qwen32b-eagle3-h100.yaml").read_text())
    msg = to_message(req, pb.PlanRequest)
    assert msg.speculative_decoding.method == pb.SPECULATIVE_METHOD_EAGLE3  # type: ignore[attr-defined]
    data, _ = request_to_mapping(msg)
    assert data["speculative_decoding"] == req["speculative_decoding"]
    assert data["candidates"]["num_speculative_tokens"] == req["candidates"]["num_speculative_tokens"]
    report = plan(data, base_dir=ROOT / "examples", workers=1)
    back = report_from_response(RPCS["Plan"], response_from_report(RPCS["Plan"], report))
    assert back == report


def _simulated(spec: dict[str, Any] | None) -> dict[str, Any]:
    from planner.api import simulate

    wl = {"arrivals": {"requests_per_s": 0.5}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 300}}
    dep: dict[str, Any] = {"model": QWEN32B, "gpu": "h100-sxm", "tp": 2}
    if spec is not None:
        dep["speculative_decoding"] = spec
    return simulate({"deployment": dep, "workload": wl, "requests": 200, "seed": 1}).model_dump(mode="json")


def test_simulator_emits_bursts_of_accepted_plus_one() -> None:
    """200 answers of 300 tokens: 299 decode tokens each after the prefill's first, in verify
    steps of 1 + j tokens (j ~ geometric truncated at k = 3, alpha 0.6): tokens per streamed
    chunk average E = 2.176 (the last step of an answer may be cut short: a little less); TPOT is
    ITL / E, ITL the verify step (as evaluate predicts it at this light load); the same run twice
    is the same, byte for byte."""
    plain, spec = _simulated(None), _simulated(EAGLE3.model_dump(exclude_none=True))
    chunks = spec["itl"]["count"]
    per_chunk = 200 * 299 / chunks
    assert 2.176 * 0.97 < per_chunk < 2.176 * 1.01
    assert plain["itl"]["count"] == 200 * 299  # one token a chunk without speculation
    assert spec["tpot_p50_ms"] == pytest.approx(spec["itl_p50_ms"] / per_chunk, rel=0.03)
    assert spec["itl_p50_ms"] > plain["itl_p50_ms"] and spec["tpot_p50_ms"] < 0.6 * plain["tpot_p50_ms"]
    from planner.api import evaluate

    wl = {"arrivals": {"requests_per_s": 0.5}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 300}}
    dep = {"model": QWEN32B, "gpu": "h100-sxm", "tp": 2, "speculative_decoding": EAGLE3.model_dump(exclude_none=True)}
    predicted = evaluate({"deployment": dep, "workload": wl}).itl_p50_ms
    assert predicted == pytest.approx(spec["itl_p50_ms"], rel=0.02)
    assert json.dumps(_simulated(EAGLE3.model_dump(exclude_none=True))) == json.dumps(spec)


def test_acceptance_from_a_vllm_bench_result(tmp_path: Path) -> None:
    """A `vllm bench serve --save-result` file of a speculating server carries
    spec_decode_acceptance_length (1 + accepted / drafts), spec_decode_num_drafts and
    spec_decode_draft_tokens (vllm/benchmarks/serve.py): 1,000 drafts of 4 tokens and 1,840
    accepted give length 2.84 at k = 4, alpha 0.7125 (test above); a plan or deployment reads it."""
    doc = {
        "duration": 60.0, "completed": 100, "total_input_tokens": 50_000, "total_output_tokens": 20_000,
        "spec_decode_acceptance_length": 2.84, "spec_decode_acceptance_rate": 46.0,
        "spec_decode_num_drafts": 1000, "spec_decode_draft_tokens": 4000, "spec_decode_accepted_tokens": 1840,
    }  # fmt: skip
    (tmp_path / "bench.json").write_text(json.dumps(doc))
    from planner.api import evaluate

    wl = {"arrivals": {"requests_per_s": 0.2}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 300}}
    sd = {"method": "eagle3", "acceptance_from": "bench.json"}
    dep = {"model": QWEN32B, "gpu": "h100-sxm", "tp": 2, "speculative_decoding": sd}
    report = evaluate({"deployment": dep, "workload": wl}, base_dir=tmp_path)
    got = report.deployment.speculative_decoding
    assert got is not None and got.num_speculative_tokens == 4
    assert got.acceptance_rate == pytest.approx(acceptance_rate_from_length(2.84, 4), abs=1e-12)
    assert got.tokens_per_step == pytest.approx(2.84, rel=1e-9)
    (tmp_path / "plain.json").write_text(json.dumps({k: v for k, v in doc.items() if not k.startswith("spec")}))
    with pytest.raises(InvalidInput) as exc:
        evaluate({"deployment": {**dep, "speculative_decoding": {**sd, "acceptance_from": "plain.json"}}, "workload": wl},
                 base_dir=tmp_path)  # fmt: skip
    assert exc.value.field == "deployment.speculative_decoding.acceptance_from"


def test_a_draft_model_plan_warns_that_vllm_0_11_refuses_it() -> None:
    """Qwen3-8B drafting for Qwen3-32B at TP 2: planned (its 7.6 GiB per GPU and its 36 layers'
    KV counted), with the warning that vLLM 0.11's V1 engine refuses draft models."""
    from planner.plan.speculative_k import DRAFT_MODEL_WARNING

    req = yaml.safe_load((ROOT / "examples" / "qwen32b-eagle3-h100.yaml").read_text())
    req["candidates"].update({"tensor_parallel_sizes": [2], "num_speculative_tokens": [2]})
    req["speculative_decoding"] = {"method": "draft", "draft_model": "Qwen/Qwen3-8B", "acceptance_rate": 0.6}
    report = plan(req, base_dir=ROOT / "examples", workers=1)
    assert report.deployments and DRAFT_MODEL_WARNING in report.warnings
    sd = report.deployments[0].speculative_decoding
    assert sd is not None and sd.proposer_gib == pytest.approx(get_model("Qwen/Qwen3-8B").total_params * 2 / 2 / 2**30)
    i = report.deployments[0].vllm_args.index("--speculative-config")
    assert json.loads(report.deployments[0].vllm_args[i + 1])["method"] == "draft_model"
