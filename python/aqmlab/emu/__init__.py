"""The emulator: real Linux TCP through the bottleneck router, in network namespaces."""
