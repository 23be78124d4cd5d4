"""The atlas specs shipped with aqmlab (default.toml: `aqmlab atlas` with no SPEC)."""
