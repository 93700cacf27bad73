"""Roofline cost model: step times, memory and KV capacity, batching analyses, profiles."""
