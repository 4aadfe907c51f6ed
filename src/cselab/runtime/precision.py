"""``precision: auto``: bf16 or fp32, chosen per machine by timing the model's own matmuls.

Why a probe and not a rule: whether bf16 pays on a CPU depends on the chip, not on a flag we can read
reliably. On an AMD EPYC (Zen 4) bf16 matmuls run ~5x faster than fp32; on an Intel Xeon with AVX-512
BF16 but no AMX they ran ~2x SLOWER (issue #15). So on a CPU ``auto`` times one feed-forward matmul pair
at the shapes the run will use (tokens x hidden x intermediate) in both precisions and picks bf16 only
when it wins by :data:`BF16_MIN_SPEEDUP` (autocast's casts and the non-matmul work do not speed up, so
a marginal matmul win would be lost). The answer is cached per machine (CPU model, torch version,
threads, shapes) in ``$CSELAB_HOME/precision_probe.json`` so later runs start at once. On a GPU ``auto``
is bf16 where the GPU supports it and fp32 otherwise (fp16 needs loss scaling; it stays an explicit
choice). Every decision carries its reason, which the trainer writes into the run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from cselab.errors import CselabError
from cselab.fileio import write_json_atomic
from cselab.paths import cselab_home

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
CACHE_FILE = "precision_probe.json"
# bf16 must make the probe's matmuls at least this much faster: matmuls are ~60% of a step, and the
# autocast casts (~4% of a step) are paid whatever the matmul gain
BF16_MIN_SPEEDUP = 1.2


@dataclass(frozen=True)
class MatmulShape:
    """The probe's problem: ``tokens`` rows through a ``hidden -> intermediate -> hidden`` feed-forward pair."""

    tokens: int
    hidden: int
    intermediate: int

    @property
    def flops(self) -> int:
        return 2 * 2 * self.tokens * self.hidden * self.intermediate


@dataclass
class PrecisionChoice:
    """The precision a run uses, and why (written next to the run's config)."""

    requested: str
    precision: str
    reason: str
    probe: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Probe = Callable[[MatmulShape], dict[str, float]]


def autocast_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 (CPU or GPU) or fp16 (GPU only) autocast for the encoders; losses cast to fp32 themselves."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise CselabError("precision fp16 needs a CUDA GPU; use bf16 on CPU")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def cpu_model_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_key(shape: MatmulShape) -> str:
    """What the probe's answer depends on: chip, torch build, thread count and problem size."""
    return (f"{cpu_model_name()}|torch {torch.__version__}|threads {torch.get_num_threads()}"
            f"|{shape.tokens}x{shape.hidden}x{shape.intermediate}")


