"""Bad arguments through every public function of ``import cselab``, as ``tests/test_robustness.py`` sends bad
input through every command (issue 29).

Every case must end the same way: ONE exception of the documented type (:class:`cselab.errors.UsageError`, a
``CselabError`` and a ``ValueError``, for a misuse; ``CselabError`` for a problem with the files an argument
names), its message one line holding the expected part, nothing written or changed (a snapshot of the workspace
and of the case's scratch directory) and the arguments equal to deep copies taken before the call.

Placeholders in a case's arguments: ``{W}`` the shared workspace (a tiny BERT in ``model/``, a damaged copy in
``damaged/``, a corpus, a plain file), ``{T}`` the case's scratch directory; :data:`MODEL` is the tiny BERT loaded
with ``cselab.load_model`` and :data:`CONFIG` a run configuration mapping that would train it.
"""

from __future__ import annotations

import copy
import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import cselab
from cselab.errors import CselabError, UsageError
from tests.cli.test_robustness import (
    EXPORT_DAMAGES,
    EXPORT_INSTALLED,
    MTEB_INSTALLED,
    RUNTIME_MISSING,
    copy_export,
    snapshot,
    write_export,
)
from tests.helpers import run_cli, write_corpus, write_sts_home

MODEL, MODULE, CONFIG = object(), object(), object()  # placeholders, filled per case
Setup = Callable[[Path, Path], None]  # (the case's scratch directory, the workspace)
API_CASES: list[tuple[str, str, tuple, dict, str, type[Exception], Setup | None]] = []


def api_case(cid: str, target: str, args: tuple = (), kwargs: dict | None = None, expect: str = "",
             exc: type[Exception] = UsageError, setup: Setup | None = None) -> None:
    API_CASES.append((cid, target, args, kwargs or {}, expect, exc, setup))


def user_file(name: str, text: str) -> Setup:
    def setup(t: Path, w: Path) -> None:
        (t / name).parent.mkdir(parents=True, exist_ok=True)
        (t / name).write_text(text)
    return setup


# -- load_model ------------------------------------------------------------------------------------------
for cid, path, expect in (
    ("none", None, "path: None is not a path or name"), ("number", 3, "path: 3 is not a path or name"),
    ("bytes", b"{W}/model", "is not a path or name"), ("list", ["{W}/model"], "is not a path or name"),
    ("empty", "", "path is empty"), ("blank", "  ", "path is empty"),
):
    api_case(f"load-path-{cid}", "load_model", (path,), expect=expect)
api_case("load-path-missing", "load_model", ("{T}/nope",), expect="cannot load model", exc=CselabError)
api_case("load-path-file", "load_model", ("{W}/afile",), expect="is a file, not a model directory", exc=CselabError)
api_case("load-path-damaged", "load_model", ("{W}/damaged",), expect="found list", exc=CselabError)
for cid, pooler, expect in (("unknown", "avg", "unknown pooler 'avg'; choose one of:"),
                            ("empty", "", "pooler is empty"),
                            ("number", 3, "pooler: 3 is not text"), ("list", ["cls"], "pooler: ['cls'] is not text")):
    api_case(f"load-pooler-{cid}", "load_model", ("{W}/model",), {"pooler": pooler}, expect)
for cid, value, expect in (
    ("0", 0, "max_length: 0 is not in the range x>=1"), ("-1", -1, "max_length: -1 is not in the range x>=1"),
    ("fraction", 1.5, "max_length: 1.5 is not a valid integer"),
    ("text", "16", "max_length: '16' is not a valid integer"),
    ("bool", True, "max_length: True is not a valid integer"),
    ("over-positions", 1024, "max_length 1024 is longer than the model's 128 position embeddings"),
):
    api_case(f"load-max-length-{cid}", "load_model", ("{W}/model",), {"max_length": value}, expect)
# load_model(backend=onnx|openvino): a damaged, incomplete or foreign export is one CselabError naming the file;
# what an export fixed (pooler, length) is refused, and a bad value is refused as for torch
for cid, fmt, edit, expect in EXPORT_DAMAGES:
    api_case(f"load-export-{cid}", "load_model", ("{T}/x",), {"backend": fmt},
             expect if EXPORT_INSTALLED else RUNTIME_MISSING[fmt], CselabError, copy_export(fmt, edit))
EXPORT = "{W}/export-onnx"
api_case("load-export-max-length-0", "load_model", (EXPORT,), {"backend": "onnx", "max_length": 0},
         "max_length: 0 is not in the range x>=1")
api_case("load-export-pooler-empty", "load_model", (EXPORT,), {"backend": "onnx", "pooler": ""}, "pooler is empty")
api_case("load-export-pooler-given", "load_model", (EXPORT,), {"backend": "onnx", "pooler": "cls"},
         "--pooler 'cls': an export's pooling, length and precision were fixed", CselabError)
