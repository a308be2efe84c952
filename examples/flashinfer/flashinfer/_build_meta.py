"""Build metadata (example tree)."""
__version__ = "0.6.3+example"
