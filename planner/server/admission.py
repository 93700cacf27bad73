"""Fairness: probes and catalog calls never wait behind long calls, and no one caller holds the
server.

gRPC's own `maximum_concurrent_rpcs` counts every call alike, so one client holding enough
Sweeps made health checks from everyone else fail with RESOURCE_EXHAUSTED (and the Kubernetes
liveness probe uses that health service). Instead the long calls (Plan, Sweep, Evaluate,
Simulate, Analyze, Calibrate, and the held-open health Watch and reflection streams) are admitted
here, by our own count:

- at most `max_calls` long handlers at once, fewer than the serving threads, so the remaining
  threads always serve health, ListCatalog and the refusals themselves;
- of them at most `max_streams` (half) streams: a Sweep holds its thread until its last scenario;
- per peer at most `max_calls_per_peer` long calls and `max_streams_per_peer` streams, where the
  peer is the authenticated identity (bearer-token name, client-certificate name) or else the
  client's address without its port.

A call over a limit fails at once with RESOURCE_EXHAUSTED naming the limit (a QuotaFailure whose
subject is the serve flag), before any work. Health `Check` runs on a small thread pool of its
own, so even a server whose every serving thread is held answers its probes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc

from planner.errors import CapplanError, InvalidInput
from planner.server.service_errors import LimitExceeded

__all__ = ["Admission", "AdmissionLimits", "Fairness", "FairnessInterceptor", "Throttled", "peer_address"]

SERVICE_PREFIX = "/planner.v1.PlannerService/"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_THREADS = 2  # Check answers in microseconds; two threads keep one slow client from blocking it
# Held-open streams outside the planner service: admitted like a Sweep.
_OTHER_STREAMS = (
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
)
_SHORT = frozenset({"ListCatalog"})  # answered on the serving thread in about a millisecond
_STREAMS = frozenset({"Sweep"})


@dataclass(frozen=True)
class Fairness:
    """The admission limits as configured; None: the default for the pool's capacity."""

    max_calls: int | None = None
    max_calls_per_peer: int | None = None
    max_streams_per_peer: int | None = None

    def resolve(self, capacity: int) -> AdmissionLimits:
        """Defaults from the job pool's capacity (workers + queue), which refuses unary calls
        beyond it ("server busy") whoever sends them: twice as many long handlers, half of them
        streams; one peer may hold 8 streams (planner.client opens 4 per address) and as many
        calls as the pool takes plus its streams, so the others always find a share."""
        calls = 2 * capacity if self.max_calls is None else self.max_calls
        if calls < 1:
            raise InvalidInput("--max-calls", f"must be >= 1, got {calls}")
        streams = max(1, calls // 2)
        peer_streams = min(8, streams) if self.max_streams_per_peer is None else self.max_streams_per_peer
        if not 1 <= peer_streams <= streams:
            raise InvalidInput(
                "--max-streams-per-peer",
                f"must be in [1, {streams}] (half of --max-calls), got {peer_streams}",
            )
        per_peer = (
            min(calls, capacity + peer_streams)
            if self.max_calls_per_peer is None
            else self.max_calls_per_peer
        )
        if not 1 <= per_peer <= calls:
            raise InvalidInput(
                "--max-calls-per-peer", f"must be in [1, --max-calls = {calls}], got {per_peer}"
            )
        return AdmissionLimits(calls, streams, per_peer, peer_streams)


@dataclass(frozen=True)
class AdmissionLimits:
    """Concurrent long calls the server admits (see the module docstring); every field >= 1."""

    max_calls: int
    max_streams: int
    max_calls_per_peer: int
    max_streams_per_peer: int


class Throttled(LimitExceeded):
    """A long call over one of the admission limits: RESOURCE_EXHAUSTED, QuotaFailure subject
    = the serve flag that sets the limit."""

    def __init__(self, flag: str, held: int, limit: int, what: str, peer: str | None) -> None:
        super().__init__(flag, held + 1, limit, what)
        who = f" from {peer}" if peer is not None else ""
        CapplanError.__init__(
            self,
            f"too many concurrent {what}{who}: {held} held, limit {limit} ({flag}); retry with backoff",
        )


class Admission:
    """The counts behind the limits; `enter` and `leave` pair up, under one lock."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._calls = 0
        self._streams = 0
        self._peers: dict[str, list[int]] = {}  # peer -> [calls, streams]; dropped at zero

    def enter(self, peer: str, stream: bool) -> None:
        f = self.limits
        with self._lock:
            mine = self._peers.get(peer, [0, 0])
            if stream and mine[1] >= f.max_streams_per_peer:
                raise Throttled("--max-streams-per-peer", mine[1], f.max_streams_per_peer, "streams", peer)
            if mine[0] >= f.max_calls_per_peer:
                raise Throttled("--max-calls-per-peer", mine[0], f.max_calls_per_peer, "calls", peer)
            if stream and self._streams >= f.max_streams:
                raise Throttled(
                    "--max-calls", self._streams, f.max_streams, "streams (half of --max-calls)", None
                )
            if self._calls >= f.max_calls:
                raise Throttled("--max-calls", self._calls, f.max_calls, "long calls", None)
            self._calls += 1
            self._streams += stream
            self._peers[peer] = [mine[0] + 1, mine[1] + stream]

    def leave(self, peer: str, stream: bool) -> None:
        with self._lock:
            self._calls -= 1
            self._streams -= stream
            mine = self._peers[peer]
            mine[0] -= 1
            mine[1] -= stream
            if mine[0] == 0:
                del self._peers[peer]

    def held(self) -> tuple[int, int]:
        """(long calls, streams) admitted now."""
        with self._lock:
            return self._calls, self._streams


def peer_address(peer: str) -> str:
    """gRPC's peer string without the port: 'ipv4:10.0.0.5:41234' -> 'ipv4:10.0.0.5',
    'ipv6:[::1]:5000' -> 'ipv6:[::1]'; others (unix sockets) as they are."""
    if peer.startswith(("ipv4:", "ipv6:")):
        host, sep, port = peer.rpartition(":")
        if sep and port.isdigit():
            return host
    return peer


class FairnessInterceptor(grpc.ServerInterceptor):
    """Admits the long calls (Admission) and moves health Check to its own threads. Sits inside
    the ServiceInterceptor, which turns a planner call's Throttled into its status and log line;
    the other streams are aborted here. `identify(context)` names the peer."""

    def __init__(self, admission: Admission, identify: Callable[[grpc.ServicerContext], str]) -> None:
        self.admission = admission
        self.identify = identify
        self.health_pool = futures.ThreadPoolExecutor(HEALTH_THREADS, thread_name_prefix="capplan-health")

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        method: str = details.method
        if handler is None:
            return None
        if method == HEALTH_CHECK and handler.unary_unary is not None:
            behavior = _passthrough(handler.unary_unary)
            # grpc's server runs a behavior with this attribute on that executor, not the shared one.
            behavior.experimental_thread_pool = self.health_pool  # type: ignore[attr-defined]
            return grpc.unary_unary_rpc_method_handler(
                behavior, handler.request_deserializer, handler.response_serializer
            )
        if method.startswith(SERVICE_PREFIX):
            name = method[len(SERVICE_PREFIX) :]
            if name in _SHORT:
                return handler
            return self._admitted(handler, stream=name in _STREAMS, abort=False)
        if method in _OTHER_STREAMS:
            return self._admitted(handler, stream=True, abort=True)
        return handler

    def _admitted(self, handler: grpc.RpcMethodHandler, stream: bool, abort: bool) -> grpc.RpcMethodHandler:
        admission, identify = self.admission, self.identify

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            peer = identify(context)
            _enter(admission, peer, stream, context, abort)
            try:
                return handler.unary_unary(request, context)
            finally:
                admission.leave(peer, stream)

        def streaming(behavior: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
            def run(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                peer = identify(context)
                _enter(admission, peer, stream, context, abort)
                try:
                    yield from behavior(request, context)
                finally:
                    admission.leave(peer, stream)

            return run

        des, ser = handler.request_deserializer, handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(unary, des, ser)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), des, ser)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), des, ser)
        return handler  # pragma: no cover - no client-streaming unary methods are served


def _enter(admission: Admission, peer: str, stream: bool, context: grpc.ServicerContext, abort: bool) -> None:
    try:
        admission.enter(peer, stream)
    except Throttled as exc:
        if abort:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        raise


def _passthrough(
    behavior: Callable[[Any, grpc.ServicerContext], Any],
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def run(request: Any, context: grpc.ServicerContext) -> Any:
        return behavior(request, context)

    return run
