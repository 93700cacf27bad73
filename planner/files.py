"""Bounded reads of the files a user names: request YAML, profiles, traces, calibration data,
model config.json, TLS material.

A path a caller gives may name anything: `/dev/zero` never ends, `/dev/urandom` never ends
either, a FIFO blocks the reader until some writer comes, a directory cannot be read, a 50 GiB
file is not a request. So a file is read only when it is a regular file (checked by name before
opening, and again on the open descriptor: the name may be swapped in between) of at most its
kind's limit, and at most limit + 1 bytes are read (a file growing meanwhile is refused, not
read to its end). The open uses O_NONBLOCK, so a FIFO put in place between the check and the
open cannot block it either. Every failure is an `InvalidInput` naming the field or flag the
path came from, in one line.

The limits (docs/plan.md, "Files"), each far above any real file of its kind:

    request YAML/JSON       4 MiB, and 1,000,000 values once YAML aliases are expanded
    profile JSON            8 MiB
    model config.json       1 MiB
    trace CSV              64 MiB (and 1,000,000 requests: planner.traces.MAX_TRACE_REQUESTS)
    calibration data       16 MiB (and 100,000 rows: planner.costmodel.fit_data.MAX_ROWS)
    TLS PEM (cert/key/CA)   1 MiB
    history (metrics/logs)   1 GiB (and 25,000,000 rows: planner.history.origin.MAX_HISTORY_ROWS)

Package data read through importlib.resources is ours and is not read through here.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from planner.errors import InvalidInput

__all__ = [
    "CONFIG_JSON",
    "HISTORY",
    "MEASUREMENTS",
    "PEM",
    "PROFILE",
    "REQUEST",
    "TRACE",
    "FileKind",
    "check_output_dir",
    "check_output_file",
    "open_text",
    "read_bytes",
    "read_text",
    "write_error",
]

MIB = 2**20


@dataclass(frozen=True)
class FileKind:
    """What a file is read as (named in errors) and the most bytes such a file may have."""

    what: str
    max_bytes: int


REQUEST = FileKind("request file", 4 * MIB)
PROFILE = FileKind("profile file", 8 * MIB)
CONFIG_JSON = FileKind("config.json", 1 * MIB)
TRACE = FileKind("trace CSV", 64 * MIB)
MEASUREMENTS = FileKind("measurements file", 16 * MIB)
PEM = FileKind("PEM file", 1 * MIB)
# a week of a busy service's request log: Azure's 2024 week-long code trace is ~0.8 GB as CSV
HISTORY = FileKind("history file", 1024 * MIB)


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is, in words (None: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _named(path: str, field: str) -> str:
    """How a reason names the file: not at all when the field is the path itself (a request
    file: `capplan: error: in.yaml: is a FIFO, ...`), else by its path and a space."""
    return "" if path == field else f"{path} "


def _refuse(path: str, st: os.stat_result, kind: FileKind, field: str) -> None:
    other = _not_regular(st.st_mode)
    if other is not None:
        raise InvalidInput(field, f"{_named(path, field)}is {other}, not a regular file")
    if st.st_size > kind.max_bytes:
        raise InvalidInput(
            field,
            f"{_named(path, field)}is {st.st_size:,} bytes; a {kind.what} takes at most {kind.max_bytes:,}",
        )


def _os_reason(exc: OSError | ValueError) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _cannot(path: str, field: str, exc: OSError | ValueError, missing: str | None) -> InvalidInput:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
        return InvalidInput(field, missing or f"no such file: {path}")  # no file can be there
    if isinstance(exc, OSError) and exc.errno == errno.EISDIR:
        return InvalidInput(field, f"{_named(path, field)}is a directory, not a regular file")
    return InvalidInput(field, f"cannot read {path}: {_os_reason(exc)}")


def read_bytes(path: str | Path, field: str, kind: FileKind, missing: str | None = None) -> bytes:
    """The whole of the regular file `path`, at most `kind.max_bytes` (module docstring).
    `missing`: the reason given when there is no such file (default: "no such file: PATH")."""
    name = str(path)
    try:
        st = os.stat(name)
    except (OSError, ValueError) as exc:  # also a NUL byte in the name
        raise _cannot(name, field, exc, missing) from None
    _refuse(name, st, kind, field)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _cannot(name, field, exc, missing) from None
    try:
        _refuse(name, os.fstat(fd), kind, field)  # the file opened, not the one checked
        chunks: list[bytes] = []
        left = kind.max_bytes + 1  # one byte more than allowed: a file that grew meanwhile
        while left > 0:
            chunk = os.read(fd, min(left, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _cannot(name, field, exc, missing) from None
    finally:
        os.close(fd)
    if left <= 0:
        raise InvalidInput(
            field,
            f"{_named(name, field)}grew past {kind.max_bytes:,} bytes while read; "
            f"a {kind.what} takes at most that",
        )
    return b"".join(chunks)


def read_text(
    path: str | Path, field: str, kind: FileKind, missing: str | None = None, encoding: str = "utf-8"
) -> str:
    """`read_bytes` decoded (UTF-8 by default; "utf-8-sig" drops a byte-order mark)."""
    data = read_bytes(path, field, kind, missing)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            field, f"{_named(str(path), field)}is not UTF-8 text: {exc.reason} at byte {exc.start:,}"
        ) from None


def open_text(
    path: str | Path, field: str, kind: FileKind, missing: str | None = None, encoding: str = "utf-8"
) -> io.TextIOWrapper:
    """`read_bytes` as a text stream with newlines untranslated (what the csv module wants),
    decoded as it is read: no second copy of a large file. A decoding error is raised by the
    reads, as UnicodeDecodeError."""
    return io.TextIOWrapper(io.BytesIO(read_bytes(path, field, kind, missing)), encoding=encoding, newline="")


# --- outputs -------------------------------------------------------------------------------------


def _nearest_existing(p: Path) -> Path:
    """`p` or its nearest ancestor that exists (the folder a mkdir -p would start in)."""
    for candidate in (p, *p.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def _writable_dir(d: Path, field: str, target: Path) -> None:
    """`d`, the folder `target` goes in, exists as a folder this process may write in."""
    if not d.is_dir():
        other = _not_regular(d.stat().st_mode) or "a file"
        raise InvalidInput(field, f"cannot write {target}: {d} is {other}, not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InvalidInput(field, f"cannot write {target}: {d} is not writable (permission denied)")


def check_output_dir(path: str | Path, field: str) -> Path:
    """`path` as a folder that files can be written into (created with its parents if absent),
    checked before any work is done: an existing non-folder, a parent that is a file, or a folder
    this process may not write in is an InvalidInput naming `field`. Nothing is created here."""
    p = Path(path)
    try:
        if p.exists() and not p.is_dir():
            other = _not_regular(p.stat().st_mode) or "a file"
            raise InvalidInput(field, f"{p} is {other}, not a directory")
        _writable_dir(_nearest_existing(p), field, p)
    except InvalidInput:
        raise
    except (OSError, ValueError) as exc:
        raise InvalidInput(field, f"cannot write to {p}: {_os_reason(exc)}") from None
    return p


def check_output_file(path: str | Path, field: str) -> Path:
    """`path` as a file that can be written (created or replaced), checked before any work: an
    existing directory, FIFO or socket (a FIFO would block the write), a missing parent folder or
    one this process may not write in is an InvalidInput naming `field`. A character device
    (/dev/null, /dev/stdout) is taken; a failed write to it is the writer's error."""
    p = Path(path)
    try:
        if p.exists():
            mode = p.stat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
                raise InvalidInput(field, f"{p} is {_not_regular(mode)}, not a regular file")
            if not os.access(p, os.W_OK):
                raise InvalidInput(field, f"cannot write {p}: permission denied")
            return p
        parent = p.parent
        if not parent.exists():
            raise InvalidInput(field, f"cannot write {p}: no such directory {parent}")
        _writable_dir(parent, field, p)
    except InvalidInput:
        raise
    except (OSError, ValueError) as exc:
        raise InvalidInput(field, f"cannot write {p}: {_os_reason(exc)}") from None
    return p


def write_error(path: str | Path, field: str, exc: OSError) -> InvalidInput:
    """A write that failed after the checks (a full disk, /dev/full, a file removed meanwhile),
    as one line naming `field`."""
    where = exc.filename or path
    return InvalidInput(field, f"cannot write {where}: {_os_reason(exc)}")
