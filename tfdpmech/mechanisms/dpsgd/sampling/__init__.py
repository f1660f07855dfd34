"""Who is in a DP-SGD step: Poisson batches, the unit one clip bounds (a record, its augmented views, a user's
records), and the records a ``fit`` takes (arrays of any signature, weights, datasets, sources larger than memory)."""