api_case("load-export-max-length-given", "load_model", (EXPORT,), {"backend": "onnx", "max_length": 16},
         "--max-length 16: an export's pooling, length and precision were fixed", CselabError)
api_case("save-export", "save_export", ("{T}/saved",),
         expect="holds no torch weights to save; copy its directory" if EXPORT_INSTALLED else RUNTIME_MISSING["onnx"],
         exc=UsageError if EXPORT_INSTALLED else CselabError)
api_case("evaluate-domain-export-precision", "evaluate_domain_export", (), {"labels": "{W}/labels.tsv",
                                                                          "precision": "bf16"},
         expect=(RUNTIME_MISSING["onnx"] if not EXPORT_INSTALLED else "mteb, which is not installed"
                 if not MTEB_INSTALLED else "precision 'bf16': an export's precision was fixed"), exc=CselabError)

# -- SentenceEncoder, encode, save ---------------------------------------------------------------------------
api_case("encoder-none", "SentenceEncoder", (None,), expect="model: a NoneType is not a sentence model")
api_case("encoder-path", "SentenceEncoder", ("{W}/model",), expect="model: a str is not a sentence model")
api_case("encoder-source-number", "SentenceEncoder", (MODULE,), {"source": 3}, expect="source: 3 is not text")
STRINGS = "sentences: encode takes a string or a list of strings"
for cid, sentences, expect in (
    ("none", None, f"{STRINGS}, not a NoneType"), ("number", 3, f"{STRINGS}, not a int"),
    ("bytes", b"a man", f"{STRINGS}, not a bytes"), ("dict", {"a": "b"}, f"{STRINGS}, not a dict"),
    ("set", {"a", "b"}, f"{STRINGS}, not a set"), ("ints", [1, 2], f"{STRINGS}; item 0 is a int"),
    ("none-item", ["a man", None], f"{STRINGS}; item 1 is a NoneType"),
    ("nested", [["a man"]], f"{STRINGS}; item 0 is a list"), ("bytes-item", [b"a"], f"{STRINGS}; item 0 is a bytes"),
):
    api_case(f"encode-sentences-{cid}", "encode", (sentences,), expect=expect)
for cid, value, expect in (
    ("0", 0, "batch_size: 0 is not in the range x>=1"), ("-4", -4, "batch_size: -4 is not in the range x>=1"),
    ("fraction", 1.5, "batch_size: 1.5 is not a valid integer"),
    ("text", "8", "batch_size: '8' is not a valid integer"),
    ("none", None, "batch_size: None is not a valid integer"),
    ("bool", True, "batch_size: True is not a valid integer"),
):
    api_case(f"encode-batch-size-{cid}", "encode", (["a man"],), {"batch_size": value}, expect)
for flag, value in (("normalize", "yes"), ("normalize", 1), ("convert_to_tensor", None), ("show_progress_bar", "no")):
    api_case(f"encode-{flag}-{value}", "encode", (["a man"],), {flag: value}, f"{flag}: {value!r} is not True or False")
api_case("save-path-none", "save", (None,), expect="path: None is not a path or name")
api_case("save-path-empty", "save", ("",), expect="path is empty")
api_case("save-path-number", "save", (7,), expect="path: 7 is not a path or name")
# issue 87: a save goes to a new path, an empty directory or over a model cselab saved; the user's is never touched
SAVE_RULE = "a model is saved to a new or empty directory or over a model cselab saved"
api_case("save-over-users-file", "save", ("{T}/notes.txt",), expect="notes.txt is a file, not a model directory",
         exc=CselabError, setup=user_file("notes.txt", "my notes\n"))
api_case("save-over-users-directory", "save", ("{T}/mine",), expect=f"mine holds files that are not a model cselab "
         f"saved (mine.txt); {SAVE_RULE}", exc=CselabError, setup=user_file("mine/mine.txt", "my notes\n"))
api_case("save-over-users-file-in-a-folder", "save", ("{T}/mine",), expect="mine holds files that are not a model",
         exc=CselabError, setup=user_file("mine/sub/config.json", "{}"))
api_case("save-over-a-damaged-description", "save", ("{T}/mine",), expect="mine holds files that are not a model",
         exc=CselabError, setup=user_file("mine/cselab.json", "[1, 2]"))
api_case("save-beside-users-old", "save", ("{T}/m",), expect="m.old is in the way of saving", exc=CselabError,
         setup=user_file("m.old/backup.txt", "my backup\n"))
api_case("save-beside-users-tmp", "save", ("{T}/m",), expect="m.tmp is in the way of saving", exc=CselabError,
         setup=user_file("m.tmp", "a file of mine\n"))


def _link_to_a_directory(t: Path, w: Path) -> None:
    (t / "elsewhere").mkdir()
    (t / "link").symlink_to(t / "elsewhere")


api_case("save-over-a-link", "save", ("{T}/link",), expect="link is a link", exc=CselabError,
         setup=_link_to_a_directory)


