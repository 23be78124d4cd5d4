"""What is computed from runs: convergence over time, harm against a solo baseline."""
