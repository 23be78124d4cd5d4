"""The `aqmlab` command line: one module per command group, joined in `main`."""
