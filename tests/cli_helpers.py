"""Shared by the CLI tests: run `capplan` in-process and capture what a user would see."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse usage errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def write(tmp_path: Path, text: str, name: str = "in.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p
