"""Benchmarks: commands that print tables of ratios measured side by side in one run."""
