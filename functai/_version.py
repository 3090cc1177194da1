"""functai's version, in a module of its own: what reads it never imports the package."""

__version__ = "2.0.0"
