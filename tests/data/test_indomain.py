"""The adaptation protocol's groundwork: the in-domain corpora (held-out sentences removed), the test-set
overlap a record carries, the presets, step 0 as a selectable candidate, and the adapt table."""

import json
import random
from pathlib import Path

import pytest
import torch

from cselab.cli import main
from cselab.config.run_config import load_config
from cselab.data.evalsets.indomain import (
    INDOMAIN_CORPORA,
    build_indomain_corpora,
    eval_task_sentences,
    indomain_path,
    text_overlap,
)
from cselab.data.evalsets.sts import PART_TASKS
from cselab.data.text.training_data import training_text_summary
from cselab.errors import CselabError
from cselab.training.pipeline import plan_pipeline
from tests.helpers import REPO_ROOT, write_corpus

REPO = REPO_ROOT
# one per method; -D is configs/distill/adapt-minilm-uc.yaml
ADAPT_PRESETS = sorted(REPO.glob("configs/*/adapt-minilm.yaml"))
_PART_DATASETS = [entry for entries in PART_TASKS.values() for entry in entries]


def _raw_rows(home: Path) -> dict[str, list[list[str]]]:
    """The STS-B files split on tabs here, independently of the library's reader."""
    return {split: [line.split("\t")
                    for line in (home / "sts/stsb" / f"sts-{split}.csv").read_text().splitlines() if line]
            for split in ("train", "dev", "test")}


def _norm(sentence: str) -> str:
    return " ".join(sentence.lower().split())


def _write_stsb(home: Path, rows: dict[str, list[tuple[str, str, str, str]]]) -> Path:
    """STS-B files from (dataset, year, s1, s2) rows; score 2.5 everywhere."""
    directory = home / "sts" / "stsb"
    directory.mkdir(parents=True, exist_ok=True)
    for split, split_rows in rows.items():
        lines = [f"main\t{d}\t{y}\t{i:04d}\t2.500\t{a}\t{b}" for i, (d, y, a, b) in enumerate(split_rows)]
        (directory / f"sts-{split}.csv").write_text("\n".join(lines) + "\n")
    return home


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_hand_built_split_removes_exactly_the_held_out_sentences(tmp_path):
    home = _write_stsb(tmp_path / "home", {
        "train": [
            ("MSRvid", "2012train", "A man plays a guitar.", "A dog runs."),      # kept (not a scored set)
            ("MSRvid", "2012train", "A  MAN plays a guitar.", "A cat sleeps."),   # case/space duplicate; kept once
            ("MSRvid", "2012train", "The girl sings.", "A bird flies."),         # "The girl sings." is in dev
            ("headlines", "2013", "Stocks fall sharply.", "Markets drop."),       # an sts13-part pair
            ("MSRpar", "2012test", "He said no.", "A dog runs."),                 # sts12-part; shares "A dog runs."
        ],
        "dev": [("MSRvid", "2012train", "the girl sings.", "A horse eats.")],
        # STS17 rows are dev/test rows; one test pair of every partial set keeps the evaluation data complete
        "test": [("track5.en-en", "2017", "A bird flies.", "Two men talk."),
                 *[(d, y, f"Filler {i} one.", f"Filler {i} two.") for i, (d, y) in enumerate(_PART_DATASETS)]],
    })
    build_indomain_corpora(home)
    minus_stsb = _read_lines(indomain_path("stsb-train-minus-stsb-eval", home))
    minus_all = _read_lines(indomain_path("stsb-train-minus-all-eval", home))
    # distinct train sentences (case-folded): guitar, dog, cat, girl, bird, stocks, markets, he-said = 8
    assert sorted(minus_stsb) == sorted(["A man plays a guitar.", "A dog runs.", "A cat sleeps.",
                                         "Stocks fall sharply.", "Markets drop.", "He said no."])
    # the scored STS12/13 pairs take "A dog runs." with them although it also sits in an unscored train pair
    assert sorted(minus_all) == sorted(["A man plays a guitar.", "A cat sleeps."])
    manifest = json.loads(indomain_path("stsb-train-minus-all-eval", home).with_suffix(".json").read_text())
    assert (manifest["train_sentences"], manifest["removed"], manifest["kept"]) == (8, 6, 2)


