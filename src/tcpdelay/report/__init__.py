"""Plots and the self-contained HTML report (figures embedded, no external files)."""
