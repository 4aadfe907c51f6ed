"""The C allocator's settings for a process that trains and encodes on the CPU: big buffers reused, not remapped.

torch takes the memory of a CPU tensor from the C allocator (``malloc``). glibc's serves a request above its mmap
threshold with a fresh ``mmap`` and gives it back with ``munmap`` when the tensor is freed, and it gives the top of
its heap back to the kernel once more than its trim threshold is free there. A training step frees and allocates
the same large activations and gradients over and over, so each step the kernel maps and zeroes them afresh: before
these settings `make demo`'s ``cselab adapt`` took 50 million minor page faults and 16% of its CPU time in the
kernel (issue 90). The threshold starts at 128 KiB and glibc raises it only up to 32 MiB as freed mapped chunks come
back, and it trims the heap whenever 128 KiB is free at its top.

:func:`tune_allocator` fixes the mmap threshold at its largest value (32 MiB: glibc refuses more) and the trim
threshold at 256 MiB (the activation budget of a micro-batch, :mod:`cselab.runtime.memory`): every buffer up to
32 MiB is reused from the heap, and a step's activations, freed at its end, are not handed back to be faulted in
again by the next step, while at most 256 MiB of free heap is ever kept. The micro-batches keep a step's largest
tensors (a piece's attention probabilities) below 32 MiB, so they come from the heap too. It changes only where the
memory comes from, not what is computed, and it is a no-op on a C library without glibc's ``mallopt`` (musl,
macOS, Windows). The CLI calls it once as it starts; glibc's ``MALLOC_*`` environment tunables, where a user sets
them, are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from cselab.runtime.memory import ACTIVATION_BUDGET, LARGEST_HEAP_TENSOR

ONEDNN_CACHE_CAPACITY = 64  # primitives oneDNN keeps compiled (its default: 1024; see bound_onednn_cache)
M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = LARGEST_HEAP_TENSOR  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = ACTIVATION_BUDGET  # the activations one micro-batch holds
_TUNED: dict[str, int] | None = None


def tune_allocator() -> dict[str, int]:
    """Set glibc's mmap and trim thresholds (once per process); returns what was set (empty: not glibc, or the user
    set ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` / ``GLIBC_TUNABLES`` themselves)."""
    global _TUNED
    if _TUNED is not None:
        return _TUNED
    _TUNED = {}
    if any(name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")):
        return _TUNED
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return _TUNED
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc's own symbol: musl has a mallopt that does nothing
        return _TUNED
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for option, value, name in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD, "mmap_threshold"),
                                (M_TRIM_THRESHOLD, TRIM_THRESHOLD, "trim_threshold")):
        if mallopt(option, value) == 1:  # 1: set; 0: refused (the value is out of this glibc's range)
            _TUNED[name] = value
    return _TUNED


def give_back_free_memory() -> None:
    """Hand the heap's free memory back to the kernel now (glibc's ``malloc_trim``; a no-op elsewhere): after a
    phase frees much more than the trim threshold keeps, such as a teacher's export unloaded between timings, the
    next phase would otherwise find that memory still counted as the process's."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    if hasattr(libc, "gnu_get_libc_version"):
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        trim(0)


def resident_mb() -> float | None:
    """The memory the process holds now, in MiB (Linux's ``/proc/self/statm``; None elsewhere): after
    :func:`give_back_free_memory`, what the next phase of a run starts from, where ``ru_maxrss`` is only the
    high-water mark."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def bound_onednn_cache() -> int | None:
    """Keep at most :data:`ONEDNN_CACHE_CAPACITY` of oneDNN's compiled primitives (returns it; None where the user
    set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` or ``DNNL_PRIMITIVE_CACHE_CAPACITY`` themselves).

    Why: on the CPU, torch runs bf16 matmuls through oneDNN, which compiles a primitive (kernel code and its
    buffers) for every shape it meets and keeps up to 1,024 of them. A step's pieces and an encoding's batches are
    padded to their own widths, so nearly every batch brings new shapes and the cache only grows: ``make demo``'s
    command in bf16 peaked at 2,123 MB with oneDNN's default and 1,867 MB with 64 kept, its training taking 153 and
    161 s (``python -m lab.speed.adapt_footprint --case demo``, 2 AMD EPYC cores with AVX-512 bf16). The pieces of
    one step share a shape, so 64 keep what a step reuses. oneDNN reads the setting when it first compiles, so this
    must run before torch's first matmul (the CLI calls it as it starts)."""
    if any(name in os.environ for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")):
        return None
    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(ONEDNN_CACHE_CAPACITY)
    return ONEDNN_CACHE_CAPACITY
