"""cselab: unsupervised contrastive learning of sentence embeddings."""

__version__ = "0.1.0"
