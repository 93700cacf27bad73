"""capplan plan's defaults (planner/plan/defaults.py): the candidates are the GPUs with their own
measured profile that the price list prices; transferred profiles only when asked; every price
from one named, dated list, or a warning that the plan mixes sources; `pricing:` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_plan import request, run

from planner.costmodel.profile import profile_to_json
from planner.costmodel.profiles import builtin_profile, measured_gpus
from planner.errors import InvalidInput
from planner.plan.defaults import candidate_gpus, price_warnings, prices
from planner.schema.plan_request import parse_plan_request

MEASURED = ["a100-80gb-sxm", "b200", "h100-sxm", "h200-sxm", "l40s"]  # planner/costmodel/data/profiles/
SMALL = {"tensor_parallel_sizes": [1], "disaggregation": "never"}


def _req(**over: Any) -> Any:
    return parse_plan_request(request(**over))


def test_the_measured_gpus_are_the_shipped_profiles() -> None:
    assert measured_gpus() == MEASURED


def test_default_candidates_are_the_measured_gpus_on_the_default_list() -> None:
    gpus, (note,) = candidate_gpus(_req(candidates={}), None)
    assert gpus == MEASURED  # not h100-pcie (transferred from h100-sxm), not mi300x (from h200-sxm)
    assert note == (
        "candidates: the GPUs with their own measured profile that price list runpod-secure-2026-09-25 "
        "prices: a100-80gb-sxm, b200, h100-sxm, h200-sxm, l40s; no measured profile: h100-pcie, mi300x "
        "(candidates.allow_transferred_profiles: true adds them with a transferred profile)"
    )


def test_transferred_profiles_when_asked_and_only_where_priced() -> None:
    gpus, (note,) = candidate_gpus(_req(candidates={"allow_transferred_profiles": True}), None)
    assert gpus == sorted([*MEASURED, "h100-pcie"])
    assert "not priced by it: mi300x" in note  # the default list does not price it: left out


def test_theoretical_puts_every_priced_gpu_on_the_same_footing() -> None:
    gpus, (note,) = candidate_gpus(_req(candidates={}, profile="theoretical"), None)
    assert gpus == sorted([*MEASURED, "h100-pcie"])
    assert note.startswith("candidates: every catalog GPU (profile theoretical: all on the roofline)")


def test_a_profile_file_makes_its_gpu_the_candidate(tmp_path: Path) -> None:
    f = tmp_path / "mine.json"
    f.write_text(profile_to_json(builtin_profile("l40s")))
    gpus, (note,) = candidate_gpus(_req(candidates={}, profile=str(f)), None)
    assert gpus == ["l40s"] and note.startswith(f"candidates: the GPU profile {f} was fitted on")


def test_another_price_list_prices_and_bounds_the_defaults() -> None:
    req = _req(candidates={}, price_list="lambda-2026-09-25")
    gpus, (note,) = candidate_gpus(req, None)
    assert gpus == ["b200", "h100-sxm"]  # Lambda's 1-GPU offers among the measured GPUs
    assert "not priced by it: a100-80gb-sxm, h200-sxm, l40s" in note
    assert {p.gpu: p.usd_per_gpu_hour for p in prices(req, gpus)} == {"b200": 6.99, "h100-sxm": 4.29}


def test_a_listed_transferred_gpu_is_refused_naming_the_field_and_the_flag() -> None:
    with pytest.raises(InvalidInput) as exc:
        run(request(candidates={"gpus": ["h100-sxm", "mi300x"], **SMALL}))
    assert exc.value.field == "candidates.gpus"
    assert exc.value.reason.startswith(
        "mi300x has no measured profile: profile auto would time it with h200-sxm's"
    )
    assert "candidates.allow_transferred_profiles: true" in exc.value.reason


def test_unknown_price_list_names_the_field() -> None:
    with pytest.raises(InvalidInput) as exc:
        run(request(price_list="aws-2026"))
    assert exc.value.field == "price_list" and "valid: digitalocean-2026-05-28" in exc.value.reason


def test_mixed_price_sources_are_warned_and_named() -> None:
    """mi300x is on DigitalOcean's list only (2026-05-28), h100-sxm on RunPod's (2026-09-25): a
    plan comparing them says so; prices from `pricing:` are the user's and end the warning."""
    cand = {"gpus": ["h100-sxm", "mi300x"], "allow_transferred_profiles": True, **SMALL}
    rep = run(request(candidates=cand))
    assert rep.status == "OPTIMAL"
    (mixed,) = [w for w in rep.warnings if w.startswith("the plan mixes price sources")]
    assert "h100-sxm from runpod-secure-2026-09-25 (RunPod, checked 2026-09-25)" in mixed
    assert "mi300x from digitalocean-2026-05-28 (DigitalOcean, checked 2026-05-28)" in mixed
    (note,) = [n for n in rep.notes if n.startswith("prices: ")]
    assert "; mi300x from price list digitalocean-2026-05-28 (DigitalOcean, " in note
    assert {g.gpu: g.usd_per_gpu_hour for g in rep.gpus}.items() <= {"h100-sxm": 3.49, "mi300x": 1.99}.items()
    over = parse_plan_request(request(candidates=cand, pricing={"mi300x": {"usd_per_gpu_hour": 2.5}}))
    assert price_warnings(over, ["h100-sxm", "mi300x"]) == []
    assert {p.gpu: p.usd_per_gpu_hour for p in prices(over, ["h100-sxm", "mi300x"])} == {
        "h100-sxm": 3.49,
        "mi300x": 2.5,
    }


def test_a_default_plan_never_times_a_gpu_with_a_transferred_profile() -> None:
    """The audit's case: the whole catalog by default planned on MI300X (transferred from H200,
    priced at DigitalOcean against RunPod's H100s)."""
    rep = run(request(candidates={"tensor_parallel_sizes": [1, 2]}))
    assert rep.status == "OPTIMAL"
    assert [p.gpu for p in rep.profiles] == MEASURED
    assert not any("transferred" in p.name for p in rep.profiles)
    assert {d.gpu for d in rep.deployments} <= set(MEASURED)
    assert not [w for w in rep.warnings if "mixes price sources" in w or "no measured profile" in w]
    assert any(n.startswith("prices: price list runpod-secure-2026-09-25 (RunPod, ") for n in rep.notes)
