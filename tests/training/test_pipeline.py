"""The TNCSE/JTCSE two-stage pipeline end to end on tiny BERT (skip and resume), distillation, the +UC
ensemble, the ablation grid and the shipped presets."""

import json
from pathlib import Path

import pytest
import torch

from cselab.config.run_config import load_config
from cselab.data.text.augment import count_lines
from cselab.errors import CselabError
from cselab.methods import METHODS
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model
from cselab.research.experiments.ensemble import ensemble
from cselab.training.pipeline import distill_config, plan_pipeline, run_twin_pipeline
from cselab.training.trainer import Trainer
from tests.helpers import REPO_ROOT, build_tiny_model_dir, write_corpus

ROOT = REPO_ROOT
PIPELINE = ("method_options.pipeline={stage1: {settings: {train: {lr: 1.0e-3, max_steps: 3, eval_every: 3}}, "
            "encoders: [{augmentation: {kind: word_dropout, p: 0.2}}, "
            "{augmentation: {kind: word_swap}, settings: {train: {lr: 5.0e-4}}}]}}")


def twin_pipeline_config(backbone, corpus, out, method="jtcse", *extra):
    return load_config(None, [
        f"model.backbone={backbone}", f"data.corpus={corpus}", f"train.output_dir={out}", "train.batch_size=8",
        "train.max_steps=2", "train.eval_every=2", "train.lr=1e-4", "train.scheduler=constant",
        "model.max_length=16", "train.eval_at_start=false", PIPELINE, *extra,
    ], method=method)


