"""Bounded reads (planner/files.py) at every place the product opens a file a user names, and the
YAML request loader (planner/yamlfile.py): FIFOs, devices and directories are refused by kind
without blocking or reading, oversized files by their size before a byte is read, YAML past its
value limit before it is composed, a key given twice with both lines."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_cli, write

from planner import files
from planner.catalog.models import get_model
from planner.costmodel.fit_data import MAX_ROWS, load_measurements
from planner.costmodel.profile import load_profile_file
from planner.errors import InvalidInput
from planner.files import read_bytes
from planner.traces import load_trace
from planner.yamlfile import MAX_YAML_NODES, count_values, load_yaml_text, read_mapping_file

# Each reader of a user's file, with the kind it reads as and the field its errors name.
READERS: list[tuple[str, Callable[[str], Any], files.FileKind, str]] = [
    ("request", read_mapping_file, files.REQUEST, "PATH"),
    ("profile", lambda p: load_profile_file(p, "profile"), files.PROFILE, "profile"),
    ("trace", lambda p: load_trace(p, field="workload.trace"), files.TRACE, "workload.trace"),
    ("measurements", lambda p: load_measurements(p, "MEASUREMENTS"), files.MEASUREMENTS, "MEASUREMENTS"),
    ("config.json", lambda p: get_model(p, "model"), files.CONFIG_JSON, "model"),
]


def _field(field: str, path: Path | str) -> str:
    return str(path) if field == "PATH" else field


def _refused(reader: Callable[[str], Any], path: Path | str, timeout_s: float = 10.0) -> InvalidInput:
    """The reader's error, from a thread: a reader that blocks fails the test instead of hanging it."""
    out: list[BaseException] = []

    def run() -> None:
        try:
            reader(str(path))
        except BaseException as exc:  # handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    assert not t.is_alive(), f"reading {path} blocked"
    assert out and isinstance(out[0], InvalidInput), out
    return out[0]


@pytest.mark.parametrize(("name", "reader", "kind", "field"), READERS, ids=[r[0] for r in READERS])
def test_a_fifo_is_refused_by_kind_without_blocking(
    name: str, reader: Callable[[str], Any], kind: files.FileKind, field: str, tmp_path: Path
) -> None:
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)  # no writer: an open without O_NONBLOCK, or a read, would wait forever
    e = _refused(reader, fifo)
    assert e.field == _field(field, fifo)
    assert e.reason.endswith("is a FIFO, not a regular file"), e.reason


