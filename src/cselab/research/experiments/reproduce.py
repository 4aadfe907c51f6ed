"""``cselab reproduce METHOD --backbone B [--seeds 1,2,3]``: a paper's row in one command.

One orchestrator, :func:`reproduce`, runs the command and ``cselab.reproduce()`` alike:

1. **Plan** (:func:`plan_reproduction`; nothing read but the preset and the backbone's config, nothing written): the
   method comes from the registry (``cselab.methods.METHODS``: its class declares its preset folder, aliases,
   views and template tokens), its preset for the backbone (``paper-bert-base``, ``paper-roberta-base``; any other
   backbone trains on the ``cpu-minilm`` preset with ``model.backbone`` set), with the preset's placeholders for the
   papers' data replaced by what cselab fetches: ``data/wiki1m_for_simcse.txt`` -> ``cselab data fetch wiki1m``,
   ``data/wiki1m+sickr.txt`` -> ``wiki1m-sickr``, the TNCSE/JTCSE stage-1 files ``*.rtt-XX.txt`` -> ``cselab data
   rtt`` of that text, IFCL's German side -> its translation. Every argument, the whole configuration (validated
   once, into ``plan.config``: the method's options, its batch size, every stage), a local backbone's config and the
   output directory (new, empty or a reproduction's) are checked here. The STS data is SentEval's
   (``--senteval-dir``, or ``cselab data fetch senteval``), or the partial sets cselab builds (marked as partial).
2. **Describe** (:func:`describe`): what the plan will do, said in lines.
3. **Prepare** (:func:`prepare`): fetch and translate what is missing (never under torchrun: prepare first), check
   a fetched backbone's config, then write ``OUT/config.yaml`` (and OUT's marker).
4. **Estimate** (:func:`estimate_seconds`): training and scoring FLOPs over this machine's measured matmul rate,
   said before the first step.
5. **Run** (:func:`run_reproduction`): ``cselab seeds`` over the seeds (recorded seeds are skipped and a seed's run
   that a kill left resumes, so the same command continues), each selected model scored on the seven tasks in
   SentEval's "all" setting, and the comparison rows: the paper's figure (:mod:`cselab.research.paper_figures`), our
   mean and sample std over the seeds, and the difference where the sets are the same.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cselab.errors import CselabError, UsageError
from cselab.reporter import report
from cselab.research.paper_figures import PaperRow, paper_backbones, paper_row, paper_tasks

PAPER_PRESETS = {"bert-base-uncased": "paper-bert-base", "roberta-base": "paper-roberta-base"}
OTHER_BACKBONE_PRESET = "cpu-minilm"
STS_MODES = ("auto", "senteval", "partial")
# the papers' data as the presets name it -> the paper target that provides it
PAPER_CORPORA = {"data/wiki1m_for_simcse.txt": "wiki1m", "data/wiki1m+sickr.txt": "wiki1m-sickr"}
# cselab's named corpora -> (fetch target, its options)
NAMED_CORPUS_TARGETS = {"default": ("corpus", {}), "default+stsb-train": ("corpus", {"include_stsb_train": True}),
                        "parallel-de": ("parallel-de", {}), "parallel-de.en": ("parallel-de", {})}
_RTT_NAME = re.compile(r"\.rtt-([A-Za-z_]+)\.txt$")
_TRANSLATION_NAME = re.compile(r"\.([A-Za-z_]{2,3})\.txt$")
# the published partial sizes of the sets cselab rebuilds from STS-B (data/evalsets/sts.py), against SentEval's
FULL_TASK_OF_PART = {"sts12-part": "sts12", "sts13-part": "sts13", "sts14-part": "sts14", "sts15-part": "sts15",
                     "sts16-part": "sts16"}
MAX_SEED = 2**63 - 1  # the largest seed torch's generators take as a signed 64-bit number
OUTPUT_MARKER = ".cselab-reproduce"  # written when cselab reproduce first writes OUT: the directory is cselab's
CONFIG_HEADER = "# written by `cselab reproduce "
# the fraction of the measured matmul rate a training step reaches (attention, optimizer, data), set from the CPU
# runs of the lab's protocol (all-MiniLM-L6-v2, 300 steps); the estimate is rough (x2 either way)
TRAIN_EFFICIENCY = 0.8
KNOWN_SHAPES = {"bert-base-uncased": (12, 768, 3072), "roberta-base": (12, 768, 3072)}


@dataclass
class ReproducePlan:
    """What a reproduction will do (see the module docstring)."""

    method: str
    backbone: str
    preset: str
    seeds: list[int]
    out_dir: Path
    raw: dict[str, Any]  # the effective configuration, as written to OUT/config.yaml
    fetch: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (target, options)
    rtt: list[tuple[Path, str, Path]] = field(default_factory=list)  # (text, language, round-trip file)
    translations: list[tuple[Path, str, Path]] = field(default_factory=list)  # (text, language, translation)
    rtt_models: dict[str, str] = field(default_factory=dict)
    senteval_dir: Path | None = None
    sts_mode: str = "auto"
    paper: PaperRow | None = None
    notes: list[str] = field(default_factory=list)
    config: Any = None  # raw validated (a RunConfig), once, when the plan is made
    views: int = 2  # the method's forward passes per sentence and step, and its template's tokens (the estimate)
    template_tokens: int = 0

    @property
    def config_file(self) -> Path:
        return self.out_dir / "config.yaml"

    @property
    def results_file(self) -> Path:
        return self.out_dir / "seeds.jsonl"

    @property
    def partial(self) -> bool:
        return self.senteval_dir is None


@dataclass
class ComparisonRow:
    """One line of the table: the paper's task, its figure, ours over the seeds (and on which set)."""

    task: str  # the paper's name (STS12 ... SICK-R, Avg.) or ours only (STS17-en)
    paper: float | None
    ours: float | None  # mean over the seeds
    std: float | None  # sample std over the seeds (None for one seed)
    seeds: int
    our_set: str  # the set we scored: the same name, or e.g. "STS12-part (partial)"
    comparable: bool  # the same set on both sides

    @property
    def difference(self) -> float | None:
        return round(self.ours - self.paper, 2) if self.comparable and None not in (self.ours, self.paper) else None


