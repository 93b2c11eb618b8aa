"""Seeing a search: the leaderboard and figures of a run directory or a fitted estimator, and the plotting they use."""
