"""The README's claims about the CLI hold: every `capplan analyze` row runs with the flags it
lists, every command that prices takes `--usd-per-gpu-hour`, `evaluate` says how many GPUs the
deployment holds, and each example's comment matches its budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BASE = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm"]
# Placeholders and ellipses of the README's table, filled with concrete values.
FILL = {"C": "1500", "P": "4000", "N": "16", "V": "1e8"}


def analyze_rows() -> list[str]:
    section = README.split("## `capplan analyze`", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z-]+ [^`]*)` \|", section, re.M)


def concrete(cell: str) -> list[str]:
    text = cell.replace(",...", ",300:0.5").replace(",..,", ",").replace(",..", "")
    return [FILL.get(word, word) for word in text.split()]


def test_the_table_lists_every_analysis() -> None:
    assert {row.split()[0] for row in analyze_rows()} == {
        "concurrency",
        "static-batching",
        "chunked-prefill",
        "prefill",
        "utilization",
        "kv-capacity",
    }


@pytest.mark.parametrize("row", analyze_rows())
def test_every_analysis_runs_with_the_flags_the_readme_lists(
    row: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = concrete(row)
    rc, out, err = run_cli(["analyze", argv[0], *BASE, *argv[1:], "--json"], capsys)
    assert rc == 0, err
    keys_cell = README.split(f"`{row}`", 1)[1].split("|")[2]
    keys = {k.split("[]")[0].strip() for k in re.findall(r"`([a-z_\[\]]+)", keys_cell)}
    assert keys <= set(json.loads(out)), keys - set(json.loads(out))


PRICED = [
    ["analyze", "concurrency", *BASE, "--context-tokens", "1500", "--concurrency", "8"],
    [
        "analyze",
        "static-batching",
        *BASE,
        "--context-tokens",
        "1500",
        "--batch",
        "8",
        "--output-lengths",
        "100:1",
    ],
    ["analyze", "prefill", *BASE, "--prompt-tokens", "1500"],
    ["analyze", "utilization", *BASE, "--context-tokens", "1500", "--output-tokens-per-day", "1e9"],
    ["evaluate", str(ROOT / "examples" / "chat-qwen3-8b-h100.yaml")],
]


def _dollars(d: dict) -> list[float]:
    if "rows" in d:
        return [r["usd_per_million_output_tokens"] for r in d["rows"]]
    if "usd_per_hour" in d:
        return [d["usd_per_hour"], d["usd_per_million_output_tokens"]]
    key = "usd_per_month" if "usd_per_month" in d else "usd_per_million_input_tokens"
    return [d[key]]


@pytest.mark.parametrize("argv", PRICED, ids=lambda a: a[1] if a[0] == "analyze" else a[0])
def test_every_command_that_prices_takes_the_price(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_cli([*argv, "--json", "--usd-per-gpu-hour", "1"], capsys)
    assert rc == 0, err
    one = _dollars(json.loads(out))
    rc, out, err = run_cli([*argv, "--json", "--usd-per-gpu-hour", "3"], capsys)
    assert rc == 0, err
    assert _dollars(json.loads(out)) == pytest.approx([3 * x for x in one])
    rc, _, err = run_cli([*argv, "--usd-per-gpu-hour", "-3"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --usd-per-gpu-hour: Input should be greater than 0")


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        ("chat-qwen3-8b-h100.yaml", "(2 GPUs)"),
        ("disagg-llama70b-h100.yaml", "(10 GPUs)"),
        ("bursty-code.yaml", "(1 GPU)"),
    ],
)
def test_evaluate_says_how_many_gpus(name: str, gpus: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["evaluate", str(ROOT / "examples" / name)], capsys)
    assert rc == 0, err
    assert gpus in out.splitlines()[0]


def test_example_comments_state_their_budget() -> None:
    """A comment that names a token budget names the one the file sets (or vLLM's default when
    the file sets none)."""
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        text = path.read_text()
        data = yaml.safe_load(text)
        if "deployment" not in data:
            continue
        comments = " ".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
        said = re.findall(r"(\d[\d,]*)-token budget|budget (\d[\d,]*)", comments)
        budget = data["deployment"].get("max_num_batched_tokens")
        for pair in said:
            value = int((pair[0] or pair[1]).replace(",", ""))
            assert budget is not None and value == budget, (
                f"{path.name}: comment says {value}, file sets {budget}"
            )


def test_cost_model_section_points_to_the_kv_capacity_model() -> None:
    """The README's KV line summarizes docs/kv-capacity.md (vLLM's start-up budget) and links it;
    the seed's flat 1.5 GiB reserve is stated only for the theoretical profile that keeps it."""
    section = README.split("## The cost model", 1)[1].split("\n## ", 1)[0]
    assert "](docs/kv-capacity.md)" in section
    kv = next(b for b in section.split("\n- ") if b.startswith("KV capacity"))
    before, _, after = kv.partition("theoretical")
    assert "1.5 GiB" not in before and "1.5 GiB" in after
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), link