@dataclass
class ReproduceResult:
    plan: ReproducePlan
    scores: dict[int, dict[str, float]]  # seed -> task -> test score ("all")
    rows: list[ComparisonRow]
    estimate_s: float | None
    wall_s: float


def method_class(method: str) -> Any:
    """The registered method ``method`` names (its name or one of its aliases) that declares a preset folder."""
    from cselab.methods import METHODS

    found = METHODS.resolve(method)
    if found is None:
        raise UsageError(f"unknown method {method!r}; reproduce one of: {', '.join(METHODS.reproducible())}")
    return found


def canonical_method(method: str) -> str:
    return str(method_class(method).name)


def check_seeds(seeds: Any) -> list[int]:
    """The seeds as a list: at least one, distinct, whole numbers from 0 to 2^63-1 (``--seeds``' rules)."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, (list, tuple)) or \
            not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"seeds: {seeds!r} is not a list of whole numbers")
    if not seeds:
        raise UsageError("--seeds: give at least one seed (e.g. --seeds 1,2,3)")
    if len(set(seeds)) != len(seeds) or any(s < 0 or s > MAX_SEED for s in seeds):
        shown = ", ".join(str(s) for s in seeds[:5]) + (", ..." if len(seeds) > 5 else "")
        raise UsageError(f"--seeds: give distinct whole numbers from 0 to 2^63-1, got [{shown}]")
    return list(seeds)


def check_rtt_models(models: Any) -> dict[str, str]:
    """Translation models by direction, ``{'en-fr': DIR_OR_NAME}``, checked by ``--rtt-models``' rules: each key
    SRC-TGT, each model a non-empty name or directory."""
    if not isinstance(models, Mapping):
        raise UsageError("rtt_models: give a mapping of 'SRC-TGT' to a model name or directory")
    out = {}
    for key, value in models.items():
        src, dash, tgt = key.partition("-") if isinstance(key, str) else ("", "", "")
        name = str(value).strip() if isinstance(value, (str, os.PathLike)) else ""
        if not (dash and src.strip() and tgt.strip() and "-" not in tgt and name):
            raise UsageError(f"--rtt-models {key!r}: give SRC-TGT=MODEL pairs, e.g. en-fr=Helsinki-NLP/opus-mt-en-fr,"
                             "fr-en=/models/opus-mt-fr-en")
        out[f"{src.strip()}-{tgt.strip()}"] = name
    return out


def plan_reproduction(method: str, backbone: str = "bert-base-uncased", *, seeds: list[int] | None = None,
                      preset: str | None = None, overrides: list[str] | None = None, out_dir: str | Path | None = None,
                      senteval_dir: str | Path | None = None, sts: str = "auto",
                      rtt_models: dict[str, str] | None = None, home: Path | None = None) -> ReproducePlan:
    """The plan of a reproduction, every part of it checked (nothing is fetched, trained or written): the seeds,
    the options, the output directory, the whole configuration (validated, the method's options and batch size
    too) and, where it is on this machine, the backbone's own config."""
    from cselab.config.run_config import apply_overrides, read_yaml
    from cselab.paths import MODEL_NAMES, cselab_home

    cls = method_class(method)
    method = cls.name
    seeds = check_seeds([1] if seeds is None else seeds)
    if sts not in STS_MODES:
        raise UsageError(f"--sts {sts!r}: choose one of {', '.join(STS_MODES)}")
    if sts == "partial" and senteval_dir is not None:
        raise UsageError("--sts partial and --senteval-dir contradict each other; drop one")
    rtt_models = check_rtt_models(rtt_models or {})
    home = Path(home) if home is not None else cselab_home()
    notes: list[str] = []
    preset, preset_file = _preset_for(cls, backbone, preset)
    raw = read_yaml(preset_file)
    if raw.get("method") != method:
        raise UsageError(f"preset {preset} trains {raw.get('method')!r}, not {method!r}")
    raw.setdefault("model", {})["backbone"] = backbone
    raw = apply_overrides(raw, list(overrides or []))  # the user's overrides win (model.backbone=DIR: a local copy)
    paper = paper_row(method, backbone)
    if paper is None:
        paper = paper_row(method, "bert-base-uncased")
        notes.append(f"the papers report no {backbone} row: the paper column is {method} on bert-base-uncased, "
                     "another backbone than ours" if paper is not None else
                     f"no paper's figures are kept for {method}: the table has ours only")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", backbone.strip("/").rsplit("/", 1)[-1])
    folder = Path(str(cls.preset_dir)).name
    out = Path(out_dir) if out_dir is not None else Path("runs") / "reproduce" / f"{folder}-{slug}"
    check_output_dir(out)
    for section in ("model", "data", "train", "method_options"):  # before the plan reads into them
        if not isinstance(raw.get(section, {}), dict):
            raise CselabError(f"config: {section}: {raw[section]!r} is not a section")
    raw.setdefault("train", {})["output_dir"] = str(out / "run")
    options = raw.get("method_options")
    pipeline = options.get("pipeline") if isinstance(options, dict) else None
    if isinstance(pipeline, dict) and pipeline.get("stage1_dir"):
        pipeline["stage1_dir"] = str(out / "stage1")
    plan = ReproducePlan(method, backbone, preset, seeds, out, raw, rtt_models=rtt_models,
                         sts_mode=sts, paper=paper, notes=notes, views=int(cls.views),
                         template_tokens=int(cls.template_tokens))
    _plan_data(plan, home)
    plan.config = check_configuration(plan.raw, cls)
    model_backbone = plan.config.model.backbone
    if model_backbone in MODEL_NAMES.values():
        plan.fetch.append((next(k for k, v in MODEL_NAMES.items() if v == model_backbone), {}))
    else:
        check_backbone(model_backbone, local_only=True)  # a name to download or fetch is checked once it is here
    _plan_sts(plan, home, Path(senteval_dir) if senteval_dir is not None else None)
    return plan