def probe_matmul(shape: MatmulShape, *, seconds: float = 0.25,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """GFLOP/s of the feed-forward matmul pair in fp32 and in bf16: the best of repeated timings on ``clock``, the
    two precisions in turn (so a busy moment slows both, and a timing slowed once is not either's best)."""
    runs = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        x = torch.randn(shape.tokens, shape.hidden, dtype=dtype)
        w_in = torch.randn(shape.intermediate, shape.hidden, dtype=dtype)
        w_out = torch.randn(shape.hidden, shape.intermediate, dtype=dtype)

        def run(x: torch.Tensor = x, w_in: torch.Tensor = w_in, w_out: torch.Tensor = w_out) -> None:
            torch.nn.functional.linear(torch.nn.functional.linear(x, w_in), w_out)

        run()  # first call allocates and picks kernels
        runs[name] = run
    best = dict.fromkeys(runs, float("inf"))
    spent = dict.fromkeys(runs, 0.0)
    while min(spent.values()) < seconds or float("inf") in best.values():
        for name, run in runs.items():
            start = clock()
            run()
            elapsed = clock() - start
            best[name], spent[name] = min(best[name], elapsed), spent[name] + elapsed
    return {name: shape.flops / best[name] / 1e9 for name in runs}


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # absent or unreadable: probe again (the cache is only a shortcut)
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a read-only home costs a probe per run, nothing else
        write_json_atomic(path, data, indent=1)


def resolve_precision(
    requested: str,
    device: torch.device,
    shape: MatmulShape,
    *,
    probe: Probe | None = None,
    cache_path: Path | None = None,
    gpu_bf16: Callable[[], bool] | None = None,
) -> PrecisionChoice:
    """The precision to run ``requested`` with on ``device``; explicit precisions are returned as given.

    ``probe`` and ``gpu_bf16`` are injectable so the decision can be tested without timing anything.
    """
    if requested != "auto":
        return PrecisionChoice(requested, requested, "set explicitly")
    if device.type == "cuda":
        supported = gpu_bf16() if gpu_bf16 is not None else torch.cuda.is_bf16_supported()
        if supported:
            return PrecisionChoice("auto", "bf16", f"GPU {device} supports bf16")
        return PrecisionChoice("auto", "fp32", f"GPU {device} has no bf16; fp16 is never picked automatically")
    if device.type != "cpu":
        return PrecisionChoice("auto", "fp32", f"no probe for device type {device.type!r}")
    cache_path = cache_path or cselab_home() / CACHE_FILE
    key = machine_key(shape)
    cache = _read_cache(cache_path)
    cached = cache.get(key)
    if isinstance(cached, dict) and {"fp32", "bf16"} <= set(cached):
        rates, source = {"fp32": float(cached["fp32"]), "bf16": float(cached["bf16"])}, f"cached in {cache_path}"
    else:
        rates, source = (probe or probe_matmul)(shape), "measured now"
        cache[key] = rates
        _write_cache(cache_path, cache)
    speedup = rates["bf16"] / rates["fp32"]
    chosen = "bf16" if speedup >= BF16_MIN_SPEEDUP else "fp32"
    verdict = "at least" if chosen == "bf16" else "below"
    reason = (f"CPU matmul probe ({source}): bf16 {rates['bf16']:.1f} vs fp32 {rates['fp32']:.1f} GFLOP/s, "
              f"{speedup:.2f}x, {verdict} the {BF16_MIN_SPEEDUP}x needed for bf16")
    return PrecisionChoice("auto", chosen, reason, {"key": key, "gflops": rates, "bf16_speedup": speedup})


def model_shape(backbone_config: Any, tokens: int) -> MatmulShape:
    """The probe shape of an HF backbone config (BERT-style names; the usual 4x ratio when absent)."""
    hidden = int(getattr(backbone_config, "hidden_size", 768))
    intermediate = int(getattr(backbone_config, "intermediate_size", 4 * hidden))
    return MatmulShape(tokens=max(1, int(tokens)), hidden=hidden, intermediate=intermediate)


def training_shape(backbone_config: Any, local_batch: int, max_length: int) -> MatmulShape:
    """The probe shape of a training step: both views of this process's share of the batch."""
    return model_shape(backbone_config, 2 * local_batch * max_length)


def backbone_config_of(module: torch.nn.Module) -> Any:
    """The HF config of the first transformer inside ``module`` (None when there is none)."""
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if config is not None and hasattr(config, "hidden_size"):
            return config
    return None


def inference_precision(requested: str, model: torch.nn.Module, batch_size: int,
                        tokens_per_row: int = 32) -> PrecisionChoice:
    """The precision ``cselab encode`` / ``eval`` run ``model`` with (``auto`` probed at the batch's shape)."""
    if requested not in PRECISIONS:
        from cselab.errors import CselabError

        raise CselabError(f"unknown precision {requested!r}; choose one of: {', '.join(PRECISIONS)}")
    device = next(model.parameters()).device
    shape = model_shape(backbone_config_of(model), batch_size * tokens_per_row)
    return resolve_precision(requested, device, shape)


PRECISION_FILE = "precision.json"  # written by the trainer into the run directory: what ran, and why


def planned_precision(config: Any) -> PrecisionChoice:
    """What ``config.train.precision`` resolves to on this machine before any model is built: the trainer's
    probe at the trainer's shapes (both views of this process's share of the batch), through the same cache."""
    requested = config.train.precision
    if requested != "auto":
        return PrecisionChoice(requested, requested, "set explicitly")
    from transformers import AutoConfig

    from cselab.paths import resolve_model_path
    from cselab.runtime.devices import pick_device

    backbone = AutoConfig.from_pretrained(resolve_model_path(config.model.backbone))
    world_size = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    shape = training_shape(backbone, max(1, config.train.batch_size // world_size), config.model.max_length)
    return resolve_precision("auto", pick_device(config.train.device), shape)


def ran_precision(directory: Path) -> str | None:
    """The precision a run directory's steps ran with (None: the directory predates ``precision.json``)."""
    try:
        return str(json.loads((Path(directory) / PRECISION_FILE).read_text())["precision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def precision_agrees(recorded_request: str | None, recorded_ran: str | None, config: Any) -> bool:
    """Whether a run that asked for ``recorded_request`` and ran ``recorded_ran`` computed in the precision
    ``config`` gets here. ``auto`` is compared by what it resolves to, so a preset moved from bf16 to auto still
    matches the runs it made with bf16 on a machine where auto picks bf16, and a run made where auto meant bf16
    does not match a machine where it means fp32. A record without the key (older cselab) is not compared."""
    ran = recorded_ran or recorded_request  # an explicit request is what ran
    if ran is None:
        return True
    if ran == "auto":  # asked for auto, but what it resolved to is unknown: cannot be shown to agree
        return False
    return planned_precision(config).precision == ran
