"""Analytical models: pure functions over NumPy arrays, no I/O.

- :mod:`tcpdelay.model.throughput` — steady-state TCP throughput (PFTK full and simple, Mathis)
"""