def _preset_for(cls: Any, backbone: str, preset: str | None) -> tuple[str, Path]:
    """The preset's name and file: the one named, else the method's paper preset for a paper backbone (refused where
    the paper reports no row of it), else its CPU preset with this backbone."""
    from cselab.config.presets import preset_path

    if preset is not None:
        return preset, preset_path(preset)
    method = cls.name
    if backbone in PAPER_PRESETS:
        if backbone not in paper_backbones(method):
            raise UsageError(f"the {method} paper reports no {backbone} row and cselab ships no such preset; "
                             f"its paper's backbones: {', '.join(paper_backbones(method)) or 'none'} (or name a "
                             "--preset)")
        preset_file = _method_preset(cls, PAPER_PRESETS[backbone])
    else:
        preset_file = _method_preset(cls, OTHER_BACKBONE_PRESET)
    return f"{Path(str(cls.preset_dir)).name}/{preset_file.stem}", preset_file


def _method_preset(cls: Any, name: str) -> Path:
    """The file of the method's preset ``name``: in cselab's presets (``preset_dir`` a folder name) or in the
    directory an outside method names."""
    from cselab.config.presets import SUFFIX, preset_path

    folder = Path(str(cls.preset_dir))
    if folder.is_absolute():
        file = folder / f"{name}{SUFFIX}"
        if not file.is_file():
            raise CselabError(f"method {cls.name} ships no {name} preset ({file} is missing)")
        return file
    return preset_path(f"{folder.as_posix()}/{name}")


def check_configuration(raw: dict[str, Any], cls: Any) -> Any:
    """``raw`` validated into a RunConfig, with the method's own checks (:meth:`Method.check_config`) and, for a
    two-stage method, every stage's configuration; one-line errors, nothing read or written."""
    from cselab.config.run_config import RunConfig, validate
    from cselab.methods import METHODS

    config = validate(RunConfig, raw)
    cls.check_config(config)
    if config.method_options.get("pipeline"):
        from cselab.training.pipeline import plan_pipeline

        stages = plan_pipeline(config)
        for stage in stages.stage1:
            METHODS.get(stage.method).check_config(stage)
    return config


def check_backbone(backbone: str, *, local_only: bool = False) -> None:
    """Refuse a backbone that cannot be trained as an encoder, from its config alone (the weights are not
    loaded): a missing path, a file, a directory without a readable ``config.json``, a sequence-to-sequence model
    (Marian, T5, BART). ``local_only``: a name that is not on this machine yet is left for later (it is fetched or
    downloaded first); else it is looked up, from the hub's cache or the hub."""
    from cselab.paths import resolve_model_path

    source = Path(resolve_model_path(backbone))  # a missing path is refused here
    if source.exists():
        if not source.is_dir():
            raise CselabError(f"model.backbone {backbone}: a file, not a model directory")
        if not (source / "config.json").is_file():
            raise CselabError(f"model.backbone {backbone}: not a model directory (no config.json)")
    elif local_only:
        return
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(source) if source.exists() else backbone)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types; the user needs one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CselabError(f"model.backbone {backbone}: its config cannot be read ({first})") from None
    if getattr(config, "is_encoder_decoder", False):
        raise CselabError(f"model.backbone {backbone}: a {config.model_type} model (sequence to sequence: an "
                          "encoder and a decoder), not an encoder; give an encoder such as BERT, RoBERTa or MiniLM")


