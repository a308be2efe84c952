"""Helpers of python_arch_map: capability tables."""
