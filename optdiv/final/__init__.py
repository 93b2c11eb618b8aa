"""The final model: which members the method keeps, the ensemble model they make, and fitting it after the search."""