def _random_stsb_home(home: Path, seed: int = 3) -> Path:
    """STS-B files of random sentences over scored and unscored (dataset, year)s, where dev/test pairs and
    scored train pairs reuse train sentences (some in another case or spacing) and train repeats itself."""
    rng = random.Random(seed)
    words = ["man", "woman", "dog", "guitar", "plays", "runs", "red", "park", "eats", "small", "house", "water"]
    pool = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))).capitalize() + "." for _ in range(150)]
    metadata = [*_PART_DATASETS, ("MSRvid", "2012train"), ("MSRpar", "2012train"), ("MSRvid", "2012train")]

    def variant(sentence: str) -> str:
        return rng.choice([sentence, sentence.upper(), sentence.replace(" ", "  ", 1)])

    sts17 = ("track5.en-en", "2017")  # as in the real STS-B, the STS17 rows are dev/test rows only
    rows = {split: [(*metadata[(i + k) % len(metadata)], variant(rng.choice(pool)), variant(rng.choice(pool)))
                    for i in range(n)] for k, (split, n) in enumerate((("train", 80), ("dev", 20), ("test", 20)))}
    rows["train"] = [r if r[:2] != sts17 else ("MSRvid", "2012train", *r[2:]) for r in rows["train"]]
    return _write_stsb(home, rows)


def test_removal_matches_an_independent_set_computation(tmp_path):
    home = _random_stsb_home(tmp_path / "home")
    raw = _raw_rows(home)
    manifests = {m["name"]: m for m in build_indomain_corpora(home)}

    train = {_norm(s) for r in raw["train"] for s in (r[5], r[6])}
    eval_pairs = {_norm(s) for split in ("dev", "test") for r in raw[split] for s in (r[5], r[6])}
    scored = {(d, y) for entries in PART_TASKS.values() for d, y in entries}
    part_pairs = {_norm(s) for rows in raw.values() for r in rows if (r[1], r[2]) in scored for s in (r[5], r[6])}
    expected = {"stsb-train-minus-stsb-eval": train - eval_pairs,
                "stsb-train-minus-all-eval": train - eval_pairs - part_pairs}
    assert expected["stsb-train-minus-all-eval"] < expected["stsb-train-minus-stsb-eval"] < train  # the fixture bites
    for name in INDOMAIN_CORPORA:
        lines = _read_lines(indomain_path(name, home))
        assert len(lines) == len(set(map(_norm, lines))), "one line per distinct sentence"
        assert set(map(_norm, lines)) == expected[name]
        assert manifests[name]["kept"] == len(expected[name]) and manifests[name]["train_sentences"] == len(train)
        # written as they appear in STS-B (case kept; runs of spaces collapsed, as every STS reader does)
        assert set(lines) <= {" ".join(s.split()) for r in raw["train"] for s in (r[5], r[6])}


def test_overlap_marks_the_partial_sets_of_the_stsb_only_text(tmp_path):
    home = _random_stsb_home(tmp_path / "home")
    build_indomain_corpora(home)
    summary = {name: training_text_summary(name, home) for name in INDOMAIN_CORPORA}
    assert summary["stsb-train-minus-all-eval"]["not_held_out"] == []
    assert all(n == 0 for n in summary["stsb-train-minus-all-eval"]["overlap"].values())
    assert summary["stsb-train-minus-stsb-eval"]["overlap"]["stsb"] == 0
    assert summary["stsb-train-minus-stsb-eval"]["overlap"]["sts17-en"] == 0
    # hand count for one task: distinct sts13-part sentences (any split) that are train sentences outside dev/test
    raw = _raw_rows(home)
    evals = {_norm(s) for split in ("dev", "test") for r in raw[split] for s in (r[5], r[6])}
    train = {_norm(s) for r in raw["train"] for s in (r[5], r[6])} - evals
    sts13 = {_norm(s) for rows in raw.values() for r in rows if (r[1], r[2]) == ("headlines", "2013")
             for s in (r[5], r[6])}
    assert summary["stsb-train-minus-stsb-eval"]["overlap"]["sts13-part"] == len(sts13 & train) > 0
    assert "sts13-part" in summary["stsb-train-minus-stsb-eval"]["not_held_out"]
    assert text_overlap(["A MAN  eats food."], {"t": {"a man eats food."}, "u": {"x"}}) == {"t": 1, "u": 0}
    assert set(eval_task_sentences(home)) == {"sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part",
                                              "stsb", "sts17-en"}


