"""Regenerate the committed gRPC code of planner.v1 from proto/.

    python3 tools/gen_proto.py            # writes planner/v1/planner_service_pb2{,_grpc}.py{,i}
    python3 tools/gen_proto.py --out DIR  # writes DIR/planner/v1/... (the drift test uses this)

Uses grpcio-tools' bundled protoc (`python -m grpc_tools.protoc`), pinned in pyproject's dev extra
to grpcio's minor version, so the output is byte-stable across machines.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
PROTOS = ("planner/v1/planner_service.proto",)
GENERATED = (
    "planner/v1/planner_service_pb2.py",
    "planner/v1/planner_service_pb2.pyi",
    "planner/v1/planner_service_pb2_grpc.py",
)


def generate(out: Path) -> list[Path]:
    """Run protoc into `out` (the repository root by default); returns the files written."""
    from grpc_tools import protoc

    include = resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto
    rpc_include = _googleapis_root()  # google/rpc/status.proto (googleapis-common-protos)
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_DIR}",
        f"--proto_path={include}",
        f"--proto_path={rpc_include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *PROTOS,
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    return [out / g for g in GENERATED]


def _googleapis_root() -> Path:
    import google.rpc

    return Path(next(iter(google.rpc.__path__))).parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: the repository)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
