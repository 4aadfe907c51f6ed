"""Recorded runs, seed repeats, ablation grids, ensembles and a paper's row, on top of the training engine."""