def test_cli_builds_and_reports_a_missing_sts_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "indomain"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "cselab data fetch sts" in err
    assert len(err.splitlines()) == 1
    home = _random_stsb_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    main(["data", "indomain"])
    out = capsys.readouterr().out
    assert "stsb-train-minus-all-eval.txt" in out and "not held out: none" in out
    # the names are training corpora now
    config = load_config(None, ["data.corpus=stsb-train-minus-all-eval"])
    from cselab.data.text.training_data import load_training_sentences

    assert list(load_training_sentences(config.data)) == _read_lines(indomain_path("stsb-train-minus-all-eval", home))


def test_unbuilt_indomain_corpus_names_the_command(tmp_path):
    from cselab.data.text.training_data import corpus_path

    with pytest.raises(CselabError, match="cselab data indomain"):
        corpus_path("stsb-train-minus-stsb-eval", tmp_path)


@pytest.mark.parametrize("preset", [p.relative_to(REPO).as_posix() for p in ADAPT_PRESETS])
def test_adapt_presets(preset):
    from cselab.methods import METHODS

    config = load_config(REPO / preset)
    METHODS.get(config.method).Options.model_validate(config.method_options)
    assert config.protocol == "adapt" and config.model.backbone == "all-MiniLM-L6-v2"
    tc = config.train
    assert (tc.precision, tc.eval_every, tc.eval_at_start, tc.batch_size, tc.dev_task) == ("auto", 25, True, 64, "stsb")
    expected_text = "parallel-de" if config.method == "ifcl" else "stsb-train-minus-all-eval"
    assert config.data.corpus == expected_text
    pipeline = config.method_options.get("pipeline")
    if pipeline:
        # the twins train CLS vectors with each stage-1 MLP as P: CLS + MLP, and the CPU protocol's measured
        # settings for both stages (the adapt settings were measured from a mean-pooled start only)
        cpu = load_config(REPO / preset.replace("adapt-minilm", "cpu-minilm"))
        assert config.model.pooler == "cls" and all(c.model.pooler == "cls" for c in plan_pipeline(config).stage1)
        assert pipeline["stage1"]["settings"] == cpu.method_options["pipeline"]["stage1"]["settings"]
        assert (tc.lr, config.method_options["temperature"], config.model.dropout) == (cpu.train.lr, 0.05, 0.1)
    else:
        assert config.model.pooler == "mean", "the checkpoint's own pooling (no train-only MLP: it comes with cls only)"
        assert tc.lr == 1e-5 and config.method_options["temperature"] == 0.2


def test_adapt_distill_preset_starts_from_the_checkpoint():
    """-D of the adapt protocol: one mean-pooled MiniLM (the checkpoint, step 0 a candidate) regressing onto a +UC
    ensemble saved where lab/adapt_protocol/adapt_uc.py puts the in-domain JTCSE twin's."""
    config = load_config(REPO / "configs/distill/adapt-minilm-uc.yaml")
    assert (config.protocol, config.method, config.model.backbone, config.model.pooler) == \
        ("adapt", "distill", "all-MiniLM-L6-v2", "mean")
    assert config.train.eval_at_start and config.train.eval_every == 25 and config.model.dropout == 0.0
    assert config.data.corpus == "stsb-train-minus-all-eval"
    assert config.method_options["teacher"] == "runs/adapt/jtcse-indomain/stage2-uc-all-MiniLM-L6-v2"


def test_adapt_presets_cover_the_five_methods():
    methods = {load_config(p).method for p in ADAPT_PRESETS}
    assert methods == {"simcse", "simcse++", "ifcl", "tncse", "jtcse"}
    outputs = [load_config(p).train.output_dir for p in ADAPT_PRESETS]
    assert len(set(outputs)) == len(outputs)