@pytest.mark.parametrize(("name", "reader", "kind", "field"), READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize(
    ("device", "what"), [("/dev/zero", "a character device"), ("/dev/urandom", "a character device")]
)
def test_endless_devices_are_refused_before_a_read(
    name: str, reader: Callable[[str], Any], kind: files.FileKind, field: str, device: str, what: str
) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    e = _refused(reader, device)
    assert e.field == _field(field, device) and f"is {what}, not a regular file" in e.reason, e


@pytest.mark.parametrize(("name", "reader", "kind", "field"), READERS, ids=[r[0] for r in READERS])
def test_a_directory_is_refused(
    name: str, reader: Callable[[str], Any], kind: files.FileKind, field: str, tmp_path: Path
) -> None:
    d = tmp_path / "x.json"
    d.mkdir()
    e = _refused(reader, d)
    assert e.field == _field(field, d) and e.reason.endswith("is a directory, not a regular file"), e


@pytest.mark.parametrize(("name", "reader", "kind", "field"), READERS, ids=[r[0] for r in READERS])
def test_a_file_over_its_kinds_limit_is_refused_by_size(
    name: str, reader: Callable[[str], Any], kind: files.FileKind, field: str, tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(kind.max_bytes + 1)  # sparse: nothing is written, and nothing may be read
    e = _refused(reader, big)
    assert e.field == _field(field, big)
    assert f"is {kind.max_bytes + 1:,} bytes; a {kind.what} takes at most {kind.max_bytes:,}" in e.reason, e


def test_the_limits_are_the_documented_ones() -> None:
    """docs/plan.md, "Files", states each limit; this pins the table to the code."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "plan.md").read_text()
    for kind in (files.REQUEST, files.PROFILE, files.CONFIG_JSON, files.TRACE, files.MEASUREMENTS, files.PEM):
        mib = kind.max_bytes // files.MIB
        assert f"| {kind.what} | {mib} MiB" in doc, kind
    assert f"{MAX_YAML_NODES:,} values" in doc and f"{MAX_ROWS:,} rows" in doc


def test_a_file_at_its_limit_is_read_whole(tmp_path: Path) -> None:
    kind = files.FileKind("test file", 1000)
    p = tmp_path / "f"
    p.write_bytes(b"x" * 1000)
    assert read_bytes(p, "f", kind) == b"x" * 1000
    p.write_bytes(b"x" * 1001)
    with pytest.raises(InvalidInput, match="is 1,001 bytes; a test file takes at most 1,000"):
        read_bytes(p, "f", kind)


def test_a_file_holding_more_than_its_size_says_is_cut_at_the_limit() -> None:
    """/proc files (and files appended to while read) report one size and hold more: at most
    limit + 1 bytes are read whatever the size said."""
    status = Path("/proc/self/status")
    if not status.is_file() or status.stat().st_size != 0:
        pytest.skip("no /proc file reporting size 0 here")
    with pytest.raises(InvalidInput) as e:
        read_bytes(status, "f", files.FileKind("test file", 6))
    assert str(e.value) == "f: /proc/self/status grew past 6 bytes while read; a test file takes at most that"
    assert read_bytes(status, "f", files.PEM).startswith(b"Name:")


def test_missing_unreadable_and_bad_text_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as e:
        read_bytes(tmp_path / "nope", "--tls-cert", files.PEM)
    assert str(e.value) == f"--tls-cert: no such file: {tmp_path / 'nope'}"
    with pytest.raises(InvalidInput, match="no such file"):
        read_bytes("x" * 5000, "f", files.PEM)  # a name too long: no file can be there
    with pytest.raises(InvalidInput, match="cannot read"):
        read_bytes("a\0b", "f", files.PEM)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: \xff\n")
    with pytest.raises(InvalidInput) as e:
        read_mapping_file(bad)
    assert str(e.value) == f"{bad}: is not UTF-8 text: invalid start byte at byte 3"


# --- YAML --------------------------------------------------------------------------------------


def test_values_are_counted_before_composition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4 MiB list of `1,` (two million values, under the size limit) is refused from the event
    stream: nothing is composed (get_single_node is never reached)."""
    import planner.yamlfile as yf

    p = tmp_path / "ones.yaml"
    n = files.REQUEST.max_bytes // 2 - 1
    p.write_text("[" + "1," * (n - 1) + "1]")
    assert p.stat().st_size <= files.REQUEST.max_bytes

    def no_compose(self: Any) -> Any:
        raise AssertionError("composed")

    monkeypatch.setattr(yf._Loader, "get_single_node", no_compose)
    with pytest.raises(InvalidInput) as e:
        read_mapping_file(p)
    assert e.value.field == str(p) and f"expands to more than {MAX_YAML_NODES:,} values" in e.value.reason


def test_value_count_expands_aliases_and_stops_at_the_limit() -> None:
    # a: 1 sequence + 3 scalars = 4; b: 1 + 3 aliases of a = 13; the mapping 1 + 2 keys + 4 + 13 = 20
    doc = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
    assert count_values(doc) == 20
    assert count_values(doc, limit=10) == 11
    assert count_values("a: &a [*a]\n") == MAX_YAML_NODES + 1  # recursive: endless once expanded
    laughs = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert count_values(laughs) == MAX_YAML_NODES + 1


def test_a_key_given_twice_is_refused_with_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidInput) as e:
        load_yaml_text("slo:\n  ttft_p99_ms: 500\nworkload: {}\nslo:\n  itl_p99_ms: 50\n", "plan.yaml")
    assert str(e.value) == "plan.yaml: key 'slo' is given twice in one mapping (line 1 and line 4)"
    with pytest.raises(InvalidInput, match=r"key 'a' is given twice in one mapping \(line 1 and line 1\)"):
        load_yaml_text('{"a": 1, "b": {"c": 2}, "a": 3}', "x.json")  # JSON is YAML
    with pytest.raises(InvalidInput, match=r"key 'c' is given twice in one mapping \(line 2 and line 3\)"):
        load_yaml_text("b:\n  c: 1\n  c: 2\n", "x")
    # A merge key's values may be overridden by the mapping's own keys: YAML's intent, not a slip.
    assert load_yaml_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n", "x")["d"] == {"x": 1, "y": 3}
    f = write(tmp_path, "model: a\nmodel: b\n")
    rc, out, err = run_cli(["plan", str(f)], capsys)
    assert rc == 2 and out == ""
    assert err == f"capplan: error: {f}: key 'model' is given twice in one mapping (line 1 and line 2)\n"


def test_cli_refuses_a_fifo_request_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    rc, out, err = run_cli(["plan", str(fifo)], capsys)
    assert rc == 2 and out == ""
    assert err == f"capplan: error: {fifo}: is a FIFO, not a regular file\n"


# --- rows --------------------------------------------------------------------------------------


def test_calibration_rows_are_capped(tmp_path: Path) -> None:
    """A million-row CSV (under the byte limit) is refused at row MAX_ROWS + 1, before a row is
    parsed; so is a JSON list of more rows."""
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("kind,tokens,ms\n" + "linear,1,4\n" * (MAX_ROWS + 1))
    with pytest.raises(InvalidInput) as e:
        load_measurements(csv_path, "MEASUREMENTS")
    assert str(e.value) == (
        f"MEASUREMENTS: m.csv:{MAX_ROWS + 2}: more than {MAX_ROWS:,} rows; a measurements file takes at most that"
    )
    json_path = tmp_path / "m.json"
    json_path.write_text(
        '{"rows": [' + ",".join(['{"kind": "linear", "tokens": 1, "ms": 4}'] * (MAX_ROWS + 1)) + "]}"
    )
    with pytest.raises(
        InvalidInput, match=f"{MAX_ROWS + 1:,} rows; a measurements file takes at most {MAX_ROWS:,}"
    ):
        load_measurements(json_path, "MEASUREMENTS")


# --- names of one GPU given twice --------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "a", "b"),
    [
        ("pricing", {"usd_per_gpu_hour": 2.0}, {"usd_per_gpu_hour": 3.0}),
        ("inventory", 4, 8),
    ],
)
def test_case_colliding_gpu_names_are_refused_naming_both(
    key: str, a: Any, b: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pricing: {H100-SXM: ..., h100-sxm: ...}` kept whichever sorted last; both keys are named."""
    import yaml

    from planner.schema.plan_request import parse_plan_request

    plan = yaml.safe_load((Path(__file__).resolve().parents[1] / "examples" / "chat.yaml").read_text())
    with pytest.raises(InvalidInput) as e:
        parse_plan_request({**plan, key: {"h100-sxm": a, "H100-SXM": b}})
    assert str(e.value) == f"{key}: 'H100-SXM' and 'h100-sxm' both name GPU h100-sxm; give it once"
    assert list(getattr(parse_plan_request({**plan, key: {"H100-SXM": b}}), key)) == ["h100-sxm"]
    f = write(tmp_path, yaml.safe_dump({**plan, key: {"h100-sxm": a, "H100-SXM": b}}))
    rc, out, err = run_cli(["plan", str(f)], capsys)
    assert rc == 2 and out == ""
    assert err == f"capplan: error: {key}: 'H100-SXM' and 'h100-sxm' both name GPU h100-sxm; give it once\n"


# --- outputs -----------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("FILE", "FILE is a file, not a directory"),
        ("FILE/sub", "cannot write FILE/sub: FILE is a file, not a directory"),
        ("/dev/full", "/dev/full is a character device, not a directory"),
    ],
)
def test_report_output_is_checked_before_any_work(
    target: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan file does not even exist: the output is refused first, in one line."""
    existing = tmp_path / "exists.txt"
    existing.write_text("")
    target, reason = (x.replace("FILE", str(existing)) for x in (target, reason))
    rc, out, err = run_cli(["report", str(tmp_path / "no-plan.yaml"), "-o", target], capsys)
    assert rc == 2 and out == ""
    assert err == f"capplan: error: --output-dir: {reason}\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_report_output_in_a_read_only_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    rc, out, err = run_cli(["report", str(tmp_path / "no-plan.yaml"), "-o", str(ro / "out")], capsys)
    assert rc == 2 and out == ""
    assert (
        err
        == f"capplan: error: --output-dir: cannot write {ro / 'out'}: {ro} is not writable (permission denied)\n"
    )


def test_report_write_failing_after_the_plan_is_one_line(tmp_path: Path) -> None:
    """A write that fails once the plan is made (here: files capped at 20 kB by RLIMIT_FSIZE, as
    a full disk would) is one line naming -o, not a traceback."""
    import resource
    import subprocess
    import sys

    def cap_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out_dir = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "planner.cli",
        "report",
        "examples/chat.yaml",
        "-o",
        str(out_dir),
        "--workers",
        "1",
    ]
    r = subprocess.run(argv, cwd=ROOT, preexec_fn=cap_file_size, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"capplan: error: --output-dir: cannot write {out_dir}: File too large\n"


def test_calibrate_output_is_checked_first_and_dev_full_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib import resources

    meas = str(resources.files("planner.costmodel") / "data" / "measurements" / "h200_qwen3_8b_shape.json")
    base = ["--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "-o"]
    for target, reason in (
        (str(tmp_path), f"{tmp_path} is a directory, not a regular file"),
        (
            str(tmp_path / "no" / "p.json"),
            f"cannot write {tmp_path / 'no' / 'p.json'}: no such directory {tmp_path / 'no'}",
        ),
    ):
        rc, out, err = run_cli(["calibrate", str(tmp_path / "none.json"), *base, target], capsys)
        assert (rc, out, err) == (2, "", f"capplan: error: --output: {reason}\n")
    rc, out, err = run_cli(["calibrate", meas, *base, "/dev/full"], capsys)
    assert (rc, out, err) == (
        2,
        "",
        "capplan: error: --output: cannot write profile /dev/full: No space left on device\n",
    )


def test_a_trace_fifo_in_a_request_is_named_by_what_it_is(tmp_path: Path) -> None:
    from planner.schema.inputs import resolve_trace

    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    e = _refused(lambda p: resolve_trace(p, "workload.trace"), fifo)
    assert str(e) == f"workload.trace: {fifo} is a FIFO, not a regular file"
