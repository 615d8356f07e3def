"""The asyncio runtime of the Eight Off server: the only package that does I/O."""
