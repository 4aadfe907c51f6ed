"""Which device a command computes on: ``auto`` is this process's GPU when CUDA is present, else the CPU.

Training reads ``train.device``; the other commands (eval, encode, analyze, ensemble, the test scoring
after training) place every model they load (:func:`cselab.models.sentence_model.load_model`) on
:func:`inference_device`, which ``--device`` sets.
"""

from __future__ import annotations

import torch

from cselab.errors import CselabError
from cselab.runtime.distributed import local_device

_inference_device = "auto"


def pick_device(name: str | torch.device) -> torch.device:
    """``auto``, ``cpu``, ``cuda`` (this process's GPU: ``cuda:LOCAL_RANK``) or ``cuda:N``; one-line errors."""
    if isinstance(name, torch.device):
        return local_device(name)
    if name == "auto":
        return local_device(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise CselabError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from exc
    if device.type not in ("cpu", "cuda", "mps"):
        raise CselabError(f"device {name!r}: cselab computes on 'cpu' or 'cuda' ('auto' picks)")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CselabError(f"device {name!r} requested but no CUDA GPU is available")
    return local_device(device)


def set_inference_device(name: str) -> None:
    """The device of models loaded from now on in this process (checked now, so a typo fails at once)."""
    global _inference_device
    pick_device(name)
    _inference_device = name


def inference_device() -> torch.device:
    return pick_device(_inference_device)
