"""The papers' analyses of trained models: attention, cost, similarity density, and the alignment/uniformity map."""