def _mean_pooled(model_dir: Path, texts: list[str]) -> torch.Tensor:
    """Mean pooling of the untouched checkpoint, computed here from transformers directly."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return (hidden * mask).sum(1) / mask.sum(1)


def test_step_zero_is_evaluated_and_selectable(tiny_bert_dir, tmp_path, monkeypatch, sts_home):
    """When no training step beats the untouched checkpoint on dev, the selected model IS the checkpoint."""
    from cselab.models.sentence_model import load_model
    from cselab.training.trainer import Trainer

    config = load_config(REPO / "configs/simcse/adapt-minilm.yaml", [
        f"model.backbone={tiny_bert_dir}", f"data.corpus={write_corpus(tmp_path / 'c.txt')}",
        f"train.output_dir={tmp_path / 'run'}", "train.batch_size=8", "train.max_steps=4", "train.eval_every=2",
        "train.lr=1e-3", "model.max_length=16"])
    dev = iter([50.0, 40.0, 45.0])  # step 0, 2, 4: dev falls after the start
    monkeypatch.setattr(Trainer, "evaluate_dev", lambda self: next(dev))
    result = Trainer(config).run()
    assert (result.best_step, result.best_dev, result.dev_at_start) == (0, 50.0, 50.0)
    texts = ["a man plays the guitar .", "the dog runs in the park"]
    best = load_model(tmp_path / "run" / "best")
    assert best.head is None
    with torch.no_grad():
        torch.testing.assert_close(best.encode(texts), _mean_pooled(tiny_bert_dir, texts), atol=1e-5, rtol=1e-5)
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "dev" in r] == [0, 2, 4]


def test_every_record_names_its_text_and_overlap(tmp_path, monkeypatch):
    from cselab.training.runs import results_record
    from cselab.training.trainer import TrainResult

    home = _random_stsb_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    build_indomain_corpora(home)
    result = TrainResult("out", 200, 0, 86.0, 86.0, 10.0, 5.0, 100.0)
    config = load_config(REPO / "configs/simcse/adapt-minilm.yaml", ["data.corpus=stsb-train-minus-stsb-eval"])
    record = results_record(config, result, {"stsb": 82.0})
    assert record["protocol"] == "adapt"
    assert record["training_text"] == training_text_summary("stsb-train-minus-stsb-eval", home)
    missing = results_record(load_config(REPO / "configs/simcse/adapt-minilm.yaml", ["data.corpus=nope.txt"]),
                             result, {"stsb": 82.0})
    assert missing["training_text"]["corpus"] == "nope.txt" and "not found" in missing["training_text"]["error"]
    # a run of no protocol describes its text the same way (here one written for it: it holds no test sentence)
    own = tmp_path / "mine.txt"
    own.write_text("a sentence of my own\nanother one of mine\n")
    plain = results_record(load_config(REPO / "configs/simcse/cpu-minilm.yaml", [f"data.corpus={own}"]), result, {})
    assert "protocol" not in plain
    assert plain["training_text"] == training_text_summary(str(own), home)
    assert plain["training_text"]["sentences"] == 2 and plain["training_text"]["not_held_out"] == []


def test_the_summary_counts_a_streamed_text_as_the_read_corpus_and_a_set_computation_do(tmp_path):
    """The summary streams the text; its count and overlap equal those of the whole text read by read_corpus and
    intersected with each task's keys as sets, here on a file with a BOM, CRLF, blank and invalid UTF-8 lines."""
    from cselab.data.text.corpus import read_corpus

    home = _random_stsb_home(tmp_path / "home")
    tasks = eval_task_sentences(home)
    name, keys = next((n, k) for n, k in tasks.items() if k)
    taken = sorted(keys)[:3]
    path = tmp_path / "text.txt"
    body = "\r\n".join([taken[0].upper(), "", "  " + taken[1] + "  ", "not a test sentence", taken[0], "   "])
    path.write_bytes(b"\xef\xbb\xbf" + body.encode() + b"\r\n\xff\xfe broken\n" + taken[2].encode())
    summary = training_text_summary(str(path), home)
    sentences = read_corpus(path).sentences
    assert summary["sentences"] == len(sentences) == 5
    expected = {task: len({_norm(s) for s in sentences} & task_keys) for task, task_keys in tasks.items()}
    assert summary["overlap"] == expected and expected[name] == 3
