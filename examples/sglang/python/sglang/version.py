__version__ = "0.5.8+example"
