"""Sweeps: grids of scenarios, their expansion and their runner (local cores or Dask)."""
