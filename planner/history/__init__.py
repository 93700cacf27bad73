"""Observed traffic read from operators' history (issue #36): `series.HistorySeries` is what
every reader returns and what `capplan forecast` reads."""
