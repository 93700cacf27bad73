"""`capplan report`: a plan as pictures, five figures (PNG and SVG) and one self-contained HTML
page (docs/report.md). figures gathers each figure's numbers from the api's answers and writes
the files, draw draws them (matplotlib, Agg), page writes the HTML. An adapter: it reads
planner.api and the schema, nothing behind them (tests/test_imports.py).
"""
