"""The latency model's constants as one table: each module-level number of planner/latency, what
it holds, its kind, where it comes from and what pins it (docs/latency/parameters.md is this table
rendered by tools/latency_parameters.py).

The values stay where the code reads them (one definition each): an entry names its module and
constant, and `Parameter.value` reads it there. tests/test_latency_parameters.py holds the table
to the code: every numeric module-level constant of planner/latency has exactly one entry, every
entry a constant, every pin a test that exists.

Kinds:
- `modelling`: a choice about how vLLM behaves; changing it changes predictions and their
  accuracy (the source names the doc page and, where measured, the accuracy cells).
- `tolerance`: a numerical accuracy (a cut-off, a root's tolerance, a grid's size); a modelling
  result should not depend on it beyond its own precision.
- `bound`: the most iterations or entries a loop or cache takes; the loop ends before it.

Pins: `golden` when doubling the value (or adding one to a count of 1) makes tests/test_golden.py
fail, i.e. the golden predictions depend on it at 1e-9; `free` when it does not (a bound the loop
never reaches, a cut-off below what any figure reads).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

__all__ = ["GOLDEN_TEST", "PARAMETERS", "Parameter"]

Kind = Literal["modelling", "tolerance", "bound"]
Pin = Literal["golden", "free"]

GOLDEN_TEST = "tests/test_golden.py::test_predictions_equal_the_golden_file"


@dataclass(frozen=True)
class Parameter:
    """One constant: `name` is "module.CONSTANT" within planner.latency."""

    name: str
    kind: Kind
    pinned: Pin
    holds: str
    source: str

    @property
    def value(self) -> float:
        module, constant = self.name.split(".")
        number: float = getattr(importlib.import_module(f"planner.latency.{module}"), constant)
        return number

    @property
    def pinned_by(self) -> str:
        """The test that fails when the value changes, or why none does."""
        return GOLDEN_TEST if self.pinned == "golden" else "none: doubling it moves no golden figure"


def _p(name: str, kind: Kind, pinned: Pin, holds: str, source: str) -> Parameter:
    return Parameter(name=name, kind=kind, pinned=pinned, holds=holds, source=source)


PARAMETERS: tuple[Parameter, ...] = (
    _p(
        "arrivals.GL_NODES",
        "tolerance",
        "golden",
        "Gauss-Legendre nodes of the company-count integrals",
        "docs/latency/bursty.md",
    ),
    _p(
        "arrivals.EXACT_TERMS",
        "tolerance",
        "golden",
        "terms of the company count's series summed exactly before grouping",
        "docs/latency/bursty.md",
    ),
    _p(
        "arrivals.SUM_GROUPS",
        "tolerance",
        "golden",
        "groups the count's series tail is summed in",
        "docs/latency/bursty.md",
    ),
    _p(
        "arrivals.TAIL_SDS",
        "tolerance",
        "free",
        "the count's series stops this many standard deviations past its mean",
        "docs/latency/bursty.md",
    ),
    _p(
        "arrivals.TAIL_LOG",
        "tolerance",
        "golden",
        "terms below e^-TAIL_LOG are dropped (x < 1/2)",
        "docs/latency/bursty.md",
    ),
    _p(
        "arrivals.COMPANY_MIN",
        "tolerance",
        "free",
        "below this chance of any company an arrival has none (near-regular arrivals would overflow the moments)",
        "tests/test_hostile_inputs.py: burstiness 1e6",
    ),
    _p(
        "arrivals.JOIN_PASSES",
        "bound",
        "free",
        "Illinois steps of join_share's fixed point (converges in ~10)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "arrivals.JOIN_HINT_WIDTH",
        "tolerance",
        "free",
        "join_share's first bracket around its hint",
        "docs/latency/steady-state.md",
    ),
    _p(
        "arrivals.JOIN_HINT_WIDENINGS",
        "bound",
        "free",
        "times the bracket widens 16-fold before [0, 1]",
        "docs/latency/steady-state.md",
    ),
    _p(
        "company.COUNT_ATOMS",
        "modelling",
        "golden",
        "a company's prompt count as this many atoms for prompts of alike lengths",
        "docs/latency/steps.md; tools/earn_its_place.md: company count as atoms, 190 -> 181 synthetic cells off",
    ),
    _p(
        "decode_count.DECODE_GAIN_FLOOR",
        "tolerance",
        "free",
        "the count's loop gain never falls below this (Var n stays finite)",
        "docs/latency/decode-count.md",
    ),
    _p(
        "engine.HUGE",
        "bound",
        "golden",
        "stands in for an infinite ratio inside root-finding",
        "docs/latency/stability.md",
    ),
    _p(
        "engine.STATE_CACHE",
        "bound",
        "free",
        "states one engine keeps (a candidate builds ~25)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "ttft.QUEUED_MIN",
        "tolerance",
        "free",
        "below this chance of queueing beyond the next step, TTFT ignores the queue",
        "docs/latency/ttft.md",
    ),
    _p(
        "delay.COUNT_REACH_SDS",
        "tolerance",
        "free",
        "the delay chain's company counts end this many sds (and counts) past the mean",
        "docs/latency/ttft.md",
    ),
    _p(
        "delay.DELAY_CHAIN_NEGLIGIBLE",
        "tolerance",
        "golden",
        "steps under way seen less often are left out of the delay",
        "docs/latency/ttft.md",
    ),
    _p(
        "seats.PEAKEDNESS_FLOOR",
        "tolerance",
        "free",
        "the seat queue's count peakedness is at least this",
        "docs/latency/seats.md",
    ),
    _p(
        "itl.MIXED_NEGLIGIBLE",
        "tolerance",
        "free",
        "below this share of mixed steps p50 and p99 fall on decode-only steps (1 - 0.99)",
        "docs/latency/itl.md",
    ),
    _p(
        "kv_full.KV_FULL_MIN",
        "tolerance",
        "golden",
        "below this chance of finding the KV cache full, TTFT ignores it",
        "docs/latency/kv-full.md",
    ),
    _p(
        "slo_capacity.CAPACITY_PRECISION",
        "tolerance",
        "golden",
        "a capacity is found to this share of itself below the first point that missed",
        "docs/latency/capacity.md",
    ),
    _p(
        "slo_capacity.CAPACITY_XTOL",
        "tolerance",
        "golden",
        "the capacity search's absolute step, relative to the range",
        "docs/latency/capacity.md",
    ),
    _p(
        "slo_capacity.NEAR_ZERO_DECADES",
        "bound",
        "free",
        "decades the capacity search goes on towards 0 below its precision",
        "docs/latency/capacity.md",
    ),
    _p(
        "prefill_queue.TAIL_LEVEL",
        "modelling",
        "golden",
        "the backlog's drain stretch is sized at the wait's p99: P(wait > V) = TAIL_LEVEL",
        "docs/latency/prefill-queue.md; tools/earn_its_place.md: backlog stretch, 190 -> 176 synthetic cells off",
    ),
    _p(
        "prefill_queue.STRETCH_PASSES",
        "bound",
        "free",
        "fixed-point passes of the stretch (converges in a few)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.STRETCH_TOLERANCE",
        "tolerance",
        "free",
        "the stretch's fixed point stops within this relative change",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.STRETCH_DRIFT_FLOOR",
        "tolerance",
        "free",
        "the stretched drift is at least this share of 1 - rho",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.GAMMA_SPREAD_MAX",
        "tolerance",
        "free",
        "a wait at most as spread as a gamma of this shape ratio has its exact decay read (the branch, not its value, is what the exact wait tail earns: tools/earn_its_place.md)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.KAPPA_EXPONENTIAL",
        "tolerance",
        "free",
        "E[X]E[X^3]/E[X^2]^2 of an exponential service (3/2): at or below it the decay table is built",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.FULL_STEP_OFFSETS",
        "tolerance",
        "golden",
        "chunk offsets per long prompt for the full steps' spread (4 moved ITL p99 within 0.1% of 16)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "prefill_queue.PERSIST_SERIES_MIN",
        "tolerance",
        "free",
        "below this A / tau the count's busy-period mean is the count (series limit)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "queueing.QUANTILE_STEPS",
        "bound",
        "free",
        "Newton steps of Wait.quantile (converges in a few)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "queueing.DECAY_STEPS",
        "bound",
        "free",
        "Newton steps of wait_decay_s (converges in a handful)",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "queueing.DECAY_HEAVY",
        "tolerance",
        "free",
        "1 - rho below this is the heavy-traffic limit",
        "docs/latency/prefill-queue.md",
    ),
    _p(
        "quantiles.SPREAD",
        "modelling",
        "golden",
        "each mixed-step value stands for step times within +-5% of it",
        "docs/latency/itl.md; tools/earn_its_place.md: ITL spread, 190 -> 189 synthetic cells off",
    ),
    _p(
        "quantiles.NEWTON_STEPS",
        "bound",
        "free",
        "Newton steps of the response quantiles (converges in a few)",
        "docs/latency/ttft.md",
    ),
    _p(
        "replica.CHUNK_GROUPS",
        "tolerance",
        "golden",
        "a prompt's full chunks exact up to this many, else group midpoints (exact for affine step times)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "replica.ATOM_CV",
        "modelling",
        "golden",
        "prompt-length CV at which the company's count atoms have faded into the lognormal",
        "docs/latency/steps.md",
    ),
    _p(
        "replica.CHUNK_ROUNDING",
        "tolerance",
        "free",
        "a prompt of exactly j shares is j chunks despite the division's rounding",
        "docs/latency/steady-state.md",
    ),
    _p(
        "seats.SEAT_WAIT_MIN",
        "tolerance",
        "free",
        "below this chance of every seat taken, TTFT ignores the seat queue",
        "docs/latency/seats.md",
    ),
    _p(
        "seats.SEAT_DRAIN_FLOOR",
        "tolerance",
        "free",
        "the full seats' drain is at least this share of M/M/S's",
        "docs/latency/seats.md",
    ),
    _p(
        "slices.MIN_SLICE_SPREAD",
        "tolerance",
        "free",
        "the decode slice spread's floor (tail_quantiles needs a width)",
        "docs/latency/itl.md",
    ),
    _p(
        "stability.GRID_POINTS",
        "tolerance",
        "golden",
        "concurrencies of the stability scan, evenly over (0, decode_cap]",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.BOUNDARY_BACKOFF_STEPS",
        "bound",
        "free",
        "steps back inside the boundary after its root (1 or 2 suffice)",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.BOUNDARY_BACKOFF",
        "tolerance",
        "free",
        "one such step, relative to n",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.BOUNDARY_XTOL",
        "tolerance",
        "golden",
        "the boundary's root, relative to decode_cap",
        "docs/latency/stability.md",
    ),
    _p(
        "stable_branch.SOLVE_TOL",
        "tolerance",
        "golden",
        "the steady state's root in n, relative to n_max",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.PEAK_LABEL_MARGIN",
        "tolerance",
        "free",
        "a rate peak this far above the end's rate is labelled compute (saturation)",
        "docs/latency/stability.md",
    ),
    _p(
        "stable_branch.LEAST_ROOT_CHUNKS",
        "bound",
        "free",
        "chunk-count changes per prompt least_root checks at most",
        "docs/latency/stability.md",
    ),
    _p(
        "stable_branch.DIP_SIDE",
        "tolerance",
        "free",
        "least_root reads the rate this far left of a chunk-count change",
        "docs/latency/stability.md",
    ),
    _p(
        "stable_branch.SHARE_FLOOR",
        "tolerance",
        "free",
        "least_root divides by a chunk share of at least this (tokens)",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.PREFILL_EDGE",
        "tolerance",
        "golden",
        "a prefill pool's rate stays this far below rho = 1",
        "docs/latency/stability.md",
    ),
    _p(
        "stability.PREFILL_BACKOFF",
        "tolerance",
        "free",
        "and its boundary's root this far inside",
        "docs/latency/stability.md",
    ),
    _p(
        "stats.PROMPT_SUPPORT_POINTS",
        "tolerance",
        "golden",
        "points of the prompt-length support the model iterates over (64 changes p99s by well under 1%)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "stats.OUTPUT_SUPPORT_POINTS",
        "tolerance",
        "golden",
        "points of the output-length support",
        "docs/latency/steady-state.md",
    ),
    _p(
        "steady.RATE_NEWTON_STEPS",
        "bound",
        "free",
        "Newton / bisection steps of rate_with_merging (converges in ~4)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "steady.SHARED_RATE_STEPS",
        "bound",
        "free",
        "secant / bisection steps of shared_rate (converges in ~6)",
        "docs/latency/steady-state.md",
    ),
    _p(
        "steady.NEWTON_RTOL",
        "tolerance",
        "golden",
        "the Newton root-findings stop at this relative step",
        "docs/latency/steady-state.md",
    ),
    _p(
        "steady.SECANT_RTOL",
        "tolerance",
        "free",
        "the secant root-findings stop at this relative step",
        "docs/latency/steady-state.md",
    ),
    _p(
        "steps.COMPANY_PASSES",
        "modelling",
        "golden",
        "passes of the step mix with company after the first (the chain converges in two)",
        "docs/latency/steps.md; tools/earn_its_place.md: second company pass, 190 -> 187 synthetic cells off",
    ),
    _p(
        "steps.CHAIN_STATES",
        "bound",
        "free",
        "the steps' prompt-count chain's states at most",
        "docs/latency/steps.md",
    ),
    _p(
        "steps.CHAIN_NEGLIGIBLE",
        "tolerance",
        "free",
        "chain counts below this share of the likeliest are dropped",
        "docs/latency/steps.md",
    ),
    _p(
        "steps.CHAIN_FOLDED",
        "tolerance",
        "free",
        "the chain's last state holding more than this: too few states, the passes' count stays",
        "docs/latency/steps.md",
    ),
    _p(
        "steps.CHAIN_REACH_SDS",
        "tolerance",
        "free",
        "the chain reaches the count's mean plus this many sds",
        "docs/latency/steps.md",
    ),
    _p("steps.CHAIN_REACH_EXTRA", "tolerance", "free", "and this many counts more", "docs/latency/steps.md"),
    _p(
        "steps.CHAIN_TAIL",
        "tolerance",
        "free",
        "the negative binomial's geometric tail is followed down to this",
        "docs/latency/steps.md",
    ),
    _p(
        "steps.POISSON_DISPERSION_TOL",
        "tolerance",
        "free",
        "arrival spreads within this of Poisson take no geometric tail",
        "docs/latency/steps.md",
    ),
    _p(
        "ttft.TAIL_INVERSE",
        "tolerance",
        "free",
        "1 / (1 - 0.99): the p99 level's tail mass, inverted",
        "docs/latency/ttft.md",
    ),
)