def check_output_dir(out: Path) -> None:
    """Refuse ``out`` unless it is new, empty or a reproduction's (its marker, or the configuration cselab
    reproduce wrote there before the marker existed); a file, or a directory that cannot be written, is refused
    too. Reads only."""
    from cselab.fileio import LOCK_FILE, check_writable_dir

    check_writable_dir(out, "--output-dir")
    if not out.is_dir() or (out / OUTPUT_MARKER).is_file():
        return
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith(LOCK_FILE))
    if not names:
        return
    try:
        ours = (out / "config.yaml").read_text(encoding="utf-8").startswith(CONFIG_HEADER)
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise CselabError(f"--output-dir {out} holds files that cselab reproduce did not write ({shown}); give a new "
                          "or empty directory, or the one an earlier cselab reproduce wrote")


def _need(plan: ReproducePlan, target: str, options: dict[str, Any] | None = None) -> None:
    entry = (target, dict(options or {}))
    if entry not in plan.fetch:
        plan.fetch.append(entry)


def _plan_data(plan: ReproducePlan, home: Path) -> None:
    from cselab.data.papers.paper_data import paper_path

    raw = plan.raw
    data = raw.setdefault("data", {})
    options = raw.setdefault("method_options", {})
    corpus = data.get("corpus")
    if corpus in PAPER_CORPORA:
        target = PAPER_CORPORA[corpus]
        data["corpus"] = str(paper_path(target, home))
        _need(plan, target)
    elif corpus in NAMED_CORPUS_TARGETS:
        _need(plan, *NAMED_CORPUS_TARGETS[corpus])
    source_text = Path(data["corpus"]) if corpus is not None and corpus not in NAMED_CORPUS_TARGETS else None
    parallel = options.get("parallel")
    if isinstance(parallel, dict):  # IFCL: the English text and its translation
        if parallel.get("source") in PAPER_CORPORA:
            target = PAPER_CORPORA[parallel["source"]]
            parallel["source"] = str(paper_path(target, home))
            _need(plan, target)
        translated = Path(str(parallel.get("target", "")))
        match = _TRANSLATION_NAME.search(translated.name)
        if not translated.is_file() and match:
            out = home / "rtt" / translated.name
            plan.translations.append((Path(parallel["source"]), match.group(1), out))
            parallel["target"] = str(out)
    pipeline = options.get("pipeline")
    encoders = (pipeline.get("stage1") or {}).get("encoders", []) if isinstance(pipeline, dict) else []
    for encoder in encoders:
        augmentation = encoder.get("augmentation") or {}
        path = Path(str(augmentation.get("path", "")))
        match = _RTT_NAME.search(path.name)
        if augmentation.get("kind") == "file" and not path.is_file() and match:
            if source_text is None:
                raise CselabError(f"{path} is a round-trip translation of the training text, which is a named corpus "
                                  "here; give the text as a file (data.corpus=FILE) or the translation itself")
            lang = match.group(1)
            stem = source_text.name[:-4] if source_text.name.endswith(".txt") else source_text.name
            out = home / "rtt" / f"{stem}.rtt-{lang}.txt"
            plan.rtt.append((source_text, lang, out))
            augmentation["path"] = str(out)
    if plan.method == "ifcl" and "fraternal_model" in options:
        plan.notes.append(f"IFCL's fraternal embedding comes from {options['fraternal_model']}")
    if plan.translations:
        plan.notes.append("IFCL's German side is a MarianMT translation (the paper used T5)")
    if plan.rtt:
        plan.notes.append("the round-trip translations are MarianMT's (the TNCSE and JTCSE papers used Google "
                          "Translate)")


def _plan_sts(plan: ReproducePlan, home: Path, senteval_dir: Path | None) -> None:
    from cselab.data.papers.paper_data import is_paper_fetched, paper_path

    _need(plan, "sts")  # STS-B dev selects the checkpoint in every case
    if senteval_dir is not None:
        from cselab.data.evalsets.sts import senteval_root

        senteval_root(senteval_dir)  # a directory that is not SentEval's is refused now
        plan.senteval_dir = senteval_dir
    elif plan.sts_mode != "partial":
        plan.senteval_dir = paper_path("senteval", home)
        if not is_paper_fetched("senteval", home):
            _need(plan, "senteval")


