"""Where a search keeps its observations: one store interface, in memory or in a run directory."""
