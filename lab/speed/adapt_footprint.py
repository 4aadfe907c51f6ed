"""What `cselab adapt` costs the machine: peak memory, user and system time, minor page faults and each phase's wall
time, for `make demo`'s command and for the default on 10,000 and 1,000,000 lines, one run at a time.

Each case runs ``cselab adapt`` under ``/usr/bin/time -v`` (the kernel's accounting of the whole command: its peak
resident set, user and system seconds, minor faults) in a fresh data home whose fetched models, domains, STS sets and
corpus are links to the current home's, so every run starts as a new user's does: no teacher vectors, no kept
teacher's way, no exports. ``adapt.json`` gives each phase's wall time and the micro-batch the run chose. The record
also says the CPU (lscpu's model name) and the load average at the start and the end: other developers' jobs may
share the cores, and a busy minute shows there.

    python -m lab.speed.adapt_footprint --case demo                       # make demo's adapt command (~5 min)
    python -m lab.speed.adapt_footprint --case lines-10000                # the default on 10,000 lines (12-18 min)
    python -m lab.speed.adapt_footprint --case lines-1000000              # the default on 1,000,000 lines
    python -m lab.speed.adapt_footprint --case demo --no-teacher          # --no-teacher (SimCSE)
    # the code before a change: the same benchmark with another checkout's package first on the path
    PYTHONPATH=/tmp/base/src:. python -m lab.speed.adapt_footprint --case demo

The lines cases number the fetched corpus into N distinct lines (lab.domain_study.time_adapt's text), unscored.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.record import RESULTS_DIR, RUNS_DIR, append_record

RESULTS = RESULTS_DIR / "adapt_footprint.jsonl"
DEMO = {"domain": "linux-man", "max_sentences": 2000, "steps": 80}  # the Makefile's DEMO_* values
LINKED = ("models", "domains", "sts", "corpus")  # what `cselab data fetch` put in the home; nothing cselab adapt made
TIME_FIELDS = {  # /usr/bin/time -v's line -> the record's key
    "Maximum resident set size (kbytes)": "peak_rss_kb",
    "User time (seconds)": "user_s",
    "System time (seconds)": "system_s",
    "Minor (reclaiming a frame) page faults": "minor_faults",
    "Major (requiring I/O) page faults": "major_faults",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "elapsed",
    "Voluntary context switches": "voluntary_switches",
    "Involuntary context switches": "involuntary_switches",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", required=True,
                        help="demo, or lines-N (the default on N numbered corpus lines); repeat to run several, "
                             "one after another")
    parser.add_argument("--no-teacher", action="store_true", help="cselab adapt --no-teacher")
    parser.add_argument("--max-sentences", type=int, help="the demo case with fewer lines than make demo's 2,000 "
                        "(every phase runs at the same shapes: its peak memory, not its time)")
    parser.add_argument("--steps", type=int, help="the demo case with fewer steps than make demo's 80")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-home", action="store_true", help="run in the current data home, not a fresh one")
    parser.add_argument("--output", type=Path, default=RUNS_DIR / "adapt-footprint", help="run directories (replaced)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--snapshot", type=int, metavar="PID", help="record a running cselab adapt's counts so far "
                        "(partial) instead of running one")
    parser.add_argument("--note", default="", help="--snapshot: how far the run had come")
    args = parser.parse_args(argv)
    for case in args.case:
        if case != "demo" and not re.fullmatch(r"lines-[1-9]\d*", case):
            parser.error(f"--case {case}: give demo or lines-N")
    return args


def parse_time_v(text: str) -> dict[str, float | int | str]:
    """The fields of ``/usr/bin/time -v``'s report that the record keeps (memory in MB, the wall in seconds)."""
    found: dict[str, float | int | str] = {}
    for line in text.splitlines():
        name, _, value = line.strip().rpartition(": ")
        if name in TIME_FIELDS:
            found[TIME_FIELDS[name]] = value.strip()
    missing = sorted(set(TIME_FIELDS.values()) - set(found))
    if missing:
        raise ValueError(f"/usr/bin/time -v's report lacks {missing}")
    parts = [float(p) for p in str(found.pop("elapsed")).split(":")]
    wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return {"peak_rss_mb": round(int(found.pop("peak_rss_kb")) / 1024, 1), "user_s": float(found["user_s"]),
            "system_s": float(found["system_s"]), "minor_faults": int(found["minor_faults"]),
            "major_faults": int(found["major_faults"]), "voluntary_switches": int(found["voluntary_switches"]),
            "involuntary_switches": int(found["involuntary_switches"]), "command_s": round(wall, 2)}


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"^Model name:\s*(.+)$", out, re.M)
    return match.group(1).strip() if match else "unknown"


def fresh_home(current: Path, root: Path) -> Path:
    """A data home holding links to ``current``'s fetched data and nothing cselab adapt keeps between runs."""
    home = root / "home"
    home.mkdir(parents=True)
    for name in LINKED:
        if (current / name).exists():
            (home / name).symlink_to((current / name).resolve())
    return home