def _saved_model_with(name: str, text: str) -> Setup:
    """A model cselab saved in ``T/m`` (the workspace's tiny BERT), then the user's file ``name`` added to it."""
    def setup(t: Path, w: Path) -> None:
        cselab.load_model(w / "model").save(t / "m")
        user_file(f"m/{name}", text)(t, w)
    return setup


# issue 92: over a model cselab saved, a file it did not write there is refused; a place no save can reach is one line
api_case("save-over-a-saved-model-with-users-notes", "save", ("{T}/m",),
         expect="m is a model cselab saved, but it also holds files cselab did not write there (my_notes.txt)",
         exc=CselabError, setup=_saved_model_with("my_notes.txt", "my notes\n"))
api_case("save-over-a-saved-model-with-users-folder", "save", ("{T}/m",),
         expect="holds files cselab did not write there (mine)", exc=CselabError,
         setup=_saved_model_with("mine/notes.txt", "my notes\n"))
api_case("save-under-users-file", "save", ("{T}/notes.txt/sub",),
         expect="path {T}/notes.txt/sub cannot be created: {T}/notes.txt is a file, not a directory", exc=CselabError,
         setup=user_file("notes.txt", "my notes\n"))
api_case("save-into-proc", "save", ("/proc/cselab-model",), expect="/proc/cselab-model", exc=CselabError)
api_case("save-path-nul", "save", ("a\x00b",), expect="path: 'a\\x00b' holds a NUL byte, which no path can")

# -- train ---------------------------------------------------------------------------------------------------
for cid, config, expect in (
    ("list", [1, 2], "config: [1, 2] is not a YAML file, a mapping of sections or None"),
    ("number", 3, "config: 3 is not a YAML file"), ("bytes", b"c.yaml", "config: b'c.yaml' is not a YAML file"),
    ("empty", "", "config is empty"), ("blank", " ", "config is empty"),
):
    api_case(f"train-config-{cid}", "train", (config,), expect=expect)
api_case("train-config-missing", "train", ("{T}/nope.yaml",), expect="config file not found", exc=CselabError)
api_case("train-config-unknown-section", "train", ({"nope": 1},), expect="unknown key 'nope'", exc=CselabError)
api_case("train-config-section-number", "train", ({"train": 3},), expect="train", exc=CselabError)
for cid, override, expect, exc in (
    ("number", 3, "overrides: 3 is not a KEY=VALUE string", UsageError),
    ("list", ["train.lr=1"], "overrides: ['train.lr=1'] is not a KEY=VALUE string", UsageError),
    ("none", None, "overrides: None is not a KEY=VALUE string", UsageError),
    ("no-value", "novalue", "is not KEY=VALUE", CselabError),
    ("unknown-key", "train.lrr=1", "unknown key 'train.lrr'", CselabError),
    ("batch-size-0", "train.batch_size=0", "train.batch_size", CselabError),
    ("pooler", "model.pooler=avg", "unknown pooler 'avg'", CselabError),
    ("max-length-0", "model.max_length=0", "model.max_length", CselabError),
    ("max-length-over-positions", "model.max_length=1024", "longer than the model's 128 position", CselabError),
    ("corpus-missing", "data.corpus={T}/nope.txt", "corpus file not found", CselabError),
    ("lr-negative", "train.lr=-1", "train.lr", CselabError),
    ("lr-nan", "train.lr=nan", "train.lr: Input should be a finite number", CselabError),
    ("seed-past-int64", "train.seed=9223372036854775808", "train.seed", CselabError),
    ("batch-1-in-batch-negatives", "train.batch_size=1", "a batch of one has no negative", CselabError),
):
    api_case(f"train-override-{cid}", "train", (CONFIG, override), expect=expect, exc=exc)
for cid, kwargs, expect in (
    ("method-empty", {"method": ""}, "method is empty"), ("method-number", {"method": 3}, "method: 3 is not text"),
    ("resume-text", {"resume": "yes"}, "resume: 'yes' is not True or False"),
    ("resume-number", {"resume": 1}, "resume: 1 is not True or False"),
    ("progress-none", {"progress": None}, "progress: None is not True or False"),
    ("results-number", {"results": 3}, "results: 3 is not a path or name"),
    ("results-empty", {"results": ""}, "results is empty"),
):
    api_case(f"train-{cid}", "train", (CONFIG,), kwargs, expect)
api_case("train-method-unknown", "train", (CONFIG,), {"method": "nope"}, "unknown method 'nope'", CselabError)
api_case("train-results-under-file", "train", (CONFIG,), {"results": "{W}/afile/r.jsonl"}, "afile is a file",
         CselabError)
api_case("train-output-holds-user-file", "train", (CONFIG,), {}, "holds files that cselab did not write (config.yaml)",
         CselabError, user_file("run/config.yaml", "my: own settings\n"))
