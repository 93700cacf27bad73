"""CLI subcommands, one module each. Each module exposes `register(subparsers)` and keeps heavy
imports (scipy, numpy) inside its handler so `capplan --help` and `analyze` stay fast."""

# Order is the order `capplan --help` lists them.
COMMAND_MODULES = [
    "plan",
    "report",
    "analyze",
    "catalog",
    "calibrate",
    "validate",
    "evaluate",
    "simulate",
    "serve",
]
