"""A teacher's vectors of a text, computed once on the fastest way of running it and kept on disk."""
