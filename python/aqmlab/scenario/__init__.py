"""The scenario: its validated model, its units, and its lowering into the engine's config."""
