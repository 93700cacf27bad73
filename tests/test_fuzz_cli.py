"""Fuzz every `capplan` subcommand in-process with hostile input (issue 8): wrong types, NaN and
infinities, 1e30, negatives, empty values, garbage files. Each call must exit 2 (or 1) with
exactly one stderr line, 0 with a sane answer, or 3 (no plan) with the plan's report or one
stderr line; never a traceback, never over 20 s, never over 1 GiB (tests/fuzz_support.py states the contract).

Derandomized (tests/conftest.py), so a red run is reproducible: the failure prints the argv.
Examples are few per subcommand to keep the whole file near 30 s on two cores; explore more with
HYPOTHESIS_PROFILE=explore and a larger FUZZ_EXAMPLES.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_support import (
    GARBAGE_FILES,
    HOSTILE_VALUES,
    MAX_RSS_GROWTH_BYTES,
    check,
    fuzz_settings,
    hostile_text,
    hostile_value,
    memory_guard,
    peak_rss_bytes,
    run,
)
from hypothesis import assume, given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
CHAT = ROOT / "examples" / "chat-qwen3-8b-h100.yaml"
MEASUREMENTS = ROOT / "planner" / "costmodel" / "data" / "measurements" / "h200_qwen3_8b_shape.json"
QWEN_CONFIG = ROOT / "planner" / "catalog" / "data" / "models" / "Qwen--Qwen3-8B.config.json"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Garbage and near-valid files the fuzzers point flags at; warm caches once."""
    d = tmp_path_factory.mktemp("fuzz")
    out: dict[str, Path] = {}
    for i, blob in enumerate(GARBAGE_FILES):
        p = d / f"garbage{i}.yaml"
        p.write_bytes(blob)
        out[f"garbage{i}"] = p
    out["dir"] = d
    out["missing"] = d / "no-such-file.yaml"
    cfg = json.loads(QWEN_CONFIG.read_text())
    for key, value in (
        ("num_attention_heads", "abc"),
        ("hidden_size", None),
        ("num_hidden_layers", float("nan")),
        ("vocab_size", -5),
        ("intermediate_size", 1e30),
        ("num_key_value_heads", 7),
    ):
        p = d / f"config-{key}.json"
        p.write_text(json.dumps({**cfg, key: value}))
        out[f"config-{key}"] = p
    trace = d / "trace.csv"
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"{i * 0.25:.3f},{100 + 37 * i % 900},{20 + 13 * i % 200}" for i in range(200)]
    trace.write_text("\n".join(rows) + "\n")
    out["trace"] = trace
    for name, text in (
        ("trace-nan", "TIMESTAMP,ContextTokens,GeneratedTokens\nnan,1,1\n1,2,3\n"),
        ("trace-huge-time", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,10\n1e30,10,10\n"),
        ("trace-huge-tokens", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1e30,10\n1,10,10\n"),
        ("trace-negative", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,-5,10\n1,10,10\n"),
        ("trace-one", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,10\n"),
        ("trace-same-instant", "TIMESTAMP,ContextTokens,GeneratedTokens\n5,10,10\n5,10,10\n5,10,10\n"),
        ("trace-header", "TIMESTAMP,ContextTokens,GeneratedTokens\n"),
        ("trace-nul", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1\x00,1\n"),
        ("trace-big-field", "TIMESTAMP,ContextTokens,GeneratedTokens\n0," + "9" * 200_000 + ",1\n"),
    ):
        p = d / f"{name}.csv"
        p.write_text(text)
        out[name] = p
    # Warm the caches (profiles, traces) so the per-call time limit measures the call.
    run(["evaluate", str(CHAT)])
    start = peak_rss_bytes()
    with memory_guard():
        yield out
    grown = peak_rss_bytes() - start
    assert grown < MAX_RSS_GROWTH_BYTES, f"the fuzz calls raised peak RSS by {grown / 2**20:.0f} MiB"


def _path_choices(files: dict[str, Path]) -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(str(p) for p in files.values()))


# --- analyze -------------------------------------------------------------------------------------

COMMON = {"--model": "Qwen/Qwen3-8B", "--gpu": "h100-sxm"}
ANALYZE: dict[str, dict[str, str]] = {
    "concurrency": {"--context-tokens": "2048", "--concurrency": "1,8,64"},
    "static-batching": {"--context-tokens": "1024", "--batch": "1,8", "--output-lengths": "100:0.5,300:0.5"},
    "chunked-prefill": {"--prompt-tokens": "4096", "--decodes": "32", "--context-tokens": "1024"},
    "prefill": {"--prompt-tokens": "2048"},
    "utilization": {"--context-tokens": "1024", "--output-tokens-per-day": "1e9"},
    "kv-capacity": {"--context-tokens": "4096"},
}
OPTIONAL = {
    "concurrency": ["--gpu-memory-utilization", "--usd-per-gpu-hour"],
    "static-batching": ["--usd-per-gpu-hour"],
    "chunked-prefill": ["--chunk", "--budget"],
    "prefill": ["--usd-per-gpu-hour"],
    "utilization": ["--floor-concurrency", "--usd-per-gpu-hour"],
    "kv-capacity": ["--gpu-memory-utilization", "--max-num-batched-tokens", "--max-num-seqs"],
}
SHARED = ["--tp", "--weight-dtype", "--kv-dtype", "--profile"]


def _flags(name: str) -> list[str]:
    return sorted({*COMMON, *ANALYZE[name], *OPTIONAL[name], *SHARED})


@pytest.mark.parametrize("name", sorted(ANALYZE))
def test_analyze(name: str, files: dict[str, Path]) -> None:
    @fuzz_settings(12)
    @given(
        st.dictionaries(
            st.sampled_from(_flags(name)), st.one_of(hostile_text(), _path_choices(files)), max_size=2
        ),
        st.booleans(),
    )
    def fuzz(bad: dict[str, str], as_json: bool) -> None:
        args = {**COMMON, **ANALYZE[name], **bad}
        argv = ["analyze", name, *[x for kv in args.items() for x in kv]]
        check(run([*argv, "--json"] if as_json else argv))

    fuzz()


@pytest.mark.parametrize("key", ["num_attention_heads", "hidden_size", "num_hidden_layers", "vocab_size"])
def test_analyze_refuses_broken_config_json_in_one_line(key: str, files: dict[str, Path]) -> None:
    o = run(
        [
            "analyze",
            "prefill",
            "--model",
            str(files[f"config-{key}"]),
            "--gpu",
            "h100-sxm",
            "--prompt-tokens",
            "64",
        ]
    )
    check(o)
    assert o.rc == 2 and f"config-{key}.json: {key}:" in o.err


# --- evaluate, simulate, plan: hostile YAML ------------------------------------------------------


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


ALL_DOCS = [yaml.safe_load(p.read_text()) for p in EXAMPLES]
# Examples with a deployment are evaluate/simulate inputs; the others are plan requests.
DOCS = {
    "evaluate": [d for d in ALL_DOCS if "deployment" in d],
    "plan": [d for d in ALL_DOCS if "deployment" not in d],
}
MUTATIONS = {
    cmd: [(i, path) for i, doc in enumerate(docs) for path in _paths(doc)] for cmd, docs in DOCS.items()
}


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _mutated(cmd: str, i: int, path: tuple[Any, ...], value: Any, op: str) -> Any:
    doc = copy.deepcopy(DOCS[cmd][i])
    node = doc
    for part in path[:-1]:
        node = node[part]
    last = path[-1]
    if op == "drop" and isinstance(node, dict):
        del node[last]
    elif op == "extra" and isinstance(node, dict):
        node["unexpected_key"] = value
    else:
        node[last] = value
    return doc


def _random_value(rnd: random.Random) -> Any:
    return rnd.choice(
        [
            rnd.choice(HOSTILE_VALUES),
            rnd.choice(HOSTILE_VALUES),
            10 ** rnd.uniform(-12, 40),
            -(10 ** rnd.uniform(-12, 40)),
            rnd.randint(-(10**6), 10**6),
            rnd.choice(["abc", "", "1e30", "-1", "nan"]),
        ]
    )


@st.composite
def yaml_file(draw: st.DrawFn, files: dict[str, Path], tmp: Path, cmd: str = "evaluate") -> str:
    """A path to a hostile input file: a garbage file, or an example with one value replaced,
    one key dropped or an unknown key added. Hypothesis draws only a seed (so the examples spread
    evenly over every key of every example); the mutation is made from it."""
    rnd = random.Random(draw(st.integers(0, 2**31)))
    if rnd.random() < 0.12:
        return str(files[rnd.choice(sorted(files))])
    i, path = rnd.choice(MUTATIONS[cmd])
    op = rnd.choice(["set", "scale", "scale", "scale", "scale", "drop", "extra"])
    value = _random_value(rnd)
    if op == "scale":
        # A plausible-looking extreme: the example's own number scaled, so validation may pass
        # and the models run on it.
        old = _get(DOCS[cmd][i], path)
        if isinstance(old, int | float) and not isinstance(old, bool):
            f = rnd.choice([0, 1e-9, 1e-3, 0.1, 0.5, 2, 10, 1e3, 1e6, 1e9])
            value = type(old)(old * f) if math.isfinite(old * f) else old
        op = "set"
    doc = _mutated(cmd, i, path, value, op)
    p = tmp / "input.yaml"
    p.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return str(p)


def test_evaluate(files: dict[str, Path], tmp_path: Path) -> None:
    flags = [
        "--slo-ttft-p99-ms",
        "--slo-itl-p99-ms",
        "--slo-tpot-p99-ms",
        "--slo-e2e-p99-ms",
        "--requests-per-s",
    ]
    flags += ["--usd-per-gpu-hour", "--profile"]

    @fuzz_settings(40)
    @given(
        yaml_file(files, tmp_path),
        st.dictionaries(st.sampled_from(flags), hostile_text(), max_size=1),
        st.booleans(),
    )
    def fuzz(path: str, bad: dict[str, str], as_json: bool) -> None:
        argv = ["evaluate", path, *[x for kv in bad.items() for x in kv]]
        check(run([*argv, "--json"] if as_json else argv))

    fuzz()


SIM_FLAGS = ["--seed", "--requests", "--horizon-s", "--requests-per-s", "--router", "--replay", "--profile"]
SIM_FLAGS += ["--slo-ttft-p99-ms", "--slo-itl-p99-ms", "--slo-tpot-p99-ms", "--slo-e2e-p99-ms", "--trace"]


def _legit_long_run(flags: dict[str, str]) -> bool:
    """A valid request for a big simulation (thousands of requests, an hour of arrivals): its
    time grows with its size by design, so it is no hostile input (values past the caps are)."""
    limits = {"--requests": (5_000, 1e7), "--horizon-s": (600.0, 1e8)}
    for flag, (big, cap) in limits.items():
        try:
            v = float(flags.get(flag, "nan"))
        except ValueError:
            continue
        if big < v <= cap:
            return True
    return False


def test_simulate(files: dict[str, Path], tmp_path: Path) -> None:
    traces = [*sorted(str(p) for k, p in files.items() if k.startswith("trace")), "azure-conv-2023"]

    @fuzz_settings(40)
    @given(
        yaml_file(files, tmp_path),
        st.dictionaries(
            st.sampled_from(SIM_FLAGS), st.one_of(hostile_text(), st.sampled_from(traces)), max_size=2
        ),
        st.booleans(),
    )
    def fuzz(path: str, bad: dict[str, str], as_json: bool) -> None:
        assume(not _legit_long_run(bad))
        if "--requests" not in bad and "--horizon-s" not in bad:
            bad = {**bad, "--requests": "64"}  # hostile values, not legitimately long runs
        argv = ["simulate", path, *[x for kv in bad.items() for x in kv]]
        check(run([*argv, "--json"] if as_json else argv))

    fuzz()


@pytest.mark.parametrize(
    "extra",
    [
        ["--requests", "1e30"],
        ["--requests", "10000001"],
        ["--horizon-s", "1e30"],
        ["--horizon-s", "1e-300"],
        ["--requests-per-s", "1e-9", "--requests", "64"],
        ["--requests-per-s", "1e30", "--requests", "64"],
        ["--trace", "azure-conv-2023", "--replay", "scaled", "--requests-per-s", "1e-9"],
        ["--trace", "azure-conv-2023", "--horizon-s", "1e7"],
        ["--seed", "-1"],
        ["--seed", "99999999999999999999999999"],
    ],
)
def test_simulate_runaway_inputs_end_quickly(extra: list[str], files: dict[str, Path]) -> None:
    """Tiny rates, huge horizons and timestamps: refused (or answered) within the time limit."""
    check(run(["simulate", str(CHAT), *extra]))


@pytest.mark.parametrize(
    "trace",
    ["trace-nan", "trace-huge-time", "trace-huge-tokens", "trace-negative", "trace-one", "trace-same-instant",
     "trace-header", "trace-nul", "trace-big-field", "garbage1", "dir", "missing"],
)  # fmt: skip
def test_simulate_hostile_traces(trace: str, files: dict[str, Path]) -> None:
    o = run(["simulate", str(CHAT), "--trace", str(files[trace]), "--requests", "64"])
    check(o)
    if o.rc == 2:
        assert "horizon" not in o.err, "a trace problem must not blame --horizon-s, which was not given"


def test_plan(files: dict[str, Path], tmp_path: Path) -> None:
    @fuzz_settings(6)
    @given(
        yaml_file(files, tmp_path, "plan"),
        st.sampled_from([[], ["--time-limit-s", "nan"], ["--workers", "-1"]]),
    )
    def fuzz(path: str, extra: list[str]) -> None:
        check(run(["plan", path, "--time-limit-s", "5", *extra]))

    fuzz()


# --- calibrate, catalog --------------------------------------------------------------------------

ROWS = json.loads(MEASUREMENTS.read_text())["rows"]


@st.composite
def measurements_file(draw: st.DrawFn, files: dict[str, Path], tmp: Path) -> str:
    if draw(st.integers(0, 4)) == 0:
        return str(files[draw(st.sampled_from(sorted(files)))])
    rows = copy.deepcopy(ROWS)
    i = draw(st.integers(0, len(rows) - 1))
    keys = sorted(rows[i])
    rows[i][draw(st.sampled_from(keys))] = draw(hostile_value())
    p = tmp / "steps.json"
    p.write_text(json.dumps({"about": "fuzz", "rows": rows}))
    return str(p)


def test_calibrate(files: dict[str, Path], tmp_path: Path) -> None:
    @fuzz_settings(10)
    @given(
        measurements_file(files, tmp_path),
        st.dictionaries(st.sampled_from(["--model", "--gpu", "--name", "--fix"]), hostile_text(), max_size=1),
    )
    def fuzz(path: str, bad: dict[str, str]) -> None:
        args = {"--model": "Qwen/Qwen3-8B", "--gpu": "h200-sxm", **bad}
        argv = ["calibrate", path, *[x for kv in args.items() for x in kv], "-o", str(tmp_path / "p.json")]
        check(run(argv))

    fuzz()


def test_catalog(files: dict[str, Path]) -> None:
    @fuzz_settings(8)
    @given(st.sampled_from(["gpus", "models"]), st.lists(hostile_text(), max_size=2), st.booleans())
    def fuzz(what: str, junk: list[str], as_json: bool) -> None:
        check(run(["catalog", what, *junk, *(["--json"] if as_json else [])]))

    fuzz()
    for what in ("gpus", "models"):
        o = run(["catalog", what, "--json"])
        check(o)
        assert o.rc == 0


def test_top_level_garbage_argv() -> None:
    @fuzz_settings(10)
    @given(st.lists(hostile_text(), min_size=0, max_size=3))
    def fuzz(argv: list[str]) -> None:
        check(run(argv))

    fuzz()


# --- every file argument takes every garbage file -------------------------------------------------

FILE_ARGS: dict[str, list[str]] = {
    "evaluate": ["evaluate", "{}"],
    "simulate": ["simulate", "{}", "--requests", "16"],
    "plan": ["plan", "{}", "--time-limit-s", "5"],
    "simulate --trace": ["simulate", str(CHAT), "--trace", "{}", "--requests", "16"],
    "simulate --profile": ["simulate", str(CHAT), "--profile", "{}", "--requests", "16"],
    "analyze --model": ["analyze", "prefill", "--model", "{}", "--gpu", "h100-sxm", "--prompt-tokens", "64"],
    "analyze --profile": ["analyze", "prefill", "--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--profile", "{}", "--prompt-tokens", "64"],
    "calibrate": ["calibrate", "{}", "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm"],
}  # fmt: skip


GARBAGE_NAMES = [f"garbage{i}" for i in range(len(GARBAGE_FILES))] + [
    "dir",
    "missing",
    "long-name",
    "nul-name",
]
GARBAGE_NAMES += ["trace-nan", "trace-huge-time", "trace-huge-tokens", "trace-nul", "trace-big-field"]
# Contract breaks found by this test in code other helpers own, each with its owner; strict, so
# the fix turns the case red until its mark goes. ("owner: file function: what breaks")
KNOWN: dict[tuple[str, str], str] = {}


def _cases() -> list[Any]:
    out = []
    for arg in sorted(FILE_ARGS):
        for name in GARBAGE_NAMES:
            why = KNOWN.get((arg, name))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(arg, name, marks=marks, id=f"{arg}-{name}"))
    return out


@pytest.mark.parametrize(("arg", "name"), _cases())
def test_every_file_argument_takes_garbage(arg: str, name: str, files: dict[str, Path]) -> None:
    # a NUL byte in a name (a caller's argv in-process; found by the exploration mode: the
    # profile, measurements and request-file readers raised ValueError)
    path = "9" * 5000 if name == "long-name" else "nul\x00name" if name == "nul-name" else str(files[name])
    check(run([x.replace("{}", path) for x in FILE_ARGS[arg]]))


# Once contract breaks (strict xfails above until fixed): each now names its field in one line.
REFUSALS = [
    ("simulate --profile", "long-name", "--profile: no such profile file"),  # no file can have that name
    ("simulate --trace", "long-name", "--trace: "),
    ("calibrate", "garbage2", "MEASUREMENTS: garbage2.yaml: nesting too deep"),
    ("analyze --profile", "garbage2", "garbage2.yaml: nesting too deep"),
    ("simulate --profile", "garbage2", "garbage2.yaml: nesting too deep"),
]


@pytest.mark.parametrize(("arg", "name", "says"), REFUSALS, ids=[f"{a}-{n}" for a, n, _ in REFUSALS])
def test_refusals_name_the_field(arg: str, name: str, says: str, files: dict[str, Path]) -> None:
    path = "9" * 5000 if name == "long-name" else str(files[name])
    o = run([x.replace("{}", path) for x in FILE_ARGS[arg]])
    check(o)
    assert o.rc == 2 and says in o.err and o.err.count("\n") == 1, o.err[:300]
    if "--profile" in arg:
        assert "--profile" in o.err