api_case("train-resume-into-user-dir", "train", (CONFIG,), {"resume": True},
         "holds files that cselab did not write (notes.txt)", CselabError, user_file("run/notes.txt", "mine\n"))

# -- evaluate ------------------------------------------------------------------------------------------------
for cid, tasks, expect in (
    ("empty-list", [], "tasks is empty: give at least one name"), ("empty-text", "", "tasks is empty"),
    ("comma", ",", "tasks is empty"), ("none", None, "tasks: None is not a list of names"),
    ("numbers", [1], "tasks: [1] is not a list of names"), ("empty-name", ["stsb", ""], "holds an empty name"),
    ("dict", {"stsb": 1}, "is not a list of names"),
):
    api_case(f"evaluate-tasks-{cid}", "evaluate", (MODEL, tasks), expect=expect)
for cid, splits, expect in (
    ("empty", [], "splits is empty"), ("comma", ",", "splits is empty"), ("none", None, "splits: None is not a list"),
    ("unknown", ["val"], "unknown split 'val'; choose from: train, dev, test"),
    ("unknown-text", "test,val", "unknown split 'val'"),
):
    api_case(f"evaluate-splits-{cid}", "evaluate", (MODEL, ["stsb"]), {"splits": splits}, expect)
for cid, value, expect in (("0", 0, "batch_size: 0 is not in the range x>=1"),
                           ("text", "128", "batch_size: '128' is not a valid integer")):
    api_case(f"evaluate-batch-size-{cid}", "evaluate", (MODEL, ["stsb"]), {"batch_size": value}, expect)
api_case("evaluate-model-none", "evaluate", (None,), expect="model: a NoneType is not a model path, a SentenceEncoder")
api_case("evaluate-model-number", "evaluate", (3,), expect="model: a int is not a model path")
api_case("evaluate-model-missing", "evaluate", ("{T}/nope",), expect="cannot load model", exc=CselabError)
api_case("evaluate-no-sts-data", "evaluate", (MODEL, ["stsb"]), expect="cselab data fetch sts", exc=CselabError)
api_case("evaluate-unknown-task", "evaluate", (MODEL, ["NoSuchTask"]), exc=CselabError,
         expect="unknown mteb task 'NoSuchTask'" if importlib.util.find_spec("mteb") else "mteb is not installed")


# -- evaluate_domain: the user's labelled files, every one checked before a model loads --------------------------
api_case("evaluate-domain-nothing", "evaluate_domain", (MODEL,), expect="nothing to score", exc=CselabError)
api_case("evaluate-domain-labels-missing", "evaluate_domain", (MODEL,), {"labels": "{T}/nope.tsv"}, "nope.tsv",
         CselabError)
api_case("evaluate-domain-labels-no-tab", "evaluate_domain", (MODEL,), {"labels": "{T}/l.tsv"}, "l.tsv", CselabError,
         user_file("l.tsv", "a text without its label\n" * 12))
api_case("evaluate-domain-pairs-score-text", "evaluate_domain", (MODEL,), {"pairs": "{T}/p.tsv"}, "p.tsv", CselabError,
         user_file("p.tsv", "a man\ta woman\thigh\n" * 5))
api_case("evaluate-domain-unknown", "evaluate_domain", (MODEL,), {"domain": "atlantis"}, "atlantis", CselabError)
api_case("evaluate-domain-and-files", "evaluate_domain", (MODEL,), {"domain": "stsb", "labels": "{T}/l.tsv"},
         "not both", CselabError)
# issue 87: each argument is checked before any work (a model given by its path is not loaded)
LABELS = {"labels": "{W}/labels.tsv"}
for cid, args, kwargs, expect in (
    ("labels-number", (MODEL,), {"labels": 5}, "labels: 5 is not a path or name"),
    ("labels-empty", (MODEL,), {"labels": ""}, "labels is empty"),
    ("pairs-list", (MODEL,), {"pairs": ["{W}/labels.tsv"]}, "pairs: ['"),
    ("retrieval-bytes", (MODEL,), {"retrieval": b"dir"}, "retrieval: b'dir' is not a path or name"),
    ("domain-number", (MODEL,), {"domain": 3}, "domain: 3 is not text"),
    ("domain-empty", (MODEL,), {"domain": " "}, "domain is empty"),
    ("model-none", (None,), LABELS, "model: a NoneType is not a model path, a SentenceEncoder or a sentence model"),
    ("model-number", (7,), LABELS, "model: a int is not a model path, a SentenceEncoder or a sentence model"),
    ("model-empty", ("",), LABELS, "model is empty"),
    ("batch-size-0", ("{W}/model",), {**LABELS, "batch_size": 0}, "batch_size: 0 is not in the range x>=1"),
    ("batch-size-text", ("{W}/model",), {**LABELS, "batch_size": "8"}, "batch_size: '8' is not a valid integer"),
    ("batch-size-bool", ("{W}/model",), {**LABELS, "batch_size": True}, "batch_size: True is not a valid integer"),
    ("progress-yes", ("{W}/model",), {**LABELS, "progress": "yes"}, "progress: 'yes' is not True or False"),
    ("progress-1", ("{W}/model",), {**LABELS, "progress": 1}, "progress: 1 is not True or False"),
    ("precision-unknown", ("{W}/model",), {**LABELS, "precision": "fp8"},
     "precision: 'fp8' is not one of auto, fp32, bf16, fp16"),
    ("pooler-number", ("{W}/model",), {**LABELS, "pooler": 3}, "pooler: 3 is not text"),
):
    api_case(f"evaluate-domain-{cid}", "evaluate_domain", args, kwargs, expect)

