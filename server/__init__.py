"""The asyncio runtime of the Eight Off server: the only package that does I/O."""

__version__ = "0.1.0"
