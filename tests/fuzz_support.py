"""Shared by the fuzz tests: hostile values, an in-process `capplan` runner that checks the error
contract, and a memory guard.

The contract (issue 8): whatever the input, `capplan` exits 2 (bad input) or 1 (an answer such
as "infeasible") with exactly one line on stderr, or 0 with a sane answer (strict JSON with
--json, no nan/inf in text); never a traceback, never more than 1 GiB of memory, never more than
20 s."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import resource
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from planner.cli import main

MAX_SECONDS = 20.0
MAX_RSS_GROWTH_BYTES = 2**30

# Text a user may type where a number belongs.
HOSTILE_TEXT = [
    "",
    " ",
    "abc",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e30",
    "-1e30",
    "1e308",
    "1e309",
    "1e-320",
    "-1",
    "0",
    "-0",
    "0.5",
    "1.5",
    "1_000",
    "0x10",
    "\u0661\u0662",  # Arabic-Indic digits: int() accepts them
    "9" * 400,
    "1e",
    "--",
    "\x00",
    "3\n4",
    "1,2,,3",
    "5:",
    ":0.5",
    "100:0.5,300:nan",
    "100:2",
]

# Values a YAML or JSON document may hold where a number, string or mapping belongs.
HOSTILE_VALUES: list[Any] = [
    None,
    True,
    False,
    "abc",
    "",
    float("nan"),
    float("inf"),
    float("-inf"),
    1e30,
    -1e30,
    1e308,
    -1,
    0,
    0.5,
    -0.5,
    10**30,
    2**63,
    [],
    {},
    [None],
    {"a": None},
    "1e30",
    "x" * 5000,
    [[[[[[[[[[]]]]]]]]]],
    list(range(200)),
]

GARBAGE_FILES: list[bytes] = [
    b"",
    b"\x00\xff\xfe\x00garbage",
    b"[" * 20000,
    b"{a: " * 2000,
    b"a: b: c",
    b"- 1\n- 2\n",
    b"null",
    b"42",
    b"deployment: null\nworkload: null\n",
    b"!!python/object/apply:os.system ['true']\n",
    b"\t- tab\n",
    b"a: &a [x, x, x, x, x, x, x, x, x]\n"
    + b"".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n".encode()
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + b"deployment: *i\nworkload: *i\n",  # billion laughs
    b"x" * 3_000_000,  # one 3 MB line
    "ключ: значение\n".encode(),
]


# FUZZ_EXAMPLES multiplies every fuzz test's example count (README "Development").
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1"))


def fuzz_settings(examples: int) -> settings:
    """No "explain" phase: it traces every line, which makes a slow input ten times slower."""
    return settings(
        max_examples=examples * FUZZ_EXAMPLES,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.integers(min_value=-(10**40), max_value=10**40).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=12),
    )


def hostile_value() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(HOSTILE_VALUES),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.text(max_size=8),
    )


@dataclass
class Outcome:
    argv: list[str]
    rc: int | None
    out: str
    err: str
    seconds: float
    crash: str | None


def run(argv: Sequence[str]) -> Outcome:
    """`capplan argv` in this process, stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    crash = None
    rc: int | None
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        except BaseException as exc:  # the contract: nothing escapes
            if isinstance(exc, KeyboardInterrupt):
                raise
            rc = None
            crash = "".join(traceback.format_exception(exc))
    return Outcome(list(argv), rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0, crash)


_FREE_TEXT = ("--name",)  # options whose value is free text the output may echo
_NONFINITE = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _finite(node: Any) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite(v) for v in node)
    return True


def check(o: Outcome) -> None:
    """Assert the contract for one call (the message carries the argv to reproduce it)."""
    where = f"capplan {' '.join(repr(a) if (not a or ' ' in a) else a for a in o.argv)[:600]}"
    assert o.crash is None, f"{where}\nraised:\n{o.crash}"
    assert o.seconds < MAX_SECONDS, f"{where}\ntook {o.seconds:.1f} s"
    assert o.rc in (0, 1, 2, 3), f"{where}\nexit {o.rc}; stderr {o.err[:500]!r}"
    assert "Traceback" not in o.err, f"{where}\n{o.err[:2000]}"
    # Exit 3 (no plan) prints the plan's report like exit 0 does, or (`--emit`, `report`: nothing
    # to emit or draw) says so in one line like an error.
    if o.rc != 0 and not (o.rc == 3 and o.out):
        # One line as a terminal or a log shows it: one newline, at the end (a user's own control
        # characters echoed inside the line, such as a form feed, do not break it).
        one = o.err.count("\n") == 1 and o.err.endswith("\n")
        assert one, f"{where}\nexit {o.rc} with stderr {o.err[:1000]!r}"
        assert o.err.startswith("capplan"), f"{where}\nstderr {o.err[:300]!r}"
        return
    assert o.out.strip(), f"{where}\nexit 0 but nothing printed"
    if "--json" in o.argv:
        try:
            data = json.loads(o.out, parse_constant=_reject_constant)
        except ValueError as exc:
            raise AssertionError(f"{where}\n--json output is not strict JSON: {exc}") from None
        assert _finite(data), f"{where}\nnon-finite number in JSON"
    else:
        out = o.out
        for flag, value in zip(o.argv, o.argv[1:], strict=False):
            if flag in _FREE_TEXT:  # a name the caller chose, echoed: "nan" there is text, not a number
                out = out.replace(value, "")
        m = _NONFINITE.search(out)
        assert m is None, f"{where}\nprints {m.group(0)!r}: {out[max(0, m.start() - 200) : m.end() + 50]!r}"


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def memory_guard(headroom_bytes: int = 4 * 2**30) -> Iterator[None]:
    """Cap this process's address space at its current size plus `headroom_bytes` for the
    duration (Linux): a runaway allocation becomes a MemoryError (a failing example with its
    input) instead of taking the machine down."""
    try:
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = vm + headroom_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
