"""Trained models scored on every domain of the suite, not only the one they were trained or selected for.

The domain study (`run_domains.py`) scores a model adapted on one domain on that domain's task and on STS-B test.
That cannot say whether a method generalises. This script scores a model on the main task of all four domains
(`cselab data fetch domains`), one record per model in ``lab/results/suite.jsonl``:

- ``--domain-run DOMAIN/CONFIGURATION-sSEED``: a run of the domain study, read from its run directory
  (``runs/domains/...``; the model the run hands its user, its weight mix when its mix is below 1): the model
  adapted on one domain, scored on the other three as well;
- ``--protocol-row ROW``: a row of the adaptation protocol (`lab/adapt_protocol/run_adapt.sh`, trained on STS-B's
  text and selected on STS-B dev); it is trained again into ``runs/adapt/ROW`` when that directory has no model, and the
  rebuilt run's own record goes to ``lab/results/protocol_rebuilt.jsonl`` (not the protocol's table);
  ``ROW+uc-OUTSIDE`` is that row's +UC ensemble with the outside checkpoint OUTSIDE (a name in
  ``$CSELAB_HOME/models``), built by ``adapt_uc.py`` with ``w`` chosen on STS-B dev when it is not saved yet (its
  record goes to a scratch file beside the runs, so the protocol's table gets no second copy);
- ``--model NAME=PATH``: any other model directory.

Every model is scored as the study scores it: mteb through cselab's domain evaluation, fp32, at 256 tokens per text
(the checkpoint's own; ``--eval-max-length``). Scores of the untouched checkpoint come from the study's records,
which were made the same way. Resumable: a model name already in the results file is skipped.

    python -m lab.domain_study.score_suite --domain-run bbc-news/cselab-simcse-s1 --protocol-row simcse-indomain-auto
    python -m lab.domain_study.score_suite --table   # the table of the records
                                                     # (python -m lab.render writes it into the docs)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cselab.data.evalsets.domains import DOMAINS, get_domain  # noqa: E402
from cselab.data.stores.jsonl import Schema, mapping, number, read_jsonl, text  # noqa: E402
from cselab.fileio import write_atomic  # noqa: E402
from cselab.training.run_directory import STAGE2_DIR, selected_model_dir  # noqa: E402
from lab.adapt_protocol.adapt_uc import ensemble_dir
from lab.domain_study.domain_peers import saved_model
from lab.domain_study.study import CONFIGURATION, LARGER, REFERENCE, read_domain_records
from lab.record import ADAPT_RESULTS, RESULTS_DIR, ROOT, append_record

RESULTS = RESULTS_DIR / "suite.jsonl"
STUDY = RESULTS_DIR / "domains.jsonl"
REBUILT = RESULTS_DIR / "protocol_rebuilt.jsonl"
PROTOCOL_RECORDS = (ADAPT_RESULTS, REBUILT)  # where a row's run is recorded
UC = "+uc-"
DOMAIN_RUNS = ROOT / "runs" / "domains"
PROTOCOL_RUNS = ROOT / "runs" / "adapt"
SUITE_RECORD = Schema("suite", {"model": text(empty=False), "scores": mapping(number())},
                      required=("model", "origin", "scores"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain-run", action="append", default=[], metavar="DOMAIN/CONFIGURATION-sSEED")
    parser.add_argument("--protocol-row", action="append", default=[], metavar="ROW")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated (default: the whole suite)")
    parser.add_argument("--eval-max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--study", type=Path, default=STUDY, help="the domain study's records (the checkpoint row)")
    parser.add_argument("--domain-runs", type=Path, default=DOMAIN_RUNS)
    parser.add_argument("--protocol-runs", type=Path, default=PROTOCOL_RUNS)
    parser.add_argument("--table", action="store_true", help="print the records as a Markdown table and exit")
    return parser.parse_args(argv)


def read_suite_records(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path, SUITE_RECORD) if path.is_file() else []


def domain_run_model(spec: str, runs: Path, *, handed_back: bool = False) -> tuple[str, Path, dict[str, Any]]:
    """``DOMAIN/CONFIGURATION-sSEED`` -> (name, model directory, origin): the run's selected model, or with
    ``handed_back`` the model it hands its user (:func:`~lab.domain_study.domain_peers.saved_model`)."""
    domain, _, run = spec.partition("/")
    configuration, _, seed = run.rpartition("-s")
    if not domain or not configuration or not seed.isdigit():
        raise SystemExit(f"--domain-run {spec!r}: expected DOMAIN/CONFIGURATION-sSEED, e.g. bbc-news/cselab-simcse-s1")
    run_dir = runs / domain / run
    path = saved_model(run_dir, configuration, handed_back=handed_back)
    if not path.is_dir():
        raise SystemExit(f"--domain-run {spec!r}: no model at {path}")
    return spec, path, {"kind": "domain-run", "domain": domain, "configuration": configuration, "seed": int(seed)}


def protocol_model(row: str, runs: Path, echo: Any,
                   records: tuple[Path, ...] = PROTOCOL_RECORDS) -> tuple[str, Path, dict[str, Any]]:
    """A protocol row's selected model, trained again by ``run_adapt.sh`` when its run directory has none; for
    ``ROW+uc-OUTSIDE``, that row's +UC ensemble (:func:`protocol_ensemble`)."""
    base, uc, outside = row.partition(UC)
    if uc:
        return protocol_ensemble(base, outside, runs, echo, records)
    path = selected_model_dir(runs / row)
    if not path.is_dir():
        echo(f"{row}: no model at {path}; training the row again (lab/adapt_protocol/run_adapt.sh {row})")
        env = {**os.environ, "RESULTS": str(REBUILT), "FORCE": "1"}  # the model is gone even if a record is not
        done = subprocess.run(["bash", str(ROOT / "lab" / "adapt_protocol" / "run_adapt.sh"), row], cwd=ROOT, env=env)
        path = selected_model_dir(runs / row)
        if done.returncode != 0 or not path.is_dir():
            raise SystemExit(f"{row}: run_adapt.sh failed (exit {done.returncode}) or left no model at {path}")
    return f"protocol/{row}", path, {"kind": "protocol-row", "row": row, "corpus": _training_text(runs / row)}


