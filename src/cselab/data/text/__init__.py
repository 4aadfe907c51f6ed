"""Training text: corpora, parallel corpora, augmentations and round-trip translation."""
