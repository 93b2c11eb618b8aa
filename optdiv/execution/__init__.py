"""Where evaluations run: the runner interface the search loop talks to, the sequential runner and the Dask runner."""
