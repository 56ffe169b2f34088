"""nmt: a readable, fast neural machine translation toolkit (English-French Tatoeba)."""

__version__ = "0.1.0"
