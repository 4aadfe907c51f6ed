"""Speed and memory measurements: training steps, encoding backends, the teacher pass, corpora at scale."""