# -- reproduce: every argument checked before anything is fetched, trained or written ---------------------------
for cid, args, kwargs, expect in (
    ("method-none", (None,), {}, "method: None is not text"),
    ("method-unknown", ("simcsx",), {},
     "unknown method 'simcsx'; reproduce one of: cot-bert, ifcl, jtcse, simcse, simcse++"),
    ("backbone-number", ("simcse", 3), {}, "backbone: 3 is not text"),
    ("no-paper-row", ("ifcl", "roberta-base"), {}, "the ifcl paper reports no roberta-base row"),
    ("seeds-text", ("simcse",), {"seeds": "1,2"}, "seeds: '1,2' is not a list of whole numbers"),
    ("seeds-twice", ("simcse",), {"seeds": [1, 1]}, "--seeds: give distinct whole numbers from 0 to 2^63-1"),
    ("seeds-empty", ("simcse",), {"seeds": []}, "--seeds: give at least one seed"),
    ("seeds-number", ("simcse",), {"seeds": 3}, "seeds: 3 is not a list of whole numbers"),
    ("seeds-none", ("simcse",), {"seeds": None}, "seeds: None is not a list of whole numbers"),
    ("seeds-past-int64", ("simcse",), {"seeds": [1, 2**63]}, "--seeds: give distinct whole numbers from 0 to 2^63-1"),
    ("seeds-negative", ("simcse",), {"seeds": [-1]}, "--seeds: give distinct whole numbers from 0 to 2^63-1"),
    ("rtt-models-no-dash", ("tncse",), {"rtt_models": {"enfr": "x"}}, "--rtt-models 'enfr': give SRC-TGT=MODEL"),
    ("rtt-models-empty-model", ("tncse",), {"rtt_models": {"en-fr": " "}}, "--rtt-models 'en-fr': give SRC-TGT=MODEL"),
    ("rtt-models-number-key", ("tncse",), {"rtt_models": {3: "x"}}, "--rtt-models 3: give SRC-TGT=MODEL"),
    ("sts-unknown", ("simcse",), {"sts": "full"}, "--sts 'full': choose one of auto, senteval, partial"),
    ("progress-yes", ("simcse",), {"progress": "yes"}, "progress: 'yes' is not True or False"),
    ("rtt-models-list", ("tncse",), {"rtt_models": ["en-fr"]}, "rtt_models: give a mapping"),
):
    api_case(f"reproduce-{cid}", "reproduce", args, kwargs, expect)
# every one refused while planning: before anything is fetched, and before OUT/config.yaml is written
REPRODUCE_OUT = {"sts": "partial", "output_dir": "{T}/out"}
for cid, args, kwargs, expect, setup in (
    ("output-a-file", ("simcse", "{W}/model"), {"sts": "partial", "output_dir": "{W}/afile"}, "is a file", None),
    ("output-users-config", ("simcse", "{W}/model"), REPRODUCE_OUT, "holds files that cselab reproduce did not write",
     user_file("out/config.yaml", "my: own config\n")),
    ("lr-nan", ("simcse", "{W}/model", "train.lr=nan"), REPRODUCE_OUT, "config: train.lr: Input should be a finite",
     None),
    ("max-steps-0", ("simcse", "{W}/model", "train.max_steps=0"), REPRODUCE_OUT, "config: train.max_steps", None),
    ("unknown-key", ("simcse", "{W}/model", "train.frobnicate=1"), REPRODUCE_OUT, "unknown key 'train.frobnicate'",
     None),
    ("batch-1", ("simcse", "{W}/model", "train.batch_size=1"), REPRODUCE_OUT, "in-batch negatives", None),
    ("backbone-missing", ("simcse", "{T}/nope"), REPRODUCE_OUT, "no such directory", None),
    ("backbone-text-file", ("simcse", "{W}/afile"), REPRODUCE_OUT, "a file, not a model directory", None),
):
    api_case(f"reproduce-{cid}", "reproduce", args, {**kwargs, "progress": False}, expect, CselabError, setup)