def test_plan_derives_the_stage_configs(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    config = twin_pipeline_config(tiny_bert_dir, corpus, tmp_path / "run", "tncse", "model.dropout=0.001")
    plan = plan_pipeline(config)
    one, two = plan.stage1
    assert one.method == two.method == "simcse" and one.method_options == {}
    assert (one.train.lr, two.train.lr) == (1e-3, 5e-4), "encoder settings win over the shared stage-1 settings"
    assert one.train.max_steps == 3 and one.train.scheduler == "constant", "the rest comes from the stage-2 config"
    assert one.model.dropout == 0.001 and one.model.backbone == str(tiny_bert_dir)
    assert Path(one.data.corpus) == tmp_path / "run/stage1/augmented/word_dropout-p0.2-s42.txt"
    assert Path(two.data.corpus) == tmp_path / "run/stage1/augmented/word_swap-s43.txt"
    assert Path(two.train.output_dir) == tmp_path / "run/stage1/encoder_2"
    stage2 = plan.stage2
    assert Path(stage2.train.output_dir) == tmp_path / "run/stage2" and stage2.train.lr == 1e-4
    assert stage2.method_options["encoder_1"] == str(tmp_path / "run/stage1/encoder_1/best")
    assert stage2.data.corpus == str(corpus)


@pytest.mark.parametrize("bad, message", [
    ("method_options.pipeline={stage1: {encoders: [{augmentation: {kind: word_swap}}]}}", "exactly two"),
    ("method_options.pipeline={stage1: {setings: {}, encoders: [{augmentation: {kind: word_swap}}, "
     "{augmentation: {kind: word_swap}}]}}", "unknown key 'method_options.pipeline.stage1.setings'"),
    ("method_options.pipeline={stage1: {settings: {train: {lr: -1}}, encoders: [{augmentation: {kind: word_swap}}, "
     "{augmentation: {kind: word_swap}}]}}", "train.lr"),
])
def test_plan_errors(tiny_bert_dir, tmp_path, bad, message):
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    config = load_config(None, [f"data.corpus={corpus}", bad], method="tncse")
    with pytest.raises(CselabError, match=message):
        plan_pipeline(config)


def test_plan_needs_a_pipeline_block_and_a_twin_method():
    with pytest.raises(CselabError, match="needs a method_options.pipeline block"):
        plan_pipeline(load_config(None, [], method="tncse"))
    with pytest.raises(CselabError, match="not 'simcse'"):
        plan_pipeline(load_config(None, [], method="simcse"))


def test_two_stage_pipeline_runs_skips_and_resumes(tiny_bert_dir, sts_home, tmp_path, monkeypatch):
    import cselab.training.results as results

    scored = []
    monkeypatch.setattr(results, "score_test_sets", lambda path, **kw: scored.append(Path(path)) or {"stsb": 12.5})
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    out = tmp_path / "run"
    config = twin_pipeline_config(tiny_bert_dir, corpus, out, "jtcse", "method_options.num_ca_layers=1")
    results_file = tmp_path / "results.jsonl"
    result = run_twin_pipeline(config, results_file=results_file, variant="tiny")
    assert result.skipped == []
    assert [r.steps for r in result.stage1] == [3, 3] and result.stage2.steps == 2
    for k in (1, 2):
        best = load_model(out / f"stage1/encoder_{k}/best")
        assert best.head is not None, "stage 1 keeps its MLP for stage 2"
    augmented = sorted((out / "stage1/augmented").glob("*.txt"))
    assert len(augmented) == 2 and all(count_lines(a) == count_lines(corpus) for a in augmented)
    stage2_options = json.loads((out / "stage2/best/cselab.json").read_text())["training"]["config"]["method_options"]
    assert stage2_options["encoder_2"] == str(out / "stage1/encoder_2/best")
    assert isinstance(load_model(result.model_dir), TwinModel)
    # the stage-2 best model is test-scored once; the record counts both stages' wall time
    assert scored == [result.model_dir] and result.scores == {"stsb": 12.5}
    record = json.loads(results_file.read_text())
    assert record["method"] == "jtcse" and record["variant"] == "tiny" and record["scores"]["stsb"] == 12.5
    assert record["wall_s"] == pytest.approx(sum(r.wall_s for r in [*result.stage1, result.stage2]), abs=0.1)
    summaries = {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")}
    assert len(summaries) == 3

    again = run_twin_pipeline(config)
    assert again.skipped == ["stage1/encoder_1", "stage1/encoder_2", "stage2"]
    assert again.stage2 == result.stage2 and again.scores == {"stsb": 12.5}
    assert len(scored) == 1, "a finished pipeline is not scored again"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")} == summaries, "finished stages not rerun"

    # an interrupted stage 2 (state saved, no summary yet) is resumed, not restarted and not skipped
    (out / "stage2/summary.json").unlink()
    resumed = run_twin_pipeline(config, evaluate_test=False)
    assert resumed.skipped == ["stage1/encoder_1", "stage1/encoder_2"]
    assert resumed.stage2.steps == 2 and resumed.stage2.best_step == result.stage2.best_step

    changed = twin_pipeline_config(tiny_bert_dir, corpus, out, "jtcse", "method_options.num_ca_layers=1",
                                   "model.max_length=12")
    with pytest.raises(CselabError, match="different configuration .model.max_length: 16 -> 12"):
        run_twin_pipeline(changed, evaluate_test=False)


def _mse(student, teacher, texts):
    return float(((student.encode(texts) - teacher.encode(texts)) ** 2).mean())


def test_distillation_reduces_the_mse_to_the_twin(tmp_path, sts_home):
    teacher = TwinModel(*(Encoder.from_pretrained(build_tiny_model_dir(tmp_path / f"t{s}", "bert", seed=s))
                          for s in (1, 2)))
    save_model(teacher, tmp_path / "teacher")
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    texts = corpus.read_text().splitlines()
    teacher = load_model(tmp_path / "teacher")
    before = _mse(Encoder.from_pretrained(student_dir), teacher, texts)
    config = distill_config(tmp_path / "teacher", str(student_dir), corpus, output_dir=tmp_path / "distilled",
                            overrides=["train.batch_size=16", "train.max_steps=8", "train.lr=2e-3",
                                       "train.eval_every=8", "train.eval_at_start=false", "model.max_length=16",
                                       "train.scheduler=constant"])
    result = Trainer(config).run()
    assert result.best_step == 8
    student = load_model(tmp_path / "distilled/best")
    assert isinstance(student, Encoder) and student.head is None
    after = _mse(student, teacher, texts)
    assert after < 0.5 * before, (before, after)
    from safetensors.torch import load_file

    keys = load_file(tmp_path / "distilled/last/method.safetensors").keys()
    assert keys and all(k.startswith("student.") for k in keys), "the frozen teacher is not checkpointed"


def test_ensemble_is_the_weighted_sum(tmp_path):
    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "a", "bert", seed=1))
    b = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "b", "bert", seed=2))
    c = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "c", "bert", seed=4))
    save_model(TwinModel(a, b), tmp_path / "twin")
    save_model(c, tmp_path / "other")
    path = ensemble(tmp_path / "twin", tmp_path / "other", tmp_path / "ens", weight=0.7)
    model = load_model(path)
    assert isinstance(model, EnsembleModel)
    texts = ["a man plays the guitar", "the dog runs in the park"]
    expected = 0.3 * (a.encode(texts) + b.encode(texts)) + 0.7 * c.encode(texts)
    torch.testing.assert_close(model.encode(texts), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(CselabError, match="weight"):
        ensemble(tmp_path / "twin", tmp_path / "other", tmp_path / "bad", weight=1.5)


@pytest.mark.parametrize("preset", sorted(p.relative_to(ROOT).as_posix()
                                          for p in ROOT.glob("configs/[tj][nt]cse/*.yaml")))
def test_presets_validate(preset):
    config = load_config(ROOT / preset)
    plan = plan_pipeline(config)
    METHODS.get(config.method).Options.model_validate(plan.stage2.method_options)
    assert len(plan.stage1) == 2 and all(c.method == "simcse" and c.model.pooler == "cls" for c in plan.stage1)
