"""Speculative decoding in the simulator: how many tokens a verify step yields.

Each decode step of a sequence runs its last token and k guesses through the target (k + 1
scheduled tokens, the KV slots for all of them); the guesses are accepted one after another,
each with probability alpha, up to the first rejection, and the target adds one token of its
own: the step yields 1 + j tokens, j the accepted guesses, P(j >= i) = alpha^i for i <= k (a
geometric number truncated at k; mean (1 - alpha^(k+1)) / (1 - alpha), planner.costmodel.
speculative). The draws come from a seeded generator per engine, so a simulation is the same
every run (docs/speculative.md)."""

from __future__ import annotations

import math
import random

__all__ = ["ACCEPTANCE_SEED", "Acceptance", "acceptance_of"]

# The generator's seed, mixed with the engine's index: the same draws every run
ACCEPTANCE_SEED = 0x5EC_DEC0


class Acceptance:
    """Tokens a verify step yields for one sequence: 1 + j, j ~ min(floor(ln u / ln alpha), k)
    with u uniform in (0, 1] (inverse transform: P(j >= i) = P(u <= alpha^i) = alpha^i)."""

    __slots__ = ("alpha", "k", "log_alpha", "rng", "scheduled")

    def __init__(self, k: int, alpha: float, index: int) -> None:
        if not (k >= 1 and 0.0 < alpha < 1.0):
            raise ValueError(f"speculative k {k} < 1 or alpha {alpha} outside (0, 1)")
        self.k = k
        self.alpha = alpha
        self.log_alpha = math.log(alpha)
        self.scheduled = k + 1  # tokens a decode schedules (its last token and k guesses)
        self.rng = random.Random(ACCEPTANCE_SEED * 1_000_003 + index)

    def draw(self, most: int) -> int:
        """Tokens one verify step yields, at most `most` (the answer's rest, the scheduled
        tokens), at least 1."""
        u = 1.0 - self.rng.random()  # (0, 1]
        j = math.floor(math.log(u) / self.log_alpha)
        m = 1 + (j if j < self.k else self.k)
        return m if m <= most else max(most, 1)


def acceptance_of(timer: object, index: int) -> Acceptance | None:
    """The engine's acceptance draws where its timer (planner.costmodel.roofline.Replica) serves
    with speculative decoding at a k; None otherwise (any other StepTimer: none)."""
    spec = getattr(timer, "speculative", None)
    k = getattr(spec, "num_speculative_tokens", None)
    if spec is None or k is None:
        return None
    return Acceptance(int(k), float(spec.alpha), index)
