"""Searches for worst cases and the coexistence atlas."""