api_case("reproduce-missing-no-fetch", "reproduce", ("simcse",), {"fetch": False, "sts": "partial",
                                                                  "output_dir": "{T}/out"},
         "missing: cselab data fetch wiki1m", CselabError)

# -- adapt: every argument checked before the text is read or anything is written ---------------------------------
ADAPT_ARGS = ("{W}/corpus.txt", "{T}/adapted")
for cid, args, kwargs, expect in (
    ("text-none", (None, "{T}/adapted"), {}, "text: None is not a path or name"),
    ("output-number", ("{W}/corpus.txt", 3), {}, "output: 3 is not a path or name"),
    ("model-none", ADAPT_ARGS, {"model": None}, "model: None is not a path or name"),
    ("steps-0", ADAPT_ARGS, {"steps": 0}, "steps: 0 is not in the range x>=1"),
    ("steps-text", ADAPT_ARGS, {"steps": "5"}, "steps: '5' is not a valid integer"),
    ("seed-negative", ADAPT_ARGS, {"seed": -1}, "seed: -1 is not in the range x>=0"),
    ("no-teacher-yes", ADAPT_ARGS, {"no_teacher": "yes"}, "no_teacher: 'yes' is not True or False"),
    ("progress-yes", ADAPT_ARGS, {"progress": "yes"}, "progress: 'yes' is not True or False"),
    ("resume-1", ADAPT_ARGS, {"resume": 1}, "resume: 1 is not True or False"),
    ("task-number", ADAPT_ARGS, {"task": 3}, "task: 3 is not text"),
    ("recipe-number", ADAPT_ARGS, {"recipe": 3}, "recipe: 3 is not a path or name"),
    ("labels-number", ADAPT_ARGS, {"labels": 5}, "labels: 5 is not a path or name"),
    ("device-empty", ADAPT_ARGS, {"device": ""}, "device is empty"),
    ("task-and-recipe", ADAPT_ARGS, {"task": "search", "recipe": "simcse"},
     "give --task or --recipe, not both: --task picks the recipe cselab measured best for that task"),
):
    api_case(f"adapt-{cid}", "adapt", args, {"model": "{W}/model", **kwargs} if "model" not in kwargs else kwargs,
             expect)
for cid, kwargs, expect in (
    ("text-too-small", {}, "distinct sentences; cselab adapt needs at least 200"),
    ("teacher-and-no-teacher", {"teacher": "{W}/model", "no_teacher": True}, "give --teacher or --no-teacher"),
    ("recipe-missing", {"recipe": "{T}/nope.yaml", "no_teacher": True}, "no such file"),
    ("task-unknown", {"task": "ranking"}, "--task must be one of"),
):
    api_case(f"adapt-{cid}", "adapt", ADAPT_ARGS, {"model": "{W}/model", "no_teacher": True, **kwargs}
             if "teacher" not in kwargs else {"model": "{W}/model", **kwargs}, expect, CselabError)

# -- the workspace ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_bert_dir) -> Path:
    w = tmp_path_factory.mktemp("api-robust")
    shutil.copytree(tiny_bert_dir, w / "model")
    shutil.copytree(tiny_bert_dir, w / "damaged")
    (w / "damaged" / "cselab.json").write_text("[1, 2]")
    write_corpus(w / "corpus.txt", n=40)
    write_sts_home(w / "home")
    (w / "afile").write_text("a plain file\n")
    (w / "labels.tsv").write_text("".join(f"the dog runs {i}\t{'ab'[i % 2]}\n" for i in range(10)))
    for fmt in ("onnx", "openvino"):
        write_export(w / "model", w / f"export-{fmt}", fmt)
    return w


@pytest.fixture(scope="module")
def loaded(workspace) -> cselab.SentenceEncoder:
    return cselab.load_model(workspace / "model")


def run_config(w: Path, t: Path) -> dict[str, Any]:
    return {"method": "simcse", "model": {"backbone": str(w / "model"), "pooler": "cls", "max_length": 16},
            "data": {"corpus": str(w / "corpus.txt")},
            "train": {"output_dir": str(t / "run"), "batch_size": 4, "max_steps": 2, "eval_every": 2, "threads": 1}}


def fill(value: Any, w: Path, t: Path, model: cselab.SentenceEncoder) -> Any:
    if value is MODEL:
        return model
    if value is MODULE:
        return model.model
    if value is CONFIG:
        return run_config(w, t)
    if isinstance(value, str):
        return value.replace("{W}", str(w)).replace("{T}", str(t))
    if isinstance(value, bytes):
        return value.replace(b"{W}", str(w).encode())
    if isinstance(value, list):
        return [fill(v, w, t, model) for v in value]
    return value


def plain(value: Any) -> bool:
    """Data that deep-equality can compare (not a model)."""
    return isinstance(value, (str, bytes, int, float, list, tuple, dict, set, type(None), Path))


@pytest.mark.parametrize(("cid", "target", "args", "kwargs", "expect", "exc", "setup"), API_CASES,
                         ids=[c[0] for c in API_CASES])
