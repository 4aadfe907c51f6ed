"""Experiments on top of the training engine: recorded runs, the two-stage pipeline, results records,
seed repeats, ablation grids and ensembles."""
