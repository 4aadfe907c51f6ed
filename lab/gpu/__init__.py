"""The GPU check: every training and serving path on a lent CUDA machine, with synthetic inputs."""
