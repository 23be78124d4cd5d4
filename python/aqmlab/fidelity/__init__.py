"""The fidelity suite: the simulator against the emulator, case by case (its cases live beside this file)."""
