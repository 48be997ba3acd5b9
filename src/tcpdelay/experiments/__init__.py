"""Scenarios, sweeps and the main evaluation job: what runs, over which parameters."""
