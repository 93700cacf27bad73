"""A Python client of planner.v1.PlannerService: the api's functions over the network.

    from planner.client import PlannerClient
    with PlannerClient(["10.0.0.5:50051", "10.0.0.6:50051"]) as client:
        report = client.plan(yaml.safe_load(open("examples/chat.yaml")))   # a PlanReport
        for result in client.sweep(scenarios):                              # as they are solved
            ...

Requests are validated here first (the same InvalidInput the local call raises), sent with only
the fields they were given, and answered with the same pydantic report the local call returns.
Several addresses are balanced with gRPC's round_robin, call by call; one DNS name balances over
all its addresses. A Sweep is cut into chunks streamed concurrently, so its scenarios spread over
every replica.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from pydantic import BaseModel

from planner.errors import CapplanError, InvalidInput, echo
from planner.server import convert
from planner.server.service_errors import BadRequest
from planner.v1 import planner_service_pb2 as pb
from planner.v1 import planner_service_pb2_grpc as pb_grpc

__all__ = ["ClientTls", "PlannerClient", "ServiceError", "SweepResult"]

DEFAULT_TIMEOUT_S = 120.0
MAX_MESSAGE_BYTES = 64 * 2**20
SERVICE = "planner.v1.PlannerService"
# Idempotent calls retried on another replica when one is unavailable (draining, restarting).
_SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            {
                "name": [{"service": SERVICE}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }
)


class ServiceError(CapplanError):
    """A call the service answered with an error status other than INVALID_ARGUMENT."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ClientTls:
    """PEM files: the CA that signed the servers' certificates (None: the system roots) and, for
    mTLS, this client's certificate and key. `server_name` overrides the name checked against
    the server's certificate (default: the host of the first address)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The files read within planner.files.PEM's bounds; errors name `tls.<field>`."""
        from planner.files import PEM, read_bytes

        def read(path: str | None, field: str) -> bytes | None:
            return None if path is None else read_bytes(path, f"tls.{field}", PEM)

        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca_file, "ca_file"),
            private_key=read(self.key_file, "key_file"),
            certificate_chain=read(self.cert_file, "cert_file"),
        )


@dataclass(frozen=True)
class SweepResult:
    """One scenario's answer: its report, or the error a Plan call of it would have raised."""

    index: int
    name: str
    report: BaseModel | None
    error: CapplanError | None