def test_bad_argument_is_one_clean_error(cid, target, args, kwargs, expect, exc, setup, workspace, loaded, tmp_path):
    t = tmp_path / "t"
    t.mkdir()
    if setup is not None:
        setup(t, workspace)

    def exported() -> cselab.SentenceEncoder:
        return cselab.load_model(workspace / "export-onnx", backend="onnx")

    functions = {"load_model": cselab.load_model, "train": cselab.train, "evaluate": cselab.evaluate,
                 "evaluate_domain": cselab.evaluate_domain, "SentenceEncoder": cselab.SentenceEncoder,
                 "reproduce": cselab.reproduce, "adapt": cselab.adapt,
                 "encode": loaded.encode, "save": loaded.save, "save_export": lambda *a, **k: exported().save(*a, **k),
                 "evaluate_domain_export": lambda *a, **k: cselab.evaluate_domain(exported(), *a, **k)}
    args = tuple(fill(a, workspace, t, loaded) for a in args)
    kwargs = {k: fill(v, workspace, t, loaded) for k, v in kwargs.items()}
    before_args = [copy.deepcopy(a) for a in args if plain(a)]
    before_kwargs = {k: copy.deepcopy(v) for k, v in kwargs.items() if plain(v)}
    before = snapshot(workspace, t)
    with pytest.raises(CselabError) as info:
        functions[target](*args, **kwargs)
    assert isinstance(info.value, exc), f"{type(info.value).__name__}: {info.value}"
    if exc is UsageError:
        assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message
    assert expect.replace("{T}", str(t)).replace("{W}", str(workspace)) in message, message
    assert snapshot(workspace, t) == before, "files were written or changed"
    assert ([a for a in args if plain(a)] == before_args
            and {k: v for k, v in kwargs.items() if plain(v)} == before_kwargs)


def test_the_suite_covers_every_public_function():
    assert len({c[0] for c in API_CASES}) == len(API_CASES), "case ids must be unique"
    covered = {c[1] for c in API_CASES}
    exported = {name for name in cselab.__all__ if callable(getattr(cselab, name))}
    exported -= {"CselabError", "UsageError"}
    assert exported <= covered | {"SentenceEncoder"} and {"encode", "save"} <= covered, exported - covered
    assert len(API_CASES) >= 80


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"progress": "yes"}, {"labels": 5}, {"precision": "fast"}])
def test_evaluate_domain_refuses_a_misuse_before_any_work(kwargs, workspace, monkeypatch):
    from cselab.evaluation import domain

    monkeypatch.setattr(domain, "load_inputs", lambda *a, **k: pytest.fail("a file was read"))
    monkeypatch.setattr(domain, "score_inputs", lambda *a, **k: pytest.fail("the model was loaded or run"))
    with pytest.raises(UsageError):
        cselab.evaluate_domain(str(workspace / "model"), **{"labels": str(workspace / "labels.tsv"), **kwargs})


def test_a_save_replaces_only_what_cselab_saved(loaded, tmp_path):
    from cselab.models.sentence_model import SAVING_MARK

    first = loaded.save(tmp_path / "m")
    saved = {p.relative_to(first).as_posix() for p in first.rglob("*")}
    assert "cselab.json" in saved and SAVING_MARK not in saved
    (first / "model.safetensors").write_bytes(b"an older save")  # a model cselab saved is replaced whole
    assert loaded.save(tmp_path / "m") == first
    assert {p.relative_to(first).as_posix() for p in first.rglob("*")} == saved
    np.testing.assert_array_equal(cselab.load_model(first).encode(["a man"]), loaded.encode(["a man"]))
    (tmp_path / "empty").mkdir()
    assert cselab.load_model(loaded.save(tmp_path / "empty")).embedding_dim == loaded.embedding_dim
    # what a killed save left beside it (being written: marked; set aside: a whole model) is cselab's to remove
    (tmp_path / "k.tmp").mkdir()
    (tmp_path / "k.tmp" / SAVING_MARK).touch()
    (tmp_path / "k.tmp" / "half.bin").write_bytes(b"x")
    shutil.copytree(first, tmp_path / "k.old")
    loaded.save(tmp_path / "k")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "k", "m"]


def test_usage_error_is_the_documented_type():
    assert issubclass(UsageError, CselabError) and issubclass(UsageError, ValueError)
    assert cselab.UsageError is UsageError and cselab.CselabError is CselabError
    assert {"UsageError", "CselabError"} <= set(cselab.__all__)


# -- what a good call returns where a bad one used to fail ----------------------------------------------------
def test_encode_of_no_sentences_is_an_empty_float32_array(loaded):
    for empty in ([], (), iter([]), np.array([], dtype=str)):
        out = loaded.encode(empty)
        assert isinstance(out, np.ndarray) and out.shape == (0, 32) and out.dtype == np.float32
    tensor = loaded.encode([], convert_to_tensor=True, normalize=True)
    assert isinstance(tensor, torch.Tensor) and tuple(tensor.shape) == (0, 32) and tensor.dtype == torch.float32


