"""Suggestion strategies: what to evaluate next, one class each behind ``suggest(history, y_val)`` (the model-based
family, DivBO and OptDivBO among them, and the papers' baselines), the registry that makes them and the named methods
built on them."""