def _split(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InvalidInput("address", f"{echo(address)}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _target(addresses: Sequence[str]) -> tuple[str, str]:
    """The channel target and the host name TLS checks. One address: as given (DNS resolves,
    round_robin spreads over its records); several: their IPs in one ipv4:/ipv6: target."""
    if not addresses:
        raise InvalidInput("addresses", "give at least one HOST:PORT")
    first_host, _ = _split(addresses[0])
    if len(addresses) == 1:
        return addresses[0], first_host
    endpoints: list[tuple[int, str, int]] = []
    for a in addresses:
        host, port = _split(a)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise InvalidInput("addresses", f"cannot resolve {host}: {exc.strerror}") from None
        v4 = [i for i in infos if i[0] == socket.AF_INET]
        family, _, _, _, sockaddr = (v4 or infos)[0]
        endpoints.append((family, str(sockaddr[0]), port))
    if all(f == socket.AF_INET for f, _, _ in endpoints):
        return "ipv4:" + ",".join(f"{ip}:{port}" for _, ip, port in endpoints), first_host
    mapped = [(ip if f == socket.AF_INET6 else f"::ffff:{ip}", port) for f, ip, port in endpoints]
    return "ipv6:" + ",".join(f"[{ip}]:{port}" for ip, port in mapped), first_host


def _error(exc: grpc.RpcError, prefix: str = "") -> CapplanError:
    """The exception a local call would raise for this status."""
    code: grpc.StatusCode = exc.code()
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        status = rpc_status.from_call(exc)
        violations = _violations(status.details if status is not None else ())
        if violations:
            return BadRequest([(f.removeprefix(prefix), r) for f, r in violations])
        return InvalidInput("(request)", exc.details() or "invalid request")
    return ServiceError(code, exc.details() or "")


def _violations(details: Iterable[Any]) -> list[tuple[str, str]]:
    from google.rpc import error_details_pb2

    out: list[tuple[str, str]] = []
    for d in details:
        br = error_details_pb2.BadRequest()
        if d.Unpack(br):
            out.extend((v.field, v.description) for v in br.field_violations)
    return out


class PlannerClient:
    """Calls planner.v1.PlannerService on one or several servers. `timeout_s` is each call's
    deadline (a Plan's solver time limit is cut to fit it); `auth_token` is sent as
    `authorization: Bearer <token>` on every call."""

    def __init__(
        self,
        addresses: str | Sequence[str],
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        tls: ClientTls | None = None,
        request_id: str | None = None,
        auth_token: str | None = None,
    ) -> None:
        addrs = [addresses] if isinstance(addresses, str) else list(addresses)
        target, host = _target(addrs)
        self.addresses = addrs
        self.timeout_s = timeout_s
        metadata = [] if request_id is None else [("x-request-id", request_id)]
        if auth_token is not None:  # a server started with --auth-token-file
            metadata.append(("authorization", f"Bearer {auth_token.strip()}"))
        self._metadata = tuple(metadata) or None
        options: list[tuple[str, Any]] = [
            ("grpc.service_config", _SERVICE_CONFIG),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.enable_retries", 1),
        ]
        if tls is not None:
            name = tls.server_name or host
            options += [("grpc.ssl_target_name_override", name), ("grpc.default_authority", name)]
            self.channel = grpc.secure_channel(target, tls.credentials(), options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self.stub = pb_grpc.PlannerServiceStub(self.channel)

    def __enter__(self) -> PlannerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    # -- calls --

    def _call(self, rpc_name: str, request: Any, timeout_s: float | None, **options: Any) -> Any:
        rpc = convert.RPCS[rpc_name]
        message = convert.request_from_model(rpc, _validated(rpc_name, request), **options)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            response = getattr(self.stub, rpc_name)(message, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _error(exc) from None
        return convert.report_from_response(rpc, response)

    def plan(self, request: Any, *, verify: bool = False, timeout_s: float | None = None) -> Any:
        """planner.api.plan on the server: a PlanReport."""
        return self._call("Plan", request, timeout_s, verify=verify or None)

    def evaluate(self, request: Any, *, timeout_s: float | None = None) -> Any:
        return self._call("Evaluate", request, timeout_s)

    def simulate(self, request: Any, *, timeout_s: float | None = None) -> Any:
        return self._call("Simulate", request, timeout_s)

    def analyze(self, request: Any, *, timeout_s: float | None = None) -> Any:
        return self._call("Analyze", request, timeout_s)

    def calibrate(self, request: Any, *, timeout_s: float | None = None) -> Any:
        return self._call("Calibrate", request, timeout_s)

    def catalog(self, request: Any, *, timeout_s: float | None = None) -> Any:
        return self._call("ListCatalog", request, timeout_s)

    def health(self, service: str = "", timeout_s: float = 5.0) -> str:
        """The serving status of the server a call lands on: SERVING, NOT_SERVING, ..."""
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as exc:
            raise _error(exc) from None
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))

    def sweep(
        self,
        scenarios: Iterable[Any],
        *,
        streams: int | None = None,
        timeout_s: float | None = None,
    ) -> Iterator[SweepResult]:
        """Plan every scenario (a plan request, or a (name, request) pair), yielding results as
        they are solved. The scenarios are cut into `streams` chunks (default: 4 per address)
        sent as concurrent Sweep calls, which round_robin spreads over the servers. A scenario
        that is bad input is its own answer, as the service streams it: a SweepResult whose
        `error` is a BadRequest (fields relative to the plan request), yielded before the
        solved ones; the other scenarios are solved."""
        items: list[tuple[str, pb.PlanRequest]] = []
        positions: list[int] = []  # each item's index among the scenarios
        for i, s in enumerate(scenarios):
            prepared = _prepared(i, s)
            if isinstance(prepared, SweepResult):
                yield prepared
                continue
            items.append(prepared)
            positions.append(i)
        if not items:
            return
        n_streams = max(1, min(len(items), streams or 4 * len(self.addresses)))
        size = -(-len(items) // n_streams)
        chunks = [(start, items[start : start + size]) for start in range(0, len(items), size)]
        timeout = self.timeout_s if timeout_s is None else timeout_s
        results: queue.Queue[SweepResult | BaseException | None] = queue.Queue()
        calls: list[Any] = []

        def run(offset: int, chunk: list[tuple[str, pb.PlanRequest]]) -> None:
            request = pb.SweepRequest(scenarios=[pb.SweepScenario(name=n, plan=p) for n, p in chunk])
            try:
                call = self.stub.Sweep(request, timeout=timeout, metadata=self._metadata)
                calls.append(call)
                for r in call:
                    results.put(self._scenario(offset, r, positions))
            except grpc.RpcError as exc:
                results.put(_error(exc))
            except BaseException as exc:
                results.put(exc)
            finally:
                results.put(None)

        threads = [threading.Thread(target=run, args=c, daemon=True) for c in chunks]
        for t in threads:
            t.start()
        finished = 0
        try:
            while finished < len(threads):
                item = results.get()
                if item is None:
                    finished += 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:  # the caller stopped early or a stream failed: the other streams stop too
            for call in list(calls):
                call.cancel()

    def _scenario(self, offset: int, r: pb.SweepResponse, positions: Sequence[int]) -> SweepResult:
        at = offset + r.index
        index = positions[at] if 0 <= at < len(positions) else at
        if r.WhichOneof("result") == "report":
            return SweepResult(
                index,
                r.name,
                convert.report_from_response(convert.RPCS["Plan"], pb.PlanResponse(report=r.report)),
                None,
            )
        code = next(c for c in grpc.StatusCode if c.value[0] == r.error.code)
        err: CapplanError
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            prefix = f"scenarios[{r.index}].plan."
            v = [(f.removeprefix(prefix), d) for f, d in _violations(r.error.details)]
            err = BadRequest(v) if v else InvalidInput("(request)", r.error.message)
        else:
            err = ServiceError(code, r.error.message)
        return SweepResult(index, r.name, None, err)


def _prepared(i: int, scenario: Any) -> tuple[str, pb.PlanRequest] | SweepResult:
    """Scenario `i` as (name, PlanRequest) to send, or, when it is bad input, its answer: the
    SweepResult with the error a local plan of it raises (the service answers the same)."""
    name = f"scenario-{i}"
    try:
        if isinstance(scenario, tuple):
            if len(scenario) != 2:
                raise InvalidInput(
                    "(scenario)", f"expected a request or a (name, request) pair, got a {len(scenario)}-tuple"
                )
            name, scenario = str(scenario[0]), scenario[1]
        return name, convert.request_from_model(convert.RPCS["Plan"], _validated("Plan", scenario))
    except InvalidInput as exc:
        violations = exc.violations if isinstance(exc, BadRequest) else [(exc.field, exc.reason)]
        return SweepResult(i, name, None, BadRequest(violations))
    except CapplanError as exc:
        return SweepResult(i, name, None, exc)


def _validated(rpc_name: str, request: Any) -> Any:
    """The pydantic request, validated here so errors match the local call's."""
    if isinstance(request, BaseModel):
        return request
    if not isinstance(request, Mapping):
        raise InvalidInput("(root)", f"expected a mapping or a request model, got {type(request).__name__}")
    from planner.schema import inputs

    if rpc_name == "Plan":
        from planner.schema.plan_request import parse_plan_request

        return parse_plan_request(request)
    model: type[BaseModel] = {  # type: ignore[assignment]
        "Evaluate": inputs.EvaluateRequest,
        "Simulate": inputs.SimulateRequest,
        "Analyze": inputs.AnalyzeRequest,
        "Calibrate": inputs.CalibrateRequest,
        "ListCatalog": inputs.CatalogRequest,
    }[rpc_name]
    return inputs.validate_request(model, request)
