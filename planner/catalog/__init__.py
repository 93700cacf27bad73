"""Catalogs: GPU specs with prices (each value with its source) and model shapes from HF config.json."""
