"""The papers' CASH and ensemble-search baselines, each a suggestion strategy over a candidate source."""
