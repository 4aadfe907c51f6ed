"""What the launcher told this process, read from its environment without importing torch (so the CLI can
take a run directory's lock before the heavy imports). torchrun sets ``RANK``; a plain process is rank 0."""

from __future__ import annotations

import os


def is_main_process() -> bool:
    """Whether this process is the launch's rank 0, known before the process group is joined. After joining,
    :attr:`cselab.runtime.distributed.DistributedContext.is_main` says the same."""
    return int(os.environ.get("RANK", "0")) == 0
