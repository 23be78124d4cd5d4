"""Results on disk: a run's tables, atomic writes, the results store."""
