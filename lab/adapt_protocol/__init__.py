"""The STS-B adaptation protocol: a good encoder and STS-B's own unlabelled text (runs, +UC ensembles, tables)."""