def test_encode_takes_any_ordered_collection_of_strings(loaded):
    texts = ["a man plays the guitar .", "the dog runs"]
    expected = loaded.encode(texts)
    for same in (tuple(texts), (t for t in texts), np.array(texts)):
        assert np.array_equal(loaded.encode(same), expected)
    assert np.array_equal(loaded.encode(texts, batch_size=1), expected)


def test_no_call_changes_its_arguments(workspace, loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("CSELAB_HOME", str(workspace / "home"))
    texts = ["the dog runs", "a man plays the guitar ."]
    kept = list(texts)
    loaded.encode(texts, batch_size=1)
    tasks, splits = ["stsb"], ["dev", "test"]
    cselab.evaluate(loaded, tasks, splits=splits)
    assert texts == kept and tasks == ["stsb"] and splits == ["dev", "test"]
    config = run_config(workspace, tmp_path)
    config["method_options"] = {"temperature": 0.05}
    overrides = ["train.max_steps=2", "train.lr=1e-3", "model.dropout=0.2"]
    config_before, overrides_before = copy.deepcopy(config), list(overrides)
    best = cselab.train(config, *overrides, progress=False)
    assert (best / "modules.json").is_file()
    assert config == config_before and overrides == overrides_before  # deep equality: nested sections too
    for bad in (("train.lrr=1",), ("train.lr=0.5",)):  # failing calls leave them too (a changed finished run)
        with pytest.raises(CselabError, match="train.lrr|train.lr: 0.001 -> 0.5"):
            cselab.train(config, *overrides, *bad, resume=True, progress=False)
        assert config == config_before and overrides == overrides_before


# -- the API says what the CLI says --------------------------------------------------------------------------
SAME_RULE = [  # (API call, CLI arguments, the CLI's option -> the API's parameter)
    (lambda w, m: m.encode(["a man"], batch_size=0),
     ["encode", "{W}/model", "--input", "{W}/corpus.txt", "--output", "{T}/o.npy", "--batch-size", "0"],
     ("--batch-size", "batch_size")),
    (lambda w, m: cselab.load_model(w / "model", max_length=0), ["eval", "{W}/model", "--max-length", "0"],
     ("--max-length", "max_length")),
    (lambda w, m: cselab.load_model(w / "model", max_length=1024),
     ["eval", "{W}/model", "--max-length", "1024", "--tasks", "stsb"], ("--max-length", "max_length")),
    (lambda w, m: cselab.load_model(w / "model", pooler="avg"), ["eval", "{W}/model", "--pooler", "avg"], ("", "")),
    (lambda w, m: cselab.evaluate(m, ","), ["eval", "{W}/model", "--tasks", ","], ("--tasks", "tasks")),
    (lambda w, m: cselab.evaluate(m, "stsb", splits=","), ["eval", "{W}/model", "--splits", ","],
     ("--splits", "splits")),
    (lambda w, m: cselab.evaluate(m, "stsb", splits=["val"]), ["eval", "{W}/model", "--splits", "val"], ("", "")),
    (lambda w, m: cselab.evaluate(m, "stsb", batch_size=0), ["eval", "{W}/model", "--batch-size", "0"],
     ("--batch-size", "batch_size")),
    (lambda w, m: cselab.train(run_config(w, w / "x"), "train.batch_size=0"),
     ["train", "--config", "{T}/c.yaml", "train.batch_size=0"], ("", "")),
    (lambda w, m: cselab.train(run_config(w, w / "x"), method="nope"),
     ["train", "--config", "{T}/c.yaml", "--method", "nope"], ("", "")),
]


@pytest.mark.parametrize(("call", "cli_args", "names"), SAME_RULE, ids=[" ".join(c[1][:4]) for c in SAME_RULE])
def test_the_api_message_is_the_cli_message(call, cli_args, names, workspace, loaded, tmp_path, monkeypatch, capsys):
    import json

    import yaml

    monkeypatch.setenv("CSELAB_HOME", str(workspace / "home"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(run_config(workspace, workspace / "x")))))
    with pytest.raises(CselabError) as info:
        call(workspace, loaded)
    code, _, err = run_cli([a.replace("{W}", str(workspace)).replace("{T}", str(tmp_path)) for a in cli_args], capsys)
    assert code == 2
    cli = err.strip().removeprefix("error: ")
    option, parameter = names
    if cli.startswith(f"Invalid value for '{option}': "):  # click's wording of a range: "NAME: VALUE is not ..."
        cli = f"{option}: " + cli.removeprefix(f"Invalid value for '{option}': ").removesuffix(".")
    assert str(info.value) == (cli.replace(option, parameter) if option else cli)
