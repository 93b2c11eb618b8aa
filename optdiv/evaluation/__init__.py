"""Evaluating one configuration: the record of an evaluation, the fit in a worker process under limits, saved
pipelines, black-box constraints and injected faults."""
