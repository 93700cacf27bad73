"""Where a history comes from (the caller's field, the file, the format) and the formats'
names: what every reader's errors say (planner.history.reader's docstring)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InvalidInput

MAX_HISTORY_ROWS = 10_000_000  # a week at ~16 requests/s; a row costs ~1 µs-10 µs to parse

# name -> what the format is, in words (named in every error about a file read as it)
FORMATS: dict[str, str] = {
    "csv": "plain CSV timestamp,requests_per_s",
}


@dataclass(frozen=True)
class Source:
    """Where a history comes from: the caller's field, the file and the format, for errors."""

    field: str
    path: str
    format: str

    @property
    def name(self) -> str:
        return f"{self.path} ({FORMATS[self.format]})"

    def error(self, at: str, reason: str) -> InvalidInput:
        """An error at `at` (":line 7.requests_per_s", ".series[2]", "" for the file) naming the
        file and its format."""
        return InvalidInput(f"{self.field}{at}", f"{self.name}: {reason}")