def case_command(case: str, args: argparse.Namespace, home: Path, run_dir: Path, scratch: Path) -> list[str]:
    command = [sys.executable, "-m", "cselab.cli", "adapt"]
    if case == "demo":
        text = home / "domains" / DEMO["domain"] / "train.txt"
        command += [str(text), "--domain", DEMO["domain"],
                    "--max-sentences", str(args.max_sentences or DEMO["max_sentences"]),
                    "--steps", str(args.steps or DEMO["steps"])]
    else:
        from lab.domain_study.time_adapt import numbered_corpus

        lines = int(case.split("-", 1)[1])
        command += [str(numbered_corpus(lines, scratch / f"corpus-{lines}.txt"))]
    command += ["--output", str(run_dir), "--seed", str(args.seed)]
    return command + (["--no-teacher"] if args.no_teacher else [])


def phases_of(summary: dict) -> dict[str, float]:
    """Each phase's wall seconds as adapt.json gives them (``phases`` where the run writes it, else the older keys)."""
    if isinstance(summary.get("phases"), dict):
        return {k: float(v) for k, v in summary["phases"].items()}
    return {k: float(summary[k]) for k in ("teacher_s", "train_s", "evaluate_s", "serving_s", "estimate_s")
            if summary.get(k) is not None}


def run_case(case: str, args: argparse.Namespace) -> dict:
    from cselab.paths import cselab_home

    run_dir = args.output / (case + ("-no-teacher" if args.no_teacher else ""))
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="adapt-footprint-") as tmp:
        scratch = Path(tmp)
        home = cselab_home() if args.keep_home else fresh_home(cselab_home(), scratch)
        command = case_command(case, args, home, run_dir, scratch)
        time_log = scratch / "time-v.txt"
        print("$ " + " ".join(command), flush=True)
        load_start = os.getloadavg()
        code = subprocess.run(["/usr/bin/time", "-v", "-o", str(time_log), *command],
                              env={**os.environ, "CSELAB_HOME": str(home)}).returncode
        load_end = os.getloadavg()
        if code:
            sys.exit(f"error: cselab adapt exited with {code} (its message is above); nothing recorded")
        measured = parse_time_v(time_log.read_text(encoding="utf-8"))
    summary = json.loads((run_dir / "adapt.json").read_text(encoding="utf-8"))
    from cselab.fileio import sha256_file

    weights = run_dir / "model" / "model.safetensors"  # two runs of one command: the same handed-back weights
    cpu_s = measured["user_s"] + measured["system_s"]
    return {
        "case": case, "no_teacher": args.no_teacher, "seed": args.seed, "fresh_home": not args.keep_home,
        **measured, "system_share": round(measured["system_s"] / cpu_s, 4) if cpu_s else None,
        "phases_s": phases_of(summary), "wall_s": summary.get("wall_s"),
        "peak_rss_mb_by_phase": summary.get("peak_rss_mb"), "usage_by_phase": summary.get("phase_usage"),
        "model_sha256": sha256_file(weights) if weights.is_file() else None,
        "micro_batch": summary.get("micro_batch"), "recipe": summary.get("recipe"), "steps": summary.get("steps"),
        "sentences": summary.get("sentences"), "train_sentences": summary.get("train_sentences"),
        "before": summary.get("before"), "after": summary.get("after"),
        "teacher_scores": summary.get("teacher_scores"), "teacher_way": summary.get("teacher_way"),
        "cpu_model": cpu_name(), "cpu_count": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in load_start], "loadavg_end": [round(x, 2) for x in load_end],
        "adapt_command": " ".join(command[1:]),
    }


def snapshot(pid: int) -> dict:
    """What the kernel says of a running ``cselab adapt`` process so far: its peak resident set (VmHWM), minor
    faults, user and system seconds (a run that cannot finish in time is recorded this far, marked partial)."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    hwm = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))
    user, system = int(stat[11]) / ticks, int(stat[12]) / ticks  # fields 14 and 15 of proc(5), after the name
    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    return {"partial": True, "pid": pid, "peak_rss_mb": round(hwm / 1024, 1), "minor_faults": int(stat[7]),
            "user_s": user, "system_s": system, "system_share": round(system / (user + system), 4),
            "cpu_model": cpu_name(), "cpu_count": os.cpu_count(),
            "loadavg_end": [round(x, 2) for x in os.getloadavg()], "adapt_command": command}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.snapshot:
        record = {"case": args.case[0], "note": args.note, **snapshot(args.snapshot)}
        print(f"{record['case']} so far: peak {record['peak_rss_mb']:,.0f} MB, {record['minor_faults']:,} minor "
              f"faults, {100 * record['system_share']:.1f}% system")
        append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)
        return
    for case in args.case:  # one at a time: two runs side by side would share the cores and the memory
        start = time.perf_counter()
        record = run_case(case, args)
        print(f"{case}: peak {record['peak_rss_mb']:,.0f} MB, {record['user_s']:.0f} s user, "
              f"{record['system_s']:.0f} s system ({100 * (record['system_share'] or 0):.1f}%), "
              f"{record['minor_faults']:,} minor faults, {record['command_s']:.0f} s wall "
              f"({time.perf_counter() - start:.0f} s with the setup); load {record['loadavg_start']} -> "
              f"{record['loadavg_end']}")
        append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