def protocol_ensemble(row: str, outside: str, runs: Path, echo: Any,
                      records: tuple[Path, ...] = PROTOCOL_RECORDS) -> tuple[str, Path, dict[str, Any]]:
    """The row's model combined with ``outside`` as ``adapt_uc.py`` combines it (the papers' weighted sum, ``w``
    chosen on STS-B dev), built when it is not saved beside the row's run yet. ``adapt_uc.py`` reads the row's
    record, so it is given the protocol's records (``records``, later files winning) copied into a scratch file,
    and the +UC record it appends stays there."""
    _, model, origin = protocol_model(row, runs, echo, records)
    target = ensemble_dir(model.parent, outside)  # the row's train.output_dir holds `best`
    if not target.is_dir():
        echo(f"{row}{UC}{outside}: no ensemble at {target}; building it (lab/adapt_protocol/adapt_uc.py {row})")
        scratch = runs / "uc-scratch.jsonl"
        texts = [p.read_text(encoding="utf-8") for p in records if p.is_file()]
        write_atomic(scratch, "".join(t if t.endswith("\n") else t + "\n" for t in texts if t))
        done = subprocess.run([sys.executable, "-m", "lab.adapt_protocol.adapt_uc", row, "--outside", outside,
                               "--results", str(scratch)], cwd=ROOT, env={**os.environ, "FORCE": "1"})
        if done.returncode != 0 or not target.is_dir():
            raise SystemExit(f"{row}{UC}{outside}: adapt_uc.py failed (exit {done.returncode}) or left no "
                             f"ensemble at {target}")
    return (f"protocol/{row}{UC}{outside}", target,
            {**origin, "row": f"{row}{UC}{outside}", "ensemble_of": row, "outside": outside})


def _training_text(run_dir: Path) -> str | None:
    """The ``data.corpus`` a protocol row trained on, from its run record (a two-stage row's under ``stage2``)."""
    for results in (run_dir / "results.json", run_dir / STAGE2_DIR / "results.json"):
        if results.is_file():
            return json.loads(results.read_text(encoding="utf-8"))["config"]["effective"]["data"]["corpus"]
    return None


def _protocol_text(corpus: str | None) -> str:
    """What a protocol row trained on, in words: its rows without the field trained on STS-B's train text."""
    words = {None: "STS-B train text", "parallel-de": "English-German parallel text"}
    text = words.get(corpus) or ("STS-B train text" if corpus.startswith("stsb-train") else corpus)
    return f"{text}, selected on STS-B dev"


def path_origin(model_dir: Path) -> dict[str, Any]:
    """The origin of a model given by its directory: its ``cselab.json`` (an ensemble's members, weights and combine
    mode; a trained model's method and config) when it has one, so the record says what was scored."""
    from cselab.models.sentence_model import read_description

    description = read_description(model_dir)
    return {"kind": "path"} if description is None else {"kind": "path", "description": description}


def score_on_suite(model_dir: Path, eval_max_length: int, inputs: dict[str, Any]) -> dict[str, float]:
    """Each domain's main score for one model directory (``inputs``: domain -> its loaded task inputs)."""
    from cselab.evaluation.domain import score_inputs
    from cselab.models.sentence_model import load_model

    model = load_model(str(model_dir), max_length=eval_max_length)
    scores = {}
    for domain, domain_inputs in inputs.items():
        task = get_domain(domain).main_task
        scores[domain] = score_inputs(model, domain_inputs, tasks=[task])[task]
    return scores


