"""Hardware profiles: how far a real serving stack falls short of the roofline.

A profile describes a GPU and serving stack, not one model: efficiencies divide the datasheet
bandwidth and FLOP rates, a fixed per-step overhead covers launches, scheduling and sampling,
`prefix_query_kv_passes` charges chunked prefill for re-reading the prefix KV, and the later
fields refine the matmul rate, the vocabulary and the kernels between the GEMMs (see
docs/calibration.md). `theoretical` (all 1, no overhead, no re-reads) reproduces the seed
article's numbers exactly; every field added since defaults to the theoretical value.

This module is a leaf (the profile and its file format); which profile a name means is the
registry's business (planner.costmodel.profiles), fitting one is planner.costmodel.fitting's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InvalidInput, echo

# The endpoint kinds a workload names (`workload.endpoint`): vLLM's OpenAI-compatible routes.
Endpoint = Literal["chat", "completions"]
ENDPOINTS: tuple[str, ...] = ("chat", "completions")


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1)
    gpu: str | None = None  # None: applies to any GPU (theoretical)
    eta_bandwidth: float = Field(default=1.0, gt=0, le=1)
    eta_matmul: float = Field(default=1.0, gt=0, le=1)
    eta_attention: float = Field(default=1.0, gt=0, le=1)
    step_overhead_s: float = Field(default=0.0, ge=0, le=1)
    # Extra passes over each prefill chunk's prefix KV per step, at the achieved bandwidth and
    # not hidden under the step's compute (0 = the roofline's single, overlapped read). Charged on
    # the KV bytes: profiles written before `prefix_query_kv_passes` (which replaces it in fits).
    prefix_kv_passes: float = Field(default=0.0, ge=0, le=1000)
    # The same re-read charged per query head: passes over the prefix KV as the query heads read
    # it (KV bytes x query heads / KV heads), so it grows with the GQA group. A file's
    # prefix_kv_passes P fitted on a model of group g is prefix_query_kv_passes P / g there.
    prefix_query_kv_passes: float = Field(default=0.0, ge=0, le=1000)
    # Work items (sequence x KV head on a GPU) per SM the decode attention kernel needs to read
    # the decodes' KV at full bandwidth; with fewer it reads at bandwidth x n heads / (SMs x this)
    # (0 = off: the KV read at full bandwidth whatever the batch).
    decode_attention_items_per_sm: float = Field(default=0.0, ge=0, le=64)
    # Small GEMMs run below peak: the linear layers' matmul rate at M tokens is
    # eta_matmul x M / (M + m0), i.e. a step is charged m0 more tokens of linear FLOPs
    # (0 = one rate at every size).
    matmul_phantom_tokens: float = Field(default=0.0, ge=0, le=4096)
    # vLLM's accounting of the vocabulary: logits only for sampled rows (one per decode; a
    # prompt's last token, ~2 V d FLOPs, is left out) and the input embedding a gather of the
    # step's rows, not a weight read (unless tied to the lm_head, which reads it anyway).
    # False = the seed's: every token through the lm_head, the whole table read every step.
    sampled_logits: bool = False
    # Passes over each token's hidden state (bf16, all layers) by the kernels between the GEMMs:
    # norms, residual adds, rotary, activations. Memory-bound, not overlapped with the GEMMs, and
    # not split by TP (vLLM runs the norms on the whole hidden state on every GPU). 0 = none.
    activation_passes: float = Field(default=0.0, ge=0, le=1000)
    # Per request, not per step: what vLLM's front end adds to the time to first token (and so
    # to the end-to-end latency) outside the engine's steps: HTTP, chat template, tokenizing,
    # handing the request to the engine core and streaming the first token back. A constant
    # latency: it moves no step and no other request (0 = the engine's steps alone).
    request_overhead_s: float = Field(default=0.0, ge=0, le=10)
    # The same front-end cost on `/v1/completions` (no chat template, no message parsing): a
    # workload's `endpoint: completions` selects it (`for_endpoint`). None = the chat endpoint's
    # `request_overhead_s` (one front end for both, as before the field); 0 .. 10 s.
    completions_overhead_s: float | None = Field(default=None, ge=0, le=10)
    # Per sequence in a step, on top of the step's fixed `step_overhead_s`: what vLLM spends on
    # each running request every step outside the GPU's kernels (scheduling it, preparing its
    # input rows, sampling, detokenizing and streaming its token). Charged per decode in the
    # step (n x this), added outside the roofline max like the all-reduce; a prefill chunk is
    # not counted (the formula sees chunks only as sums, and a step carries a handful of chunks
    # beside up to hundreds of decodes: the per-step cost covers them). 0 .. 10 ms; 0 = off.
    sequence_overhead_s: float = Field(default=0.0, ge=0, le=0.01)
    source: str = ""
    # Set when the profile stands in for a missing one (transferred from another GPU): callers
    # show it beside every number the profile produced.
    warning: str | None = None

    def front_end_s(self, endpoint: Endpoint = "chat") -> float:
        """The front end's per-request seconds on `endpoint` (chat: /v1/chat/completions,
        completions: /v1/completions)."""
        if endpoint == "completions" and self.completions_overhead_s is not None:
            return self.completions_overhead_s
        return self.request_overhead_s

    def for_endpoint(self, endpoint: Endpoint = "chat") -> Profile:
        """This profile with `request_overhead_s` the front end of `endpoint`: what every
        consumer of the profile (latency model, simulator, plan) then adds per request."""
        front_s = self.front_end_s(endpoint)
        if front_s == self.request_overhead_s:
            return self
        return self.model_copy(update={"request_overhead_s": front_s})


THEORETICAL = Profile(
    name="theoretical",
    source="Roofline bound: datasheet bandwidth and dense FLOP/s at 100%, no per-step overhead.",
)

BUILTIN_NAMES = ("theoretical", "calibrated", "auto")  # the names planner.costmodel.profiles resolves

# What a profile file must spell out: every number, so a truncated or hand-mangled file is refused
# rather than silently filled with theoretical defaults. `source` and `warning` are optional prose;
# the fields added later default to what a file without them meant before (0 / False).
OPTIONAL_FILE_FIELDS = (
    "source",
    "warning",
    "decode_attention_items_per_sm",
    "prefix_query_kv_passes",
    "matmul_phantom_tokens",
    "sampled_logits",
    "activation_passes",
    "request_overhead_s",
    "completions_overhead_s",
    "sequence_overhead_s",
)
REQUIRED_FILE_FIELDS = tuple(k for k in Profile.model_fields if k not in OPTIONAL_FILE_FIELDS)


def profile_from_data(data: Any, what: str, field: str = "profile") -> Profile:
    """Validate parsed JSON as a complete profile; errors name `what` (a path) and the key."""
    if not isinstance(data, dict):
        raise InvalidInput(field, f"profile {what}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED_FILE_FIELDS if k not in data]
    if missing:
        raise InvalidInput(field, f"profile {what}: missing field(s) {', '.join(missing)}")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise InvalidInput(field, f"profile {what}: {loc}: {err['msg']}") from None


def load_profile_file(path: str | Path, field: str = "profile") -> Profile:
    """A profile JSON file, read within planner.files.PROFILE's bounds (a regular file of at most
    8 MiB: not /dev/zero, a FIFO or a directory)."""
    from planner.files import PROFILE, read_text

    missing = f"no such profile file: {echo(str(path))} (or use one of {', '.join(BUILTIN_NAMES)})"
    text = read_text(path, field, PROFILE, missing)
    try:
        data: Any = json.loads(text)
    except ValueError as exc:  # bad JSON
        raise InvalidInput(field, f"cannot read profile {echo(str(path))}: {exc}") from None
    except RecursionError:  # json.loads recurses once per level of [ or {
        raise InvalidInput(field, f"profile {path}: nesting too deep") from None
    return profile_from_data(data, str(path), field)


def profile_to_json(profile: Profile) -> str:
    """The file format `load_profile_file` reads back: every field (a warning only when set),
    floats at full precision."""
    data = profile.model_dump()
    for key in ("warning", "completions_overhead_s"):  # None: not set, left out
        if data[key] is None:
            del data[key]
    return json.dumps(data, indent=2) + "\n"


def save_profile_file(profile: Profile, path: str | Path, field: str = "output") -> None:
    try:
        Path(path).write_text(profile_to_json(profile))
    except OSError as exc:
        raise InvalidInput(field, f"cannot write profile {path}: {exc.strerror or exc}") from None
