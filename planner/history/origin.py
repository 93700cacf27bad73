"""Where a history comes from (the caller's field, the file, the format) and the formats'
names: what every reader's errors say (planner.history.reader's docstring)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InvalidInput

# Azure's 2024 week-long code trace has 16,803,695 rows (~0.8 GB): the largest public log we know
MAX_HISTORY_ROWS = 25_000_000

# name -> what the format is, in words (named in every error about a file read as it)
FORMATS: dict[str, str] = {
    "csv": "plain CSV timestamp,requests_per_s",
    "azure": "Azure LLM trace CSV TIMESTAMP,ContextTokens,GeneratedTokens",
    "burstgpt": "BurstGPT CSV Timestamp,...,Request tokens,Response tokens",
    "mooncake": "Mooncake JSONL timestamp,input_length,output_length",
    "otlp": "OTLP JSON llm_request spans",
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
