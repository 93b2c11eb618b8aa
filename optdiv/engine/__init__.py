"""The engine: a search (prepare, the one search loop, finish), ``run`` around it, what it returns, and the time
budget it keeps."""
