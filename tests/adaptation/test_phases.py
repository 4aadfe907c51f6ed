"""What adapt.json says of each phase (`Phases`): its wall time (a phase run twice adds up), the peak and the memory
held at its end, and its own CPU time and minor page faults, checked against what the kernel reports elsewhere."""

import sys
import time

import pytest

from cselab.adaptation.run import Phases

PAGES = 16_384  # a 64 MiB array of fresh pages


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _touch_fresh_pages() -> int:
    block = bytearray(PAGES * 4096)  # above the mmap threshold: mapped afresh (numpy would ask for huge pages)
    block[::4096] = b"\x01" * PAGES  # one byte a page: each page faulted in once
    return sum(block[::4096])


def _vm_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    raise AssertionError("no VmRSS line")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_each_run_of_a_phase_records_its_own_time_memory_and_faults():
    phases = Phases()
    phases.timed("busy", _busy, 0.3)
    phases.timed("pages", _touch_fresh_pages)
    phases.timed("busy", _busy, 0.2)
    assert [u["phase"] for u in phases.usage] == ["busy", "pages", "busy"]
    assert phases.seconds["busy"] >= 0.5 and set(phases.seconds) == {"busy", "pages"}  # two runs add up
    assert phases.usage[0]["user_s"] + phases.usage[0]["system_s"] >= 0.25
    assert phases.usage[1]["minor_faults"] >= 0.9 * PAGES  # the array's pages, each faulted in once
    assert phases.usage[0]["minor_faults"] < PAGES / 4  # a busy loop touches no new memory
    held = phases.peak_rss_mb[-1]["held_mb"]
    assert abs(held - _vm_rss_mb()) < 16  # the kernel's own count of the pages held, from another file
    assert all(p["mb"] >= p["held_mb"] for p in phases.peak_rss_mb)  # the high-water mark is never below
    assert phases.peak_rss_mb[1]["mb"] >= phases.peak_rss_mb[0]["held_mb"] + 0.9 * PAGES * 4096 / 2**20
