"""Where and how computation runs: device choice, numeric precision (and its probe) and the process group
of a distributed (torchrun) run."""
