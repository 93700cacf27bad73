"""capplan: capacity planning for self-hosted LLM serving."""

__version__ = "0.1.0"