def describe(plan: ReproducePlan) -> list[str]:
    """Lines that say what the plan will do."""
    lines = [f"reproduce {plan.method} on {plan.backbone}: preset {plan.preset}, seeds {','.join(map(str, plan.seeds))}"
             f", output {plan.out_dir}"]
    if plan.fetch:
        lines.append("data: " + ", ".join(f"cselab data fetch {t}" + (" --with-stsb-train" if o else "")
                                           for t, o in plan.fetch))
    for text, lang, out in plan.rtt:
        lines.append(f"round trip: {text} -> {lang} -> en = {out}")
    for text, lang, out in plan.translations:
        lines.append(f"translation: {text} -> {lang} = {out}")
    fetching = any(t == "senteval" for t, _ in plan.fetch)
    later = "; the partial sets if it cannot be fetched" if fetching and plan.sts_mode == "auto" else ""
    lines.append("STS: " + (f"SentEval's seven tasks ({plan.senteval_dir}{later})" if plan.senteval_dir is not None
                            else "the partial sets cselab builds from STS-B (marked -part; no SICK-R)"))
    if plan.paper is not None:
        lines.append(f"paper: {plan.paper.citation()}")
    lines += [f"note: {n}" for n in plan.notes]
    return lines


# -- preparing ------------------------------------------------------------------------------------------------
def missing(plan: ReproducePlan, home: Path | None = None) -> list[str]:
    """What :func:`prepare` would still fetch or translate."""
    from cselab.data.papers.paper_data import PAPER_TARGETS, is_paper_fetched
    from cselab.data.registry.sources import corpus_path, is_complete, is_fetched, target_dir

    out = []
    for target, options in plan.fetch:
        if target in PAPER_TARGETS:
            done = is_paper_fetched(target, home)
        elif options.get("include_stsb_train"):
            done = is_complete(target_dir(target, home) / "manifest+stsb-train.json") and \
                corpus_path(home, include_stsb_train=True).is_file()
        else:
            done = is_fetched(target, home)
        if not done:
            out.append(f"cselab data fetch {target}")
    out += [f"cselab data rtt {text} --via {lang}" for text, lang, path in plan.rtt if not path.is_file()]
    out += [f"translation of {text} into {lang}" for text, lang, path in plan.translations if not path.is_file()]
    return out


def prepare(plan: ReproducePlan, *, home: Path | None = None, from_dir: Path | None = None,
            fetch: bool = True) -> None:
    """Fetch and translate what the plan needs, then write its configuration. SentEval's data that cannot be
    fetched (``--sts auto``) turns the plan to the partial sets, said in one line; anything else that cannot be
    obtained is an error naming the command that gets it."""
    import os

    from cselab.data.papers.paper_data import PAPER_TARGETS
    from cselab.data.registry.download import DownloadError
    from cselab.data.registry.fetch import fetch as fetch_target

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if (distributed or not fetch) and plan.sts_mode == "auto" and ("senteval", {}) in plan.fetch:
        # nothing may be fetched now: SentEval's data that is not here means the partial sets, on every rank alike
        plan.fetch.remove(("senteval", {}))
        plan.senteval_dir = None
        plan.notes.append("SentEval's data is not fetched (no fetching under --no-fetch or torchrun), so the partial "
                          "sets are scored")
    todo = missing(plan, home)
    if todo and distributed:
        raise CselabError("under torchrun, reproduce only trains: prepare its data first in one process with "
                          f"`cselab reproduce ... --prepare-only` (missing: {'; '.join(todo)})")
    if todo and not fetch:
        raise CselabError(f"missing: {'; '.join(todo)} (drop --no-fetch, or run them first)")
    for target, options in plan.fetch:
        try:  # --from holds the papers' files; the registry targets come from their registries
            fetch_target(target, home=home, from_dir=from_dir if target in PAPER_TARGETS else None, **options)
        except DownloadError as exc:
            if target != "senteval" or plan.sts_mode != "auto":
                raise
            plan.senteval_dir = None
            plan.notes.append("SentEval's data could not be fetched, so the partial sets are scored: " + str(exc))
            report().say(f"senteval: not fetched ({exc}); scoring the partial sets instead")
    _translate(plan)
    if not Path(plan.config.model.backbone).expanduser().exists():  # a local one was checked when planned
        check_backbone(plan.config.model.backbone)  # fetched (or in the hub's cache) by now: before OUT is written
    write_configuration(plan)


def _translate(plan: ReproducePlan) -> None:
    from cselab.data.text.rtt import default_model, round_trip, translate_file

    for text, lang, out in plan.rtt:
        if not out.is_file():
            models = {k: v for k, v in plan.rtt_models.items() if k in (f"en-{lang}", f"{lang}-en")}
            produced = round_trip(text, [lang], out.parent, models=models)[lang]
            if produced != out:
                produced.replace(out)
    for text, lang, out in plan.translations:
        if not out.is_file():
            model = plan.rtt_models.get(f"en-{lang}") or default_model("en", lang)
            translate_file(text, out, model)


def write_configuration(plan: ReproducePlan) -> None:
    """Mark OUT as a reproduction's and write the effective configuration (validated when the plan was made)
    there, unless it holds the same text already."""
    from cselab.fileio import write_atomic

    text = (f"{CONFIG_HEADER}{plan.method} --backbone {plan.backbone}` from preset {plan.preset}\n"
            + yaml.safe_dump(plan.raw, sort_keys=False))
    check_output_dir(plan.out_dir)  # again: the preparing took time
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    if not (plan.out_dir / OUTPUT_MARKER).is_file():
        write_atomic(plan.out_dir / OUTPUT_MARKER, "a cselab reproduce directory\n")
    if not plan.config_file.is_file() or plan.config_file.read_text(encoding="utf-8") != text:
        write_atomic(plan.config_file, text)