def untouched_scores(study: list[dict[str, Any]], configuration: str = REFERENCE) -> dict[str, float]:
    """Each domain's main score of an untouched model (the checkpoint or the larger model) from the study's records."""
    return {r["domain"]: float(r["main_score"]) for r in study if r["configuration"] == configuration}


def _row(name: str, trained: str, scores: dict[str, float], checkpoint: dict[str, float], domains: list[str],
         own: str | None, compare: bool = True) -> str:
    """One table row: each score (own domain marked *), its difference from the checkpoint's, and the mean of the
    differences over the domains that are not the model's own."""
    cells, deltas = [], []
    for d in domains:
        if d not in scores:
            cells.append("-")
            continue
        delta = scores[d] - checkpoint[d] if compare and d in checkpoint else None
        cells.append(f"{scores[d]:.2f}{'*' if d == own else ''}" + (f" ({delta:+.2f})" if delta is not None else ""))
        if delta is not None and d != own:
            deltas.append(delta)
    mean = f"{sum(deltas) / len(deltas):+.2f} ({len(deltas)})" if deltas else "-"
    return f"| {name} | {trained} | " + " | ".join(cells) + f" | {mean} |"


def render_table(records: list[dict[str, Any]], checkpoint: dict[str, float],
                 larger: dict[str, float] | None = None) -> str:
    """One row per model: each domain's main score and its difference from the checkpoint's (the domain the model
    was trained on is marked *), and the mean difference over the domains it was NOT trained on; ``larger``, the
    untouched larger model's scores, is shown for scale."""
    domains = [d for d in DOMAINS if any(d in r["scores"] for r in records)]
    head = ["model", "trained on", *(f"{d} ({get_domain(d).main_task})" for d in domains),
            "mean vs checkpoint, other domains (n)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
             _row(CONFIGURATION[REFERENCE].label, "-", checkpoint, checkpoint, domains, None, compare=False)]
    if larger:
        lines.append(_row(CONFIGURATION[LARGER].label, "-", larger, checkpoint, domains, None))
    for r in records:
        kind = r["origin"]["kind"]
        own = {"domain-run": r["origin"].get("domain"), "protocol-row": "stsb"}.get(kind)
        trained = {"domain-run": own, "protocol-row": _protocol_text(r["origin"].get("corpus"))}.get(kind, "-")
        lines.append(_row(r["model"], trained, r["scores"], checkpoint, domains, own))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.table:
        study = read_domain_records(args.study)
        table = render_table(read_suite_records(args.results), untouched_scores(study), untouched_scores(study, LARGER))
        print(table)
        return
    import torch

    from cselab.evaluation.domain import load_inputs

    if args.threads:
        torch.set_num_threads(args.threads)
    echo = lambda line: print(line, flush=True)  # noqa: E731
    domains = tuple(d for d in args.domains.split(",") if d)
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise SystemExit(f"--domains: unknown {', '.join(unknown)}; the suite's domains: {', '.join(DOMAINS)}")
    models: list[tuple[str, Any]] = []
    for spec in args.domain_run:
        # what the run hands its user; every spec is checked before anything is scored
        found = domain_run_model(spec, args.domain_runs, handed_back=True)
        models.append((spec, lambda f=found: f))
    for row in args.protocol_row:
        models.append((f"protocol/{row}", lambda r=row: protocol_model(r, args.protocol_runs, echo)))
    for spec in args.model:
        name, sep, path = spec.partition("=")
        if not sep or not name or not Path(path).is_dir():
            raise SystemExit(f"--model {spec!r}: expected NAME=PATH with PATH a model directory")
        models.append((name, lambda n=name, p=path: (n, Path(p), path_origin(Path(p)))))
    done = {r["model"] for r in read_suite_records(args.results)}
    inputs: dict[str, Any] = {}
    for i, (name, resolve) in enumerate(models, 1):
        if name in done:
            echo(f"[{i}/{len(models)}] {name}: recorded, skipped")
            continue
        inputs = inputs or {domain: load_inputs(domain=domain) for domain in domains}  # once, and only if scoring
        name, path, origin = resolve()
        start = time.perf_counter()
        scores = score_on_suite(path, args.eval_max_length, inputs)
        record = {"model": name, "path": str(path), "origin": origin, "scores": scores,
                  "tasks": {domain: get_domain(domain).main_task for domain in scores},
                  "eval_max_length": args.eval_max_length, "threads": torch.get_num_threads(),
                  "eval_s": round(time.perf_counter() - start, 1)}
        append_record(args.results, record, __file__, argv)
        echo(f"[{i}/{len(models)}] {name}: " + ", ".join(f"{d} {s:.2f}" for d, s in scores.items())
             + f" ({record['eval_s']:.0f} s)")


if __name__ == "__main__":
    main()
