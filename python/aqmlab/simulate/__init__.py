"""Running a scenario on the simulator: the run itself and its cost estimate."""
