"""The API's schema: every request `planner.api` takes and every report it answers, apart from
the code that computes them, so that the adapters (the CLI, the client, the exporters, the gRPC
servicer) read and write these types without importing the planner, the latency model or the
simulator (tests/test_imports.py holds that rule).

Modules: inputs (the requests of evaluate, simulate, analyze, calibrate and catalog, and reading
them from files; it re-exports request_common, serving_requests, analysis_requests and
request_loading, where they are defined), plan_request (the plan's request), reports (their
reports), plan_report (the plan's report), catalog_reports (the catalog's reports and every
report's base, which import no latency model), kinds (the roles and limits the latency model's
answers are keyed by). A report's `model_dump(mode="json")` is what `capplan ... --json` prints;
the gRPC messages of planner.v1 mirror these models field for field.

Nothing is imported here: `capplan catalog` imports only the catalog's reports.
"""
