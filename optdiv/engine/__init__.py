"""The engine: a search (prepare, the one search loop, finish), ``run`` around it, and what it returns."""
