"""`capplan serve --log-format json` writes nothing but JSON lines to stderr: what gRPC's C core
(and Python, and the worker processes) write to file descriptor 2 is routed into the structured
log (planner/server/observability.py, route_native_stderr), GRPC_VERBOSITY defaults to ERROR,
and closing the routing leaves no thread and no file descriptor behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from planner.server.observability import (
    NATIVE_KEEP_BYTES,
    NATIVE_LINE_CHARS,
    LineSplitter,
    native_line_event,
)

# Lines gRPC 1.85 wrote to stderr here, measured: `capplan serve --port P` with P taken, and
# GRPC_VERBOSITY=debug at start.
BIND_LINE = (
    b"E1205 01:22:16.507703    1555 add_port.cc:83] Failed to add port to server: No address added"
    b" out of total 1 resolved for '127.0.0.1:60181' (Error in bind for address"
    b" '[::ffff:127.0.0.1]:60181': Address already in use)"
)
DEBUG_LINE = b"W1205 01:23:07.026101    1846 log.cc:110] Log level DEBUG is not suitable for production."
# absl's prefix before it is initialised: date 0000, time in seconds since the epoch (issue #33).
EARLY_LINE = b"E0000 00:00:1733359336.590133    1234 chttp2_server.cc:1045] No address added out of total 1"


def test_lines_are_split_in_bounded_memory() -> None:
    lines = LineSplitter(keep_bytes=8)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"c\nde\n\nf") == [(b"abc", 3), (b"de", 2), (b"", 0)]
    assert lines.feed(b"g" * 1_000_000) == []  # one never-ending line: 8 bytes kept, the rest counted
    assert len(lines._head) == 8
    assert lines.feed(b"h\nrest") == [(b"f" + b"g" * 7, 1_000_002)]
    assert lines.end() == [(b"rest", 4)]
    assert lines.end() == []


def test_grpc_lines_keep_their_severity_and_source() -> None:
    assert native_line_event(BIND_LINE, len(BIND_LINE)) == (
        "error",
        "grpc_core",
        {"source": "add_port.cc:83", "text": BIND_LINE.decode().split("] ", 1)[1]},
    )
    assert native_line_event(DEBUG_LINE, len(DEBUG_LINE))[:2] == ("warning", "grpc_core")
    early = native_line_event(EARLY_LINE, len(EARLY_LINE))
    assert early == (
        "error",
        "grpc_core",
        {"source": "chttp2_server.cc:1045", "text": "No address added out of total 1"},
    )
    for severity, level in {"I": "info", "D": "debug", "F": "critical"}.items():
        line = severity.encode() + DEBUG_LINE[1:]
        assert native_line_event(line, len(line))[0] == level


def test_other_lines_are_stderr_events_cut_to_their_bound() -> None:
    assert native_line_event(b"  \r", 3) is None
    assert native_line_event(b"UserWarning: careful\r", 21) == (
        "warning",
        "stderr",
        {"text": "UserWarning: careful"},
    )
    cli = b"capplan: error: address: cannot listen on 127.0.0.1:1"
    assert native_line_event(cli, len(cli))[0] == "error"
    long = "é" * 5_000  # 10,000 bytes: more than a line keeps
    head = long.encode()[:NATIVE_KEEP_BYTES]
    _, _, fields = native_line_event(head, 10_000)
    assert len(fields["text"]) == NATIVE_LINE_CHARS and fields["text"].endswith("… (10,000 bytes)")
    kept = b"x" * 1_500  # whole, but over the text bound: cut with its length in characters
    _, _, fields = native_line_event(kept, len(kept))
    assert len(fields["text"]) == NATIVE_LINE_CHARS and fields["text"].endswith("… (1,500 chars)")


# In a process of its own: fd 2 and structlog are process-wide.
ROUTED = textwrap.dedent(
    """
    import os, subprocess, sys, threading, warnings
    from planner.server.observability import configure_logging, logger, route_native_stderr

    configure_logging(True)
    fds, threads = sorted(os.listdir("/proc/self/fd")), threading.active_count()
    routed = route_native_stderr()
    assert route_native_stderr() is routed
    logger().info("direct", n=1)
    sys.stderr.write("python line\\n")
    warnings.warn("careful")
    t = threading.Thread(target=lambda: 1 / 0)
    t.start(); t.join()
    os.write(2, b"g" * 1_000_000 + b"\\n")
    os.write(2, BIND_LINE + b"\\n")
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child line\\\\n')"], check=True)
    os.write(2, b"no newline")
    routed.close()
    routed.close()
    assert threading.active_count() == threads, threading.enumerate()
    assert sorted(os.listdir("/proc/self/fd")) == fds
    logger().info("after")
    os.write(2, b"plain after close\\n")
    """
).replace("BIND_LINE", repr(BIND_LINE))


def _json_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines()]


def test_fd_2_becomes_log_lines_until_closed() -> None:
    proc = subprocess.run([sys.executable, "-c", ROUTED], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    *routed, plain = proc.stderr.splitlines()
    assert plain == "plain after close"  # fd 2 restored
    entries = _json_lines("\n".join(routed))
    events = [(e["event"], e["level"], e.get("text", "")) for e in entries]
    assert ("direct", "info", "") in events  # structlog writes to the real stderr: no loop, no wrapping
    assert ("stderr", "warning", "python line") in events
    assert any(t.endswith("UserWarning: careful") for _, _, t in events)
    assert ("stderr", "warning", "ZeroDivisionError: division by zero") in events  # a thread's traceback
    assert any(
        ev == "stderr" and t.endswith("… (1,000,000 bytes)") and len(t) == NATIVE_LINE_CHARS
        for ev, _, t in events
    )
    assert ("grpc_core", "error", BIND_LINE.decode().split("] ", 1)[1]) in events
    assert ("stderr", "warning", "child line") in events  # a child process inherits the pipe
    assert events[-2:] == [("stderr", "warning", "no newline"), ("after", "info", "")]  # drained at close


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _serve(port: int, fmt: str, **env: str) -> list[str]:
    cmd = [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1", "--log-format", fmt]  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")} | env
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=environ)
    assert proc.returncode == 2, proc.stderr  # bad input: the address
    return proc.stderr.splitlines()


def test_a_taken_port_is_json_lines_only(taken_port: int) -> None:
    """The address is checked before gRPC binds (planner/server/listen.py), so the one line is
    the CLI's, as JSON; GRPC_TRACE=api under gRPC's own default verbosity printed 31 trace lines
    here, the ERROR default keeps them out."""
    entries = _json_lines("\n".join(_serve(taken_port, "json", GRPC_TRACE="api")))
    assert [(e["event"], e["level"]) for e in entries] == [("stderr", "error")]
    assert entries[0]["text"] == f"capplan: error: --port: {taken_port} is in use on 127.0.0.1"


def test_a_terminal_format_keeps_plain_stderr(taken_port: int) -> None:
    assert _serve(taken_port, "console") == [f"capplan: error: --port: {taken_port} is in use on 127.0.0.1"]


def test_a_drained_server_exits_with_json_lines_only() -> None:
    cmd = [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "1",
           "--grace-s", "1", "--log-format", "json"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=os.environ | {"GRPC_VERBOSITY": "debug"})  # fmt: skip
    try:
        assert proc.stderr is not None
        first = [proc.stderr.readline() for _ in range(2)]  # gRPC's debug warning, then "serving"
        assert json.loads(first[1])["event"] == "serving", first
        # At once after "serving": a handler that logged could interrupt the main thread inside
        # that write and wait on its lock forever (1 run in ~5 did, before serve() polled).
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()  # to EOF: the server has exited (its forkserver holds the inner pipe)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    entries = _json_lines("".join(first) + rest)
    assert (entries[0]["event"], entries[0]["level"]) == ("grpc_core", "warning")
    assert entries[-1]["event"] == "stopped"
