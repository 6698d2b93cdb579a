"""pyctrl's benchmarks: ``python -m benchmarks`` (``make bench``); see ``benchmarks/README.md``."""
