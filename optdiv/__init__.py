"""optdiv: search for the ensemble, not for one best model (DivBO and OptDivBO)."""

__version__ = "0.1.0"
