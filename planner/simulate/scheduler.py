"""One vLLM V1 engine: the scheduler's step semantics, KV block accounting and step timing.

Semantics (vllm/v1/core/sched/scheduler.py `schedule()`, kv_cache_manager.py `allocate_slots`):
- A request has `num_tokens` = prompt + outputs so far and `computed` tokens; each step gives
  it up to `num_tokens - computed` tokens (a decode: 1), capped by
  `long_prefill_token_threshold` (0 = off) and by what is left of `max_num_batched_tokens`.
- Running requests first, in admission order, while budget is left. Each one's KV blocks must
  cover computed + scheduled tokens (blocks of `block_size`); when the pool is short, the most
  recently admitted running request is preempted by recompute (blocks freed, computed reset to
  0, put at the front of the waiting queue) until the allocation fits, or the request itself was
  the newest and is preempted.
- Then, only in a step with no preemption, waiting requests in FCFS order while budget is left
  and fewer than `max_num_seqs` run; the first allocation that fails stops admission (head of
  line). A request admitted with nothing computed skips its prefix-cache hit tokens (they still
  hold blocks).
- A scheduled request whose computed tokens reach its num_tokens at the end of a step emits one
  output token at the step's end (so the step that completes a prefill produces the first
  token, and the step that completes a recompute produces the next one). A request finishes
  with its last output token; its blocks are freed before the next step.

Representation. Requests in the decode phase that were scheduled in every step since they got
there are kept implicitly ("decode set"): each member's computed tokens are `vb + G`, where G
counts this engine's steps, so a step that advances every member costs O(1), not O(members). The
blocks the decode set needs in a step come from counts of members by `vb mod block_size`; its
completions from a heap. Everything else running (prefilling, recomputing, or a decode that
missed a step) is explicit, in admission order. A step whose outcome depends on the order between
decode-set members and others (the budget or the KV pool runs out) materializes everything and
runs the ordered algorithm literally.

Fast-forward. With nothing prefilling and admission blocked (no waiting request, `max_num_seqs`
reached, or the head's allocation fails and keeps failing since free blocks only shrink), the
next steps are identical decode-only steps until the next arrival, the next completion or the
first step whose block allocations would not fit. Their count comes from `decode_run_time_s`
(binary search on steps), the blocks they take from the residue counts, and their ITL samples
are kept as one aggregate record (see metrics.ItlRecorder): O(1) per run of steps.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import deque

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.acceptance import acceptance_of
from planner.simulate.engine_state import MAX_SIM_EVENTS, EventBudget, RequestTable, StepTrace
from planner.simulate.metrics import ItlRecorder, MinuteAccumulator

_NO_CHUNKS: tuple[tuple[int, int], ...] = ()


__all__ = ["MAX_SIM_EVENTS", "EventBudget", "RequestTable", "SimulatedEngine", "StepTrace"]


class SimulatedEngine:
    """One simulated vLLM V1 engine. Drive it with `enqueue(rid, t)` and `run_until(t)`."""

    def __init__(
        self,
        config: SchedulerConfig,
        timer: StepTimer,
        table: RequestTable,
        series: MinuteAccumulator,
        fast_forward: bool = True,
        index: int = 0,
        trace: list[StepTrace] | None = None,
        budget: EventBudget | None = None,
    ) -> None:
        self.config = config
        self.budget = budget if budget is not None else EventBudget()
        self.index = index
        self.trace = trace
        self.timer = timer
        self.table = table
        self.series = series
        self.itl = ItlRecorder(timer)
        self.fast_forward = fast_forward
        self._budget = config.max_num_batched_tokens
        self._max_seqs = config.max_num_seqs
        self._thr = config.long_prefill_token_threshold
        self._bs = config.block_size
        self._total = config.kv_cache_blocks
        self._hit = config.prefix_cache_hit_fraction
        # Speculative decoding (planner/simulate/acceptance.py; None: off): a decode schedules
        # k + 1 tokens and yields a random 1..k+1; every request stays explicit (no decode set,
        # no fast-forward: the members would no longer advance in step).
        self._spec = acceptance_of(timer, index)
        self._spec_tokens = 1 if self._spec is None else self._spec.scheduled

        self.t = -math.inf  # when the next step may start (end of the last one)
        self.waiting: deque[int] = deque()
        self.explicit: list[int] = []  # running, not in the decode set, admission order
        # decode set
        self.G = 0
        self.n_d = 0
        self.s_b = 0
        self.cnt = [0] * self._bs
        self.dseq: list[int] = []
        self.heap: list[tuple[int, int, int]] = []
        self.used = 0
        self._next_seq = 0
        self._preempted: list[int] = []
        self._pending: tuple[tuple[tuple[int, int], ...], tuple[int, ...], int] = ((), (), 0)

        # statistics
        self.outstanding_tokens = 0
        self.assigned = 0
        self.preemptions = 0
        self.peak_used = 0
        self.max_waiting = 0
        self.busy_s = 0.0
        self.steps = 0
        self.completed = 0  # requests finished (a closed loop's clients wait on it)

    # --- driving ---------------------------------------------------------------------------
    def has_work(self) -> bool:
        return bool(self.n_d or self.explicit or self.waiting)

    def enqueue(self, rid: int, t: float) -> None:
        """A request reaches this engine at time t (it is seen by the next step)."""
        tb = self.table
        if self.t < t:
            self.t = t  # only possible while idle: a busy engine has been run up to t
        self.waiting.append(rid)
        if len(self.waiting) > self.max_waiting:
            self.max_waiting = len(self.waiting)
        p = tb.prompt[rid]
        self.outstanding_tokens += p + tb.target[rid] - min(tb.comp[rid], p) - tb.out[rid]
        self.assigned += 1

    def run_until(self, horizon: float, *, first_finish: bool = False) -> None:
        """Run every step that starts before `horizon` (math.inf: until idle). `first_finish`:
        stop after the first event (a step, or a fast-forwarded run of decode steps, which ends
        at its first completion anyway) that finishes a request: a closed loop's client sends
        its next request then (planner/simulate/clients.py)."""
        budget = self.budget
        done = self.completed
        while (self.n_d or self.explicit or self.waiting) and self.t < horizon:
            if first_finish and self.completed != done:
                break
            budget.left -= 1
            if budget.left < budget.next_check:
                budget.tick()
            if self.fast_forward and self.n_d and not self.explicit and self._stretch(horizon):
                continue
            self._step()

    # --- helpers ----------------------------------------------------------------------------
    def _cdiv(self, tokens: int) -> int:
        return -(-tokens // self._bs)

    def _admission_chunk(self, rid: int, budget: int) -> tuple[int, int]:
        """(computed after the prefix-cache lookup, tokens to schedule) for a waiting request."""
        tb = self.table
        c = tb.comp[rid]
        ntok = tb.prompt[rid] + tb.out[rid]
        if c == 0 and self._hit > 0.0:
            c = min(int(self._hit * tb.prompt[rid]), ntok - 1)
        s = ntok - c
        if self._thr and s > self._thr:
            s = self._thr
        if s > budget:
            s = budget
        return c, s

    def _join_decode_set(self, rid: int) -> None:
        tb = self.table
        b = tb.comp[rid] - self.G
        o = tb.out[rid] - self.G
        tb.vb[rid] = b
        tb.vo[rid] = o
        heapq.heappush(self.heap, (tb.target[rid] - o, tb.seq[rid], rid))
        self.cnt[b % self._bs] += 1
        self.s_b += b
        self.n_d += 1
        insort(self.dseq, tb.seq[rid])

    def _finish_decode_members(self, t_end: float) -> None:
        tb, G, heap = self.table, self.G, self.heap
        series = self.series
        while heap and heap[0][0] <= G:
            _, sq, rid = heapq.heappop(heap)
            b = tb.vb[rid]
            comp = b + G
            tb.comp[rid] = comp
            tb.out[rid] = tb.vo[rid] + G
            self.used -= self._cdiv(comp)
            self.n_d -= 1
            self.s_b -= b
            self.cnt[b % self._bs] -= 1
            del self.dseq[bisect_left(self.dseq, sq)]
            tb.finish[rid] = t_end
            tb.release(rid)
            series.completions[series.bin(t_end)] += 1
            self.completed += 1

    def _materialize(self, t: float) -> None:
        """Move the decode set into the explicit running list (admission order)."""
        if not self.n_d:
            return
        tb, G = self.table, self.G
        members = [rid for _, _, rid in self.heap]
        for rid in members:
            tb.comp[rid] = tb.vb[rid] + G
            tb.out[rid] = tb.vo[rid] + G
            tb.last_emit[rid] = t  # members emitted at the end of the previous step
        merged = members + self.explicit
        merged.sort(key=tb.seq.__getitem__)
        self.explicit = merged
        self.heap = []
        self.dseq = []
        self.cnt = [0] * self._bs
        self.s_b = 0
        self.n_d = 0

    def _preempt(self, rid: int) -> None:
        if self.trace is not None:
            self._preempted.append(rid)
        tb = self.table
        c = tb.comp[rid]
        self.used -= self._cdiv(c)
        self.outstanding_tokens += min(c, tb.prompt[rid])
        tb.comp[rid] = 0
        self.waiting.appendleft(rid)
        if len(self.waiting) > self.max_waiting:
            self.max_waiting = len(self.waiting)
        self.preemptions += 1

    # --- one step -------------------------------------------------------------------------
    def _step(self) -> None:
        """One engine step as vLLM V1's scheduler takes it (module docstring): the running
        requests in order, then the waiting ones FCFS in a step without preemption; the step's
        time; every scheduled request advanced. One function on purpose: it runs once per step,
        and split into its phases (each reloading the request columns) the simulator ran ~4%
        slower in bench/bench_simulate.py."""
        tb = self.table
        comp, prompt, out, seq = tb.comp, tb.prompt, tb.out, tb.seq
        t = self.t
        thr = self._thr
        bs = self._bs
        budget = self._budget
        n_d = self.n_d
        sched: list[tuple[int, int]] = []
        need_d = self.cnt[-self.G % bs] if n_d else 0
        preempted = False

        # Fast path: every decode-set member gets its token and all allocations fit, so the
        # order between decode-set members and explicit requests does not matter.
        ok = True
        need = need_d
        charged = 0
        for r in self.explicit:
            if n_d:
                before = bisect_left(self.dseq, seq[r])
                budget -= before - charged
                charged = before
                if budget < 0:
                    ok = False
                    break
            c = comp[r]
            s = prompt[r] + out[r] - c
            if s == 1 and out[r]:
                s = self._spec_tokens  # a decode: 1, or its k + 1 speculative tokens
            if thr and s > thr:
                s = thr
            if s > budget:
                s = budget
            if s > 0:
                sched.append((r, s))
                budget -= s
                need += -(-(c + s) // bs) - -(-c // bs)
        if ok:
            budget -= n_d - charged
            ok = budget >= 0 and need <= self._total - self.used
        if ok:
            self.used += need
        else:
            # Slow path: the literal ordered algorithm over the materialized running list.
            self._materialize(t)
            n_d = 0
            need_d = 0
            sched = []
            budget = self._budget
            running = self.explicit
            free = self._total - self.used
            i = 0
            while i < len(running) and budget > 0:
                r = running[i]
                c = comp[r]
                s = prompt[r] + out[r] - c
                if s == 1 and out[r]:
                    s = self._spec_tokens
                if thr and s > thr:
                    s = thr
                if s > budget:
                    s = budget
                have = -(-c // bs)
                nb = -(-(c + s) // bs) - have
                self_preempted = False
                while nb > free:
                    victim = running.pop()
                    self._preempt(victim)
                    preempted = True
                    free = self._total - self.used
                    if victim == r:
                        self_preempted = True
                        break
                if self_preempted:
                    break
                free -= nb
                self.used += nb
                sched.append((r, s))
                budget -= s
                i += 1

        # Waiting requests, FCFS, only in a step without preemption.
        if not preempted and self.waiting:
            waiting = self.waiting
            n_running = n_d + len(self.explicit)
            while waiting and budget > 0 and n_running < self._max_seqs:
                r = waiting[0]
                c, s = self._admission_chunk(r, budget)
                nb = -(-(c + s) // bs)
                if nb > self._total - self.used:
                    break
                waiting.popleft()
                self.used += nb
                p = prompt[r]
                self.outstanding_tokens -= min(c, p) - min(comp[r], p)
                comp[r] = c
                seq[r] = self._next_seq
                self._next_seq += 1
                self.explicit.append(r)
                sched.append((r, s))
                budget -= s
                n_running += 1
        if self.used > self.peak_used:
            self.peak_used = self.used
        if self.trace is not None:
            self._record(sched, n_d, 1)

        # Step time.
        chunks: list[tuple[int, int]] = []
        dcount = n_d
        ctx = self.s_b + n_d * (self.G + 1) if n_d else 0
        prefill_tokens = 0
        for r, s in sched:
            c = comp[r]
            ntok = prompt[r] + out[r]
            if out[r] > 0 and c == ntok - 1:  # a decode (s == 1; speculative: up to k + 1)
                dcount += 1
                ctx += ntok
            else:
                chunks.append((s, c))
                prefill_tokens += s
        if dcount or chunks:
            dt = self.timer.step_time_s(chunks, dcount, ctx)
            if not dt >= 0.0:
                raise InvalidInput("timer", f"a step takes {dt!r} s; step times are seconds >= 0")
            self.steps += 1
        else:
            dt = 0.0  # nothing scheduled (everything preempted): no model run
        t_end = t + dt
        series = self.series
        series.interval(t, t_end, n_d + len(self.explicit), len(self.waiting))
        b_end = series.bin(t_end)
        series.prefill_tokens[b_end] += prefill_tokens

        # Advance the decode set.
        self.G += 1
        emitted = n_d
        if n_d:
            self.itl.point(dt, n_d)
            self.outstanding_tokens -= n_d

        # Advance the explicit requests.
        if sched:
            target, last_emit, itl = tb.target, tb.last_emit, self.itl
            left = False
            finished: list[int] = []
            spec = self._spec
            for r, s in sched:
                c = comp[r]
                p = prompt[r]
                c2 = c + s
                m = 1
                verify = spec is not None and out[r] > 0 and c == p + out[r] - 1
                if verify:  # the accepted guesses + 1; the rejected slots' blocks freed
                    m = spec.draw(min(target[r] - out[r], s))  # type: ignore[union-attr]
                    self.used -= -(-c2 // bs) - -(-(c + m) // bs)
                    c2 = c + m
                comp[r] = c2
                if c < p:
                    self.outstanding_tokens -= min(c2, p) - c
                if verify or c2 == p + out[r]:
                    o = out[r] + m
                    out[r] = o
                    emitted += m
                    self.outstanding_tokens -= m
                    if o == 1:
                        tb.first_token[r] = t_end
                    else:
                        le = last_emit[r]
                        itl.point(dt if le == t else t_end - le, 1)
                    last_emit[r] = t_end
                    left = True
                    if o >= target[r]:
                        self.used -= -(-c2 // bs)
                        tb.finish[r] = t_end
                        series.completions[b_end] += 1
                        seq[r] = -1
                        finished.append(r)
                        self.completed += 1
                    elif spec is None:
                        seq[r] = -seq[r] - 2  # mark "joins the decode set" (decoded below)
            if left:
                keep: list[int] = []
                for r in self.explicit:
                    sq = seq[r]
                    if sq >= 0:
                        keep.append(r)
                    elif sq <= -2:
                        seq[r] = -sq - 2
                        self._join_decode_set(r)
                self.explicit = keep
                for r in finished:
                    tb.release(r)
        series.output_tokens[b_end] += emitted
        self._finish_decode_members(t_end)
        self.busy_s += dt
        self._close_record(t, t_end)
        self.t = t_end

    # --- a run of identical decode-only steps ----------------------------------------------
    def _stretch(self, horizon: float) -> bool:
        """Fast-forward decode-only steps; False when the next step is not one of them. One
        function on purpose, as `_step`: it runs once per run of decode steps."""
        bs, G, n = self._bs, self.G, self.n_d
        cnt = self.cnt
        free = self._total - self.used
        if cnt[-G % bs] > free:
            return False  # the next step preempts
        if self.waiting and n < self._max_seqs:
            left = self._budget - n
            if left > 0:
                c, s = self._admission_chunk(self.waiting[0], left)
                if -(-(c + s) // bs) <= free - cnt[-G % bs]:
                    return False  # the head would be admitted
        # Steps until the first completion, and until the pool runs short.
        k_fin = self.heap[0][0] - G
        cycles = free // n
        rem = free - cycles * n
        j = 0
        while True:
            c = cnt[-(G + j) % bs]
            if c > rem:
                break
            rem -= c
            j += 1
        k_cap = min(k_fin, cycles * bs + j)
        timer = self.timer
        ctx0 = self.s_b + n * (G + 1)
        d0 = timer.step_time_s(_NO_CHUNKS, n, ctx0)
        if not d0 > 0.0:
            # A step that takes no time never reaches the next arrival: fast-forward needs > 0.
            raise InvalidInput("timer", f"a decode step of {n} sequences takes {d0!r} s; steps take > 0 s")
        t = self.t
        # Steps that start before the horizon: largest k with T(k-1) < gap, T = decode_run_time.
        k = k_cap
        known: dict[int, float] = {0: 0.0, 1: d0}

        def run(steps: int) -> float:
            v = known.get(steps)
            if v is None:
                v = timer.decode_run_time_s(n, ctx0, steps)
                known[steps] = v
            return v

        if horizon != math.inf and k_cap > 1:
            gap = horizon - t
            # Steps never get faster as context grows, so T(j) >= j*d0: j <= gap/d0 bounds it.
            hi = min(k_cap - 1, int(gap / d0))
            if hi >= 1 and run(hi) >= gap:
                lo = 0  # T(lo) < gap <= T(hi)
                probe = hi - 1
                while hi - lo > 1:
                    if run(probe) < gap:
                        lo = probe
                    else:
                        hi = probe
                    probe = (lo + hi) // 2
                hi = lo
            k = hi + 1
        dur = run(k)
        t_end = t + dur
        # Blocks the k steps take.
        full, part = divmod(k, bs)
        need = full * n
        for j in range(part):
            need += cnt[-(G + j) % bs]
        self.used += need
        if self.used > self.peak_used:
            self.peak_used = self.used
        if k == 1:
            self.itl.point(d0, n)
        else:
            self.itl.stretch(n, ctx0, k, d0, dur)
        if self.trace is not None:
            self._record([], n, k)
        series = self.series
        series.interval(t, t_end, n, len(self.waiting))
        b0 = series.bin(t + d0)
        b1 = series.bin(t_end)
        if b0 == b1:
            series.output_tokens[b1] += n * k
        else:
            self._split_tokens(t, n, k, run)
        self.G = G + k
        self.outstanding_tokens -= n * k
        self.steps += k
        self.busy_s += dur
        self._close_record(t, t_end)
        self.t = t_end
        self._finish_decode_members(t_end)
        return True

    def _record(self, sched: list[tuple[int, int]], n_d: int, steps: int) -> None:
        """Append a StepTrace; its duration is filled in by `_close_record`."""
        assert self.trace is not None
        seq = self.table.seq
        items = [(seq[r], r, s) for r, s in sched]
        if n_d:
            items += [(seq[r], r, 1) for _, _, r in self.heap]
        items.sort()
        self._pending = (tuple((r, s) for _, r, s in items), tuple(self._preempted), steps)
        self._preempted = []

    def _close_record(self, start: float, end: float) -> None:
        if self.trace is not None:
            sched, pre, steps = self._pending
            self.trace.append(StepTrace(self.index, start, end - start, steps, sched, pre))

    def _split_tokens(self, t: float, n: int, k: int, run: object) -> None:
        """Output tokens of a stretch whose step ends fall in several minutes."""
        assert callable(run)
        series = self.series
        done = 0
        while done < k:
            b = series.bin(t + run(done + 1))
            boundary = series.end_of(b)
            # last step (1-based) ending before the boundary, in (done, k]
            lo, hi = done + 1, k
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if t + run(mid) < boundary:
                    lo = mid
                else:
                    hi = mid - 1
            series.output_tokens[b] += n * (lo - done)
            done = lo