# -- the estimate ---------------------------------------------------------------------------------------------
def _backbone_shape(backbone: str) -> tuple[int, int, int] | None:
    """(layers, hidden, intermediate) of the backbone, from its config when it can be read."""
    if backbone in KNOWN_SHAPES:
        return KNOWN_SHAPES[backbone]
    try:  # a local directory, or a hub name already in the cache: an estimate never waits for the network
        from transformers import AutoConfig

        from cselab.paths import resolve_model_path

        config = AutoConfig.from_pretrained(resolve_model_path(backbone), local_files_only=True)
        hidden = int(config.hidden_size)
        return int(config.num_hidden_layers), hidden, int(getattr(config, "intermediate_size", 4 * hidden))
    except Exception:  # noqa: BLE001 - an estimate never stops a run
        return None


def _count_lines(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def _steps(train: dict[str, Any], lines: int | None) -> int | None:
    if train.get("max_steps"):
        return int(train["max_steps"])
    if lines is None:
        return None
    return int(train.get("epochs", 1)) * math.ceil(lines / int(train.get("batch_size", 64)))


def _corpus_lines(plan: ReproducePlan, home: Path | None) -> int | None:
    from cselab.data.papers.paper_data import WIKI1M

    corpus = (plan.raw.get("data") or {}).get("corpus")
    parallel = (plan.raw.get("method_options") or {}).get("parallel")
    if corpus is None and isinstance(parallel, dict):
        corpus = parallel.get("source")
    if corpus is None:
        return None
    if corpus in NAMED_CORPUS_TARGETS:
        from cselab.data.text.training_data import NAMED_CORPORA
        from cselab.paths import cselab_home

        relative = NAMED_CORPORA.get(corpus, (f"{corpus}/train.en",))[0]
        return _count_lines((home or cselab_home()) / relative)
    lines = _count_lines(Path(corpus))
    return lines if lines is not None else (WIKI1M.lines if "wiki1m" in str(corpus) else None)


def measured_gflops(device: Any = None, precision: str = "fp32",
                    shape: tuple[int, int, int] = (4096, 768, 3072)) -> float:
    """GFLOP/s of a feed-forward matmul pair (``tokens x hidden -> intermediate -> hidden``) on ``device`` in
    ``precision`` (fp32, bf16, fp16), best of ~0.3 s of repeats."""
    import torch

    from cselab.runtime.devices import pick_device

    device = pick_device(device or "auto")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    if device.type == "cpu" and dtype == torch.float16:
        dtype = torch.float32
    tokens, hidden, ff = shape
    x = torch.randn(tokens, hidden, device=device, dtype=dtype)
    w1 = torch.randn(ff, hidden, device=device, dtype=dtype)
    w2 = torch.randn(hidden, ff, device=device, dtype=dtype)

    def run() -> None:
        torch.nn.functional.linear(torch.nn.functional.linear(x, w1), w2)
        if device.type == "cuda":
            torch.cuda.synchronize()

    run()
    best, spent = float("inf"), 0.0
    while spent < 0.3 or best == float("inf"):
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
    return 2 * 2 * tokens * hidden * ff / best / 1e9


def _mean_tokens(corpus: Path | None, max_length: int) -> float:
    """Tokens per training sentence: the first 2000 lines' words x 1.3 + 2, at most ``max_length``."""
    words = []
    try:
        with open(corpus or "", encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(2000), f, strict=False):
                words.append(len(line.split()))
    except OSError:
        return float(max_length)
    return min(float(max_length), 1.3 * statistics.fmean(words) + 2) if words else float(max_length)


def _precision(plan: ReproducePlan) -> str:
    """What the run's ``train.precision`` resolves to here (``auto``: the trainer's cached probe)."""
    try:
        from cselab.config.run_config import RunConfig, validate
        from cselab.runtime.precision import planned_precision

        return planned_precision(validate(RunConfig, plan.raw)).precision
    except Exception:  # noqa: BLE001 - an estimate never stops a run
        return "fp32"


def estimate_seconds(plan: ReproducePlan, *, home: Path | None = None, gflops: float | None = None) -> float | None:
    """A rough time for all seeds (training, dev scoring, test scoring), or None when the backbone's size or the
    number of steps is unknown: FLOPs (6 x parameters x tokens per training step, 2 x for scoring) over the matmul
    rate measured here at the backbone's width in the run's precision."""
    shape = _backbone_shape(str((plan.raw.get("model") or {}).get("backbone", plan.backbone)))
    if shape is None:
        return None
    layers, hidden, ff = shape
    params = layers * (4 * hidden * hidden + 2 * hidden * ff)
    model, train = plan.raw.get("model") or {}, plan.raw.get("train") or {}
    lines = _corpus_lines(plan, home)
    steps = _steps(train, lines)
    if steps is None:
        return None
    corpus = (plan.raw.get("data") or {}).get("corpus")
    path = None if corpus is None or corpus in NAMED_CORPUS_TARGETS else Path(corpus)
    if corpus == "default":
        from cselab.data.registry.sources import corpus_path

        path = corpus_path(home)
    length = _mean_tokens(path, int(model.get("max_length", 32))) + plan.template_tokens
    batch = int(train.get("batch_size", 64))
    flops = 6 * params * plan.views * batch * length * steps
    pipeline = (plan.raw.get("method_options") or {}).get("pipeline")
    if isinstance(pipeline, dict):  # stage 1: two SimCSE encoders
        settings = (pipeline.get("stage1") or {}).get("settings") or {}
        stage1_train = {**train, **(settings.get("train") or {})}
        stage1_steps = _steps(stage1_train, lines) or steps
        flops += 2 * 6 * params * 2 * int(stage1_train.get("batch_size", batch)) * length * stage1_steps
    evals = steps // max(1, int(train.get("eval_every") or steps)) + 2
    flops += evals * 2 * params * 3000 * 24 + 2 * params * 40_000 * 24  # dev every eval_every, the test sets once
    if gflops is None:
        gflops = measured_gflops(train.get("device"), _precision(plan), (4096, hidden, ff))
    return flops / (gflops * 1e9 * TRAIN_EFFICIENCY) * len(plan.seeds)


# -- running --------------------------------------------------------------------------------------------------
def _best_dir(plan: ReproducePlan, seed: int) -> Path:
    """Where seed ``seed``'s selected model is, from the plan's configuration (read once, when planned): the seed's
    run directory (:func:`cselab.research.experiments.recorded_runs.seed_overrides`), its ``stage2/best`` for a
    two-stage method."""
    from cselab.training.run_directory import BEST_DIR, STAGE2_DIR

    run_dir = Path(f"{plan.config.train.output_dir.rstrip('/')}-seed{seed}")
    return run_dir / STAGE2_DIR / BEST_DIR if plan.config.method_options.get("pipeline") else run_dir / BEST_DIR


def score_seed(plan: ReproducePlan, seed: int, *, batch_size: int = 128) -> dict[str, float]:
    """The test scores ("all") of a seed's selected model on the plan's tasks, kept beside the model
    (``sts-scores.json``) so a rerun does not score it again."""
    from cselab.data.evalsets.sts import DEFAULT_TASKS
    from cselab.evaluation.model_eval import SENTEVAL_TASKS
    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.fileio import write_json_atomic
    from cselab.models.sentence_model import load_model

    best = _best_dir(plan, seed)
    tasks = list(SENTEVAL_TASKS if plan.senteval_dir is not None else DEFAULT_TASKS)
    key = {"tasks": tasks, "senteval_dir": str(plan.senteval_dir) if plan.senteval_dir else None}
    cache = best.parent / "sts-scores.json"
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept.get("key") == key and (best / "config.json").stat().st_mtime <= cache.stat().st_mtime:
            return kept["scores"]
    except (OSError, ValueError, AttributeError):
        pass
    evaluator = StsEvaluator.from_names(tasks, ("test",), senteval_dir=plan.senteval_dir, batch_size=batch_size)
    result = evaluator(load_model(best))
    scores = {task: round(s.all, 2) for (task, _), s in result.scores.items()}
    write_json_atomic(cache, {"key": key, "scores": scores})
    return scores


def comparison_rows(plan: ReproducePlan, scores: dict[int, dict[str, float]]) -> list[ComparisonRow]:
    """The paper's seven tasks and average beside ours (mean and sample std over the seeds); a partial set is
    named as such and never compared; our sets the paper lacks (STS17-en) follow."""
    from cselab.data.evalsets.sts import DISPLAY_NAMES, PART_SIZES

    paper = plan.paper
    per_task: dict[str, list[float]] = {}
    for seed_scores in scores.values():
        for task, value in seed_scores.items():
            per_task.setdefault(task, []).append(value)

    def stats(values: list[float]) -> tuple[float | None, float | None]:
        if not values:
            return None, None
        return round(statistics.fmean(values), 2), (round(statistics.stdev(values), 2) if len(values) > 1 else None)

    rows = []
    used = set()
    part_of = {full: part for part, full in FULL_TASK_OF_PART.items()}
    from cselab.data.papers.paper_data import SENTEVAL_PAIRS

    for task in paper_tasks():
        figure = paper.scores[task] if paper else None
        if task in per_task:
            mean, std = stats(per_task[task])
            rows.append(ComparisonRow(DISPLAY_NAMES[task], figure, mean, std, len(per_task[task]), DISPLAY_NAMES[task],
                                      plan.paper is not None and plan.paper.backbone == plan.backbone))
            used.add(task)
        elif part_of.get(task) in per_task:
            part = part_of[task]
            mean, std = stats(per_task[part])
            label = f"{DISPLAY_NAMES[part]} (partial: {PART_SIZES[part]} of {SENTEVAL_PAIRS[task]} pairs)"
            rows.append(ComparisonRow(DISPLAY_NAMES[task], figure, mean, std, len(per_task[part]), label, False))
            used.add(part)
        else:
            rows.append(ComparisonRow(DISPLAY_NAMES[task], figure, None, None, 0, "not scored (needs SentEval's data)",
                                      False))
    for task, values in per_task.items():
        if task not in used:
            mean, std = stats(values)
            rows.append(ComparisonRow(DISPLAY_NAMES.get(task, task), None, mean, std, len(values),
                                      DISPLAY_NAMES.get(task, task), False))
    # cselab's avg-available: every set scored (the seven tasks with SentEval's data), each rounded first
    averages = [statistics.fmean(round(v, 2) for v in s.values()) for s in scores.values() if s]
    full = set(per_task) == set(paper_tasks())
    mean, std = stats([round(a, 2) for a in averages])
    label = "7 STS avg" if full else f"avg-available over our {len(per_task)} sets (not the paper's average)"
    rows.append(ComparisonRow("Avg.", paper.avg if paper else None, mean, std, len(averages), label,
                              full and plan.paper is not None and plan.paper.backbone == plan.backbone))
    return rows


def run_reproduction(plan: ReproducePlan, *, batch_size: int = 128) -> ReproduceResult | None:
    """Train every seed (``cselab seeds``: recorded seeds skipped), score each selected model and compare. None on
    the other ranks of a torchrun launch (the main rank scores and compares)."""
    from cselab.data.evalsets.sts import DEFAULT_TASKS
    from cselab.research.experiments.seeds import seeds_run
    from cselab.runtime.launch import is_main_process

    start = time.perf_counter()
    run = seeds_run(plan.config_file, [], plan.seeds, results_file=plan.results_file)
    if not is_main_process():
        return None
    recorded = {r.get("seed"): r.get("scores") or {} for r in run.records}
    scores = {}
    for seed in plan.seeds:
        kept = recorded.get(seed, {})
        if plan.senteval_dir is None and all(isinstance(kept.get(t), (int, float)) for t in DEFAULT_TASKS):
            scores[seed] = {t: kept[t] for t in DEFAULT_TASKS}  # the run scored the partial sets already
        else:
            scores[seed] = score_seed(plan, seed, batch_size=batch_size)
    result = ReproduceResult(plan, scores, comparison_rows(plan, scores), None, time.perf_counter() - start)
    _write_summary(result)
    return result


def _write_summary(result: ReproduceResult) -> None:
    from dataclasses import asdict

    from cselab.fileio import write_json_atomic

    plan = result.plan
    write_json_atomic(plan.out_dir / "reproduce.json", {
        "method": plan.method, "backbone": plan.backbone, "preset": plan.preset, "seeds": plan.seeds,
        "sts": "senteval" if plan.senteval_dir is not None else "partial",
        "senteval_dir": str(plan.senteval_dir) if plan.senteval_dir else None,
        "paper": asdict(plan.paper) if plan.paper else None, "notes": plan.notes,
        "scores": {str(k): v for k, v in result.scores.items()},
        "rows": [{**asdict(r), "difference": r.difference} for r in result.rows],
        "wall_s": round(result.wall_s, 1)})


# -- the whole command ----------------------------------------------------------------------------------------
def reproduce(method: str, backbone: str = "bert-base-uncased", *, seeds: list[int] | None = None,
              preset: str | None = None, overrides: list[str] | None = None, out_dir: str | Path | None = None,
              senteval_dir: str | Path | None = None, sts: str = "auto", from_dir: str | Path | None = None,
              rtt_models: Mapping[str, str] | None = None, fetch: bool = True, prepare_only: bool = False,
              batch_size: int = 128, home: Path | None = None) -> ReproduceResult | None:
    """``cselab reproduce`` and ``cselab.reproduce()``, whole: plan (every argument, the configuration and the
    backbone checked; nothing written), say the plan, prepare (fetch, translate, then OUT's configuration),
    estimate the time, then train, score and compare every seed. Returns None after ``prepare_only`` and on the
    other ranks of a torchrun launch. Running the same call again after a kill anywhere continues: recorded seeds
    are skipped, a seed's run resumes from what it saved."""
    plan = plan_reproduction(method, backbone, seeds=seeds, preset=preset, overrides=list(overrides or []),
                             out_dir=out_dir, senteval_dir=senteval_dir, sts=sts, rtt_models=dict(rtt_models or {}),
                             home=home)
    for line in describe(plan):
        report().say(line)
    prepare(plan, home=home, from_dir=Path(from_dir) if from_dir is not None else None, fetch=fetch)
    estimate = estimate_seconds(plan, home=home)
    report().say("estimate: " + (f"about {duration(estimate)} for {len(plan.seeds)} seed(s) on this machine "
                                 "(rough, x2 either way)" if estimate is not None else
                                 "none (the backbone's size or the corpus is unknown)"))
    if prepare_only:
        report().say(f"prepared: {plan.config_file}; run the same command without --prepare-only to train")
        return None
    result = run_reproduction(plan, batch_size=batch_size)
    if result is not None:
        result.estimate_s = estimate
    return result


def duration(seconds: float) -> str:
    """A time as a reader takes it: seconds under 90 s, minutes under 90 min, else hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
