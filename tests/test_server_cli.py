"""`capplan plan FILE --server HOST:PORT` prints byte for byte what the local run prints: the
readable summary, `--json`, and the error line for a bad field. A trace CSV beside the file is
read by the CLI (the service reads no files) and gives the same plan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_cli, write
from grpc_helpers import CHAT_PLAN, quiet_server


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with quiet_server() as addr:  # the server shares this process: its logs stay out of the output
        yield addr


def _both(
    argv: list[str], address: str, capsys: pytest.CaptureFixture[str]
) -> tuple[tuple[int, str, str], ...]:
    local = run_cli(argv, capsys)
    remote = run_cli([*argv, "--server", address], capsys)
    return local, remote


@pytest.mark.parametrize("extra", [[], ["--json"], ["--json", "--slo-ttft-p99-ms", "800"]])
def test_remote_plan_prints_the_local_bytes(
    tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    path = write(tmp_path, yaml.safe_dump(CHAT_PLAN))
    local, remote = _both(["plan", str(path), "--workers", "1", *extra], address, capsys)
    assert local[0] == 0 and local[1]
    assert remote == local


def test_remote_plan_errors_print_the_local_line(
    tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, yaml.safe_dump(CHAT_PLAN))
    local, remote = _both(["plan", str(path), "--slo-itl-p99-ms", "-4"], address, capsys)
    assert local[0] == 2 and "--slo-itl-p99-ms" in local[2]
    assert remote == local
    # a field only the domain refuses (pydantic takes it): the server's answer, named the same way
    bad = {**CHAT_PLAN, "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [3]}}
    path = write(tmp_path, yaml.safe_dump(bad), "bad.yaml")
    local, remote = _both(["plan", str(path), "--workers", "1"], address, capsys)
    assert remote == local


def test_a_trace_csv_beside_the_file_is_read_by_the_cli(
    tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [
        f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.000,{300 + 37 * (i % 11)},{40 + 13 * (i % 7)}"
        for i in range(240)
    ]
    (tmp_path / "mine.csv").write_text("\n".join(rows) + "\n")
    data = {**CHAT_PLAN, "workload": {"trace": "mine.csv", "bucket_s": 60}}
    path = write(tmp_path, yaml.safe_dump(data))
    local, remote = _both(["plan", str(path), "--workers", "1", "--json"], address, capsys)
    assert local[0] == 0, local[2]
    assert remote == local


def test_an_unreachable_server_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, yaml.safe_dump(CHAT_PLAN))
    rc, out, err = run_cli(["plan", str(path), "--server", "127.0.0.1:1"], capsys)
    assert (rc, out) == (1, "")
    assert err.startswith("capplan: error: UNAVAILABLE:") and err.count("\n") == 1
