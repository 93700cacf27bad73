"""Generated gRPC code of package planner.v1 (proto/planner/v1/planner_service.proto).

Do not edit the *_pb2* modules: regenerate them with `python3 tools/gen_proto.py`
(tests/test_proto_codegen.py fails when they drift from the .proto).
"""
