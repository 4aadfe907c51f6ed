"""The analysis reports (cselab.research.analysis.*_report) and the seeds/ablation runs
(cselab.research.experiments.seeds, .ablation) on tiny random BERTs and a tiny STS-B: each writes real PNG and JSON
files, and its numbers equal an independent computation (direct loops over the STS-B file read here, HF's own attention
outputs, a hand MAC count, scipy's paired t-test)."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import BertConfig, BertModel

from cselab.errors import CselabError
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model
from cselab.research.analysis.align_uniform_report import align_uniform
from cselab.research.analysis.attention_report import attention_report
from cselab.research.analysis.cost_report import cost_report
from cselab.research.analysis.density_report import density_report
from cselab.research.experiments.ablation import ablation_run
from cselab.research.experiments.recorded_runs import _config_differences, seed_overrides
from cselab.research.experiments.seeds import seeds_run
from cselab.research.reporting.ablation_report import ablation_report
from cselab.research.reporting.seeds_report import seeds_report
from cselab.research.reporting.tables import ablation_table, seeds_table
from cselab.training.results import read_records
from tests.helpers import REPO_ROOT, build_tiny_model_dir, write_corpus

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000


def read_json(path) -> dict:
    data = json.loads(path.read_text())
    assert data["git"] and data["date"] and "machine" in data  # provenance
    return data


CRAFTED_TEST = [  # gold, sentence 1, sentence 2: positives (> 4) with different sentences, 4.0 exactly (not a
    # positive), and every density group with its boundaries (1.0 is in [1,2), 4.0 in [4,5])
    (4.2, "a man plays the guitar.", "a man is playing the guitar."),
    (4.8, "the dog runs on the road.", "the dog is running on the road."),
    (5.0, "a woman eats food.", "a woman eats food."),
    (4.6, "a man rides a horse.", "a man is riding a horse."),
    (4.0, "the cat sits on the chair.", "a cat sits on the chair."),
    (3.99, "two men ride the horse.", "two men are riding horses."),
    (3.4, "a child walks in the park.", "a child runs in the park."),
    (2.0, "the bird sits on the table.", "the dog sits on the bed."),
    (1.2, "a young woman plays the piano.", "an old man eats food."),
    (1.0, "a woman plays the guitar.", "the dog eats food."),
    (0.5, "the car is red.", "the book is on the table."),
    (0.0, "they play music.", "she sits on the grass."),
]


def write_crafted_stsb_test(home) -> None:
    lines = [f"main\tMSRvid\t2012test\t{i:04d}\t{g}\t{a}\t{b}" for i, (g, a, b) in enumerate(CRAFTED_TEST)]
    (home / "sts" / "stsb" / "sts-test.csv").write_text("\n".join(lines) + "\n")


def stsb_test_rows(home):
    """(sentence1, sentence2, gold) of the fake STS-B test file, parsed here without cselab."""
    rows = []
    for line in (home / "sts" / "stsb" / "sts-test.csv").read_text().splitlines():
        f = line.split("\t")
        rows.append((f[5], f[6], float(f[4])))
    return rows


def unit(x: torch.Tensor) -> np.ndarray:
    a = x.double().numpy()
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def embed_rows(model, rows) -> tuple[np.ndarray, np.ndarray]:
    """Unit embeddings of both sides of every row. The distinct sentences are encoded in ONE batch: a random
    tiny BERT puts every cosine near 0.99, so the float noise of other paddings would reorder near-ties and
    move the Spearman; a repeated sentence gets the very same vector, so tied pairs stay exactly tied."""
    distinct = list(dict.fromkeys(s for s1, s2, _ in rows for s in (s1, s2)))
    vectors = dict(zip(distinct, unit(model.encode(distinct, batch_size=len(distinct))), strict=True))
    return np.stack([vectors[s] for s, _, _ in rows]), np.stack([vectors[s] for _, s, _ in rows])


def cosine64(model, rows) -> np.ndarray:
    """SentEval's predicted similarity: float64 cosine of the raw embeddings (torch's formula, the one the STS
    evaluator uses). Identical sentences (every gold-5 pair here) have cosine 1 up to rounding, and Spearman
    ranks those near-ties, so the score is only reproducible with the same float64 formula."""
    distinct = list(dict.fromkeys(s for s1, s2, _ in rows for s in (s1, s2)))
    emb = dict(zip(distinct, model.encode(distinct, batch_size=len(distinct)).double(), strict=True))
    a = torch.stack([emb[s] for s, _, _ in rows])
    b = torch.stack([emb[s] for _, s, _ in rows])
    return torch.nn.functional.cosine_similarity(a, b, dim=1).numpy()


@pytest.fixture(scope="module")
def second_bert_dir(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-bert-2"), "bert", seed=1)


@pytest.fixture(scope="module")
def twin_dir(tiny_bert_dir, second_bert_dir, tmp_path_factory):
    twin = TwinModel(Encoder.from_pretrained(tiny_bert_dir), Encoder.from_pretrained(second_bert_dir))
    return save_model(twin, tmp_path_factory.mktemp("twin") / "twin")


# --------------------------------------------------------------------------------------------------
# alignment / uniformity and density
# --------------------------------------------------------------------------------------------------


def test_align_uniform_matches_direct_loops(tiny_bert_dir, second_bert_dir, sts_home, tmp_path):
    write_crafted_stsb_test(sts_home)
    results = align_uniform([tiny_bert_dir, second_bert_dir], tmp_path / "au", labels=["one", "two"],
                                    pooler="mean")
    rows = stsb_test_rows(sts_home)
    assert len(rows) == len(CRAFTED_TEST)
    gold = np.array([g for _, _, g in rows])
    for res, model_dir in zip(results, [tiny_bert_dir, second_bert_dir], strict=True):
        model = load_model(model_dir, pooler="mean")
        a, b = embed_rows(model, rows)
        pos = [i for i in range(len(rows)) if gold[i] > 4]
        assert len(pos) == 4
        align = sum(float(((a[i] - b[i]) ** 2).sum()) for i in pos) / len(pos)
        every = np.concatenate([a, b])
        pair_terms = [math.exp(-2 * float(((every[i] - every[j]) ** 2).sum()))
                      for i in range(len(every)) for j in range(i + 1, len(every))]
        uniform = math.log(sum(pair_terms) / len(pair_terms))
        spearman = stats.spearmanr(cosine64(model, rows), gold).statistic * 100
        assert res.alignment == pytest.approx(align, rel=1e-4)
        assert res.uniformity == pytest.approx(uniform, rel=1e-4)
        assert res.stsb_test == pytest.approx(spearman, rel=1e-4)
        assert (res.n_positive_pairs, res.n_sentences) == (len(pos), 2 * len(rows))
    assert results[0].alignment != pytest.approx(results[1].alignment)
    assert_png(tmp_path / "au" / "align_uniform.png")
    data = read_json(tmp_path / "au" / "align_uniform.json")
    assert [m["label"] for m in data["models"]] == ["one", "two"]
    assert data["models"][1]["uniformity"] == pytest.approx(results[1].uniformity)


def test_density_groups_and_medians(tiny_bert_dir, sts_home, tmp_path):
    write_crafted_stsb_test(sts_home)
    (res,) = density_report([tiny_bert_dir], tmp_path / "dens", pooler="mean")
    rows = stsb_test_rows(sts_home)
    model = load_model(tiny_bert_dir, pooler="mean")
    a, b = embed_rows(model, rows)
    cos = (a * b).sum(1)
    gold = np.array([g for _, _, g in rows])
    groups = {"[0,1)": gold < 1, "[1,2)": (gold >= 1) & (gold < 2), "[2,3)": (gold >= 2) & (gold < 3),
              "[3,4)": (gold >= 3) & (gold < 4), "[4,5]": gold >= 4}
    for name, sel in groups.items():
        assert res.sizes[name] == int(sel.sum())
        if sel.any():
            assert res.medians[name] == pytest.approx(float(np.median(cos[sel])), abs=1e-5)
            assert res.means[name] == pytest.approx(float(cos[sel].mean()), abs=1e-5)
        else:
            assert math.isnan(res.medians[name])
    assert_png(tmp_path / "dens" / "similarity_density.png")
    data = read_json(tmp_path / "dens" / "similarity_density.json")
    assert res.sizes == {"[0,1)": 2, "[1,2)": 2, "[2,3)": 1, "[3,4)": 2, "[4,5]": 5}
    assert data["models"][0]["sizes"] == res.sizes
    assert data["models"][0]["medians"]["[2,3)"] == pytest.approx(res.medians["[2,3)"])


# --------------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------------


def test_attention_report_matches_hf_attentions(tiny_bert_dir, sts_home, tmp_path):
    rep = attention_report(tiny_bert_dir, tmp_path / "att")
    rows = stsb_test_rows(sts_home)
    sentences = list(dict.fromkeys(s for s1, s2, _ in rows for s in (s1, s2)))
    assert rep.n_sentences == len(sentences) and rep.kind == "encoder"
    hf = BertModel.from_pretrained(tiny_bert_dir, attn_implementation="eager").eval()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    cls_recv, sep_recv, punct_recv, energy, cls_norm, pool_norm = ([], []), ([], []), ([], []), ([], []), [], []
    for s in sentences:  # one sentence at a time: no padding at all
        enc = tok(s, return_tensors="pt")
        with torch.no_grad():
            out = hf(**enc, output_attentions=True, output_hidden_states=True)
        assert tok.convert_ids_to_tokens(enc["input_ids"][0])[-2] == "."
        for layer in range(2):
            att = out.attentions[layer][0]  # (heads, T, T)
            received = att.mean(0).mean(0)  # mean over heads, then queries
            cls_recv[layer].append(float(received[0]))
            sep_recv[layer].append(float(received[-1]))
            punct_recv[layer].append(float(received[-2]))
            with torch.no_grad():
                value = hf.encoder.layer[layer].attention.self.value(out.hidden_states[layer])[0]  # (T, 32)
            heads = value.view(-1, 4, 8).transpose(0, 1)  # (heads, T, 8)
            context = (att @ heads).transpose(0, 1).reshape(-1, 32)  # heads concatenated
            energy[layer].append(float(context[0].norm() / context[1:].norm()))
        cls_norm.append(float(out.last_hidden_state[0, 0].norm()))
        pool_norm.append(float(out.pooler_output[0].norm()))
    (member,) = rep.members
    assert member.member == "encoder" and member.num_layers == 2
    assert member.attention_cls == pytest.approx([statistics.mean(v) for v in cls_recv], rel=1e-4)
    assert member.attention_sep == pytest.approx([statistics.mean(v) for v in sep_recv], rel=1e-4)
    assert member.attention_punct == pytest.approx([statistics.mean(v) for v in punct_recv], rel=1e-4)
    assert member.n_with_punct == len(sentences)
    assert member.cls_energy == pytest.approx([statistics.mean(v) for v in energy], rel=1e-4)
    assert member.cls_energy_mean == pytest.approx(statistics.mean(member.cls_energy))
    assert member.norms.cls_mean == pytest.approx(statistics.mean(cls_norm), rel=1e-4)
    assert member.norms.pooled_std == pytest.approx(statistics.stdev(pool_norm), rel=1e-3)
    for name in ("cls_energy.png", "attention_sink.png", "attention_heatmap.png"):
        assert_png(tmp_path / "att" / name)
    assert rep.heatmap_layers == [0, 1]
    data = read_json(tmp_path / "att" / "attention.json")
    assert data["members"][0]["cls_energy"] == pytest.approx(member.cls_energy)
    assert data["members"][0]["norms"]["pooled_mean"] == pytest.approx(member.norms.pooled_mean)


def test_attention_report_per_twin_member_and_without_pooler(tiny_bert_dir, second_bert_dir, twin_dir, tmp_path):
    sentences = ["a man plays the guitar.", "the dog runs on the road!", "two women eat food"]
    twin = attention_report(twin_dir, tmp_path / "twin", sentences=sentences, heatmap_layers=[-1])
    assert twin.kind == "twin" and [m.member for m in twin.members] == ["encoder_1", "encoder_2"]
    for member, single_dir in zip(twin.members, [tiny_bert_dir, second_bert_dir], strict=True):
        (single,) = attention_report(single_dir, tmp_path / member.member, sentences=sentences,
                                             sentence_for_heatmap=None).members
        assert single.heatmap is None and not (tmp_path / member.member / "attention_heatmap.png").exists()
        assert member.cls_energy == pytest.approx(single.cls_energy, rel=1e-6)
        assert member.attention_sep == pytest.approx(single.attention_sep, rel=1e-6)
        assert member.n_with_punct == 2  # "." and "!" end two of the three sentences
        assert_png(tmp_path / "twin" / f"attention_heatmap_{member.member}.png")
    assert twin.members[0].cls_energy != pytest.approx(twin.members[1].cls_energy)
    assert twin.heatmap_layers == [-1]

    from transformers import AutoTokenizer

    torch.manual_seed(0)
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64)
    no_pooler = Encoder(BertModel(config, add_pooling_layer=False), AutoTokenizer.from_pretrained(tiny_bert_dir))
    rep = attention_report(no_pooler, tmp_path / "nopool", sentences=sentences, label="no-pooler")
    assert rep.members[0].norms is None and "pooler" in rep.members[0].norms_note
    data = read_json(tmp_path / "nopool" / "attention.json")
    assert data["label"] == "no-pooler" and data["members"][0]["norms"] is None


# --------------------------------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------------------------------


def test_cost_single_twin_ensemble_and_efficiency(tiny_bert_dir, twin_dir, sts_home, tmp_path):
    # hand count, seq_len 16, hidden 32, FFN 64, 2 layers: Q,K,V,O + 2 FFN linears, QK^T and PV, the pooler
    t, h, ff = 16, 32, 64
    hand = (2 * (t * (4 * h * h + 2 * h * ff) + 2 * t * t * h) + h * h) / 1e9
    single = cost_report(tiny_bert_dir, seq_len=t)
    assert single.gmacs == pytest.approx(hand, rel=1e-9) and single.members == {"encoder": single.gmacs}
    assert single.efficiency is None and single.kind == "encoder"
    twin = cost_report(twin_dir, seq_len=t, score=80.0, out_dir=tmp_path / "cost")
    assert twin.gmacs == pytest.approx(2 * hand, rel=1e-9) and set(twin.members) == {"encoder_1", "encoder_2"}
    assert twin.efficiency == pytest.approx(80.0 / (2 * hand))
    data = read_json(tmp_path / "cost" / "cost.json")
    assert data["gmacs"] == pytest.approx(2 * hand) and data["score_source"] == "given"

    ensemble_dir = save_model(EnsembleModel([load_model(twin_dir), load_model(tiny_bert_dir)], [0.5, 0.5]),
                              tmp_path / "ensemble")
    ens = cost_report(ensemble_dir, seq_len=t, score_task="stsb")
    assert ens.gmacs == pytest.approx(3 * hand, rel=1e-9)
    assert list(ens.members) == ["member_1/encoder_1", "member_1/encoder_2", "member_2"]
    rows = stsb_test_rows(sts_home)
    expected = stats.spearmanr(cosine64(load_model(ensemble_dir), rows), [g for _, _, g in rows]).statistic * 100
    assert ens.score == pytest.approx(expected, rel=1e-4) and ens.score_source == "stsb/test"
    assert ens.efficiency == pytest.approx(ens.score / ens.gmacs)
    with pytest.raises(CselabError, match="not both"):
        cost_report(tiny_bert_dir, score=1.0, score_task="stsb")


# --------------------------------------------------------------------------------------------------
# seeds and ablation
# --------------------------------------------------------------------------------------------------


def tiny_overrides(model_dir, corpus, out, *extra):
    return [f"model.backbone={model_dir}", f"data.corpus={corpus}", f"train.output_dir={out}",
            "train.batch_size=4", "train.max_steps=2", "train.eval_every=2", "train.eval_at_start=false",
            "train.log_every=1", "model.max_length=16", "train.threads=1", *extra]


def test_seeds_run_table_paired_test_and_resume(tiny_bert_dir, sts_home, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=60)
    results = tmp_path / "results.jsonl"
    a_over = tiny_overrides(tiny_bert_dir, corpus, tmp_path / "run-a", "train.lr=1e-3")
    b_over = tiny_overrides(tiny_bert_dir, corpus, tmp_path / "run-b", "train.lr=2e-4")
    run_a = seeds_run(None, a_over, seeds=(1, 2), results_file=results, variant="a")
    run_b = seeds_run(None, b_over, seeds=(1, 2), results_file=results, variant="b")
    assert run_a.ran == [1, 2] and run_a.skipped == [] and run_a.label == "simcse/a"
    assert [r["seed"] for r in run_b.records] == [1, 2] and {r["variant"] for r in run_b.records} == {"b"}
    assert (tmp_path / "run-a-seed2" / "best").is_dir() and (tmp_path / "run-b-seed1" / "best").is_dir()
    assert run_a.records[1]["config"]["effective"]["train"]["seed"] == 2
    records = read_records(results)
    assert len(records) == 4

    a = [r["scores"]["avg-available"] for r in run_a.records]
    b = [r["scores"]["avg-available"] for r in run_b.records]
    expected = stats.ttest_rel(a, b)
    report = seeds_report(records, tmp_path / "seeds", a_variant="a", b_variant="b")
    assert report.paired["t_statistic"] == pytest.approx(expected.statistic, rel=1e-9)
    assert report.paired["t_pvalue"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert report.paired["seeds"] == [1, 2] and report.paired["df"] == 1
    assert report.summaries["simcse/a"]["std"] == pytest.approx(statistics.stdev(a))
    for name in ("seeds.png",):
        assert_png(tmp_path / "seeds" / name)
    assert read_json(tmp_path / "seeds" / "seeds.json")["paired"]["t_pvalue"] == pytest.approx(expected.pvalue)

    table = seeds_table(records, "a", "simcse/b")
    lines = table.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row_a = dict(zip(header, [c.strip() for c in lines[2].strip("|").split("|")], strict=True))
    assert row_a["configuration"] == "simcse/a" and row_a["n"] == "2"
    assert row_a["avg"] == f"{statistics.mean(a):.2f} ± {statistics.stdev(a):.2f}"
    p_header = [c.strip() for c in lines[-3].strip("|").split("|")]
    p_row = dict(zip(p_header, [c.strip() for c in lines[-1].strip("|").split("|")], strict=True))
    assert p_row["t"] == f"{expected.statistic:.3f}" and p_row["p (t-test)"] == f"{expected.pvalue:.4f}"
    assert p_row["p (Wilcoxon)"] == "-"
    # several pairs: one row each, in the order asked (B - A is the same test with the sign turned)
    both = seeds_table(records, comparisons=[("a", "simcse/b"), ("simcse/b", "a")]).splitlines()
    rows = [dict(zip(p_header, [c.strip() for c in line.strip("|").split("|")], strict=True)) for line in both[-2:]]
    assert [(r["A"], r["B"]) for r in rows] == [("simcse/a", "simcse/b"), ("simcse/b", "simcse/a")]
    assert rows[0]["t"] == f"{expected.statistic:.3f}" and rows[1]["t"] == f"{-expected.statistic:.3f}"
    assert rows[1]["p (t-test)"] == f"{expected.pvalue:.4f}"
    # a record of no seed (the adapt protocol's untouched checkpoint) is no configuration over seeds
    unseeded = {"method": "checkpoint", "variant": "untouched", "seed": None, "scores": {"stsb": 80.0}}
    assert seeds_table([*records, unseeded], "a", "simcse/b") == table

    # a rerun skips what is recorded ...
    again = seeds_run(None, a_over, seeds=(1, 2), results_file=results, variant="a")
    assert again.ran == [] and again.skipped == [1, 2] and len(read_records(results)) == 4
    # ... and redoes a seed whose record is missing, resuming its finished run directory
    removed = next(r for r in records if r["variant"] == "a" and r["seed"] == 2)
    results.write_text("".join(json.dumps(r) + "\n" for r in records if r is not removed))
    redo = seeds_run(None, a_over, seeds=(1, 2), results_file=results, variant="a")
    assert redo.ran == [2] and redo.skipped == [1] and len(read_records(results)) == 4
    assert redo.records[1]["scores"] == removed["scores"] and redo.records[1]["steps"] == 2
    # the same name with another configuration is refused
    other = tiny_overrides(tiny_bert_dir, corpus, tmp_path / "run-a", "train.lr=5e-4")
    with pytest.raises(CselabError, match="different configuration"):
        seeds_run(None, other, seeds=(1,), results_file=results, variant="a")


@pytest.fixture
def two_term_method():
    """A test-only registered method with two loss terms (SimCSE's InfoNCE at two temperatures)."""
    from cselab.losses import info_nce
    from cselab.methods.base import METHODS, register_method
    from cselab.methods.simcse import SimCSE, duplicate

    class TwoTerms(SimCSE):
        name = "test_two_terms"
        terms = ("info_nce", "warm")

        def loss_terms(self, batch, ctx):
            z1, z2 = self.encoder(duplicate(batch), apply_head=True).chunk(2)
            out = {}
            if self.active("info_nce"):
                out["info_nce"] = info_nce(z1, z2, self.options.temperature)
            if self.active("warm"):
                out["warm"] = info_nce(z1, z2, 1.0)
            return out

    register_method(TwoTerms)
    yield TwoTerms.name
    METHODS._methods.pop(TwoTerms.name, None)


def test_ablation_runs_every_subset(tiny_bert_dir, sts_home, tmp_path, two_term_method, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", n=60)
    results = tmp_path / "ablation.jsonl"
    over = tiny_overrides(tiny_bert_dir, corpus, tmp_path / "abl")
    run = ablation_run(None, overrides=over, results_file=results, method=two_term_method)
    assert run.terms == ("info_nce", "warm") and run.variants == ["info_nce+warm", "info_nce", "warm"]
    assert run.ran == [("info_nce+warm", 42), ("info_nce", 42), ("warm", 42)]
    weights = {r["variant"]: r["config"]["effective"]["method_options"].get("loss_weights", {}) for r in run.records}
    assert weights == {"info_nce+warm": {}, "info_nce": {"warm": 0}, "warm": {"info_nce": 0}}
    for variant, logged in (("info_nce+warm", {"info_nce", "warm"}), ("info_nce", {"info_nce"}), ("warm", {"warm"})):
        log = [json.loads(x) for x in (tmp_path / f"abl-{variant}" / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in log if "loss" in r]
        assert steps and all(logged <= set(r) and not ({"info_nce", "warm"} - logged) & set(r) for r in steps)
    assert len(read_records(results)) == 3

    table = ablation_table(read_records(results), run.terms)
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [r.split("|")[1].strip() for r in rows] == ["info_nce+warm", "info_nce", "warm"]
    header = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    best_steps = [r.split("|")[1 + header.index("best step")].strip() for r in rows]
    assert best_steps == [str(r["best_step"]) for r in run.records]
    full = run.records[0]["scores"]["avg-available"]
    only_warm = run.records[2]["scores"]["avg-available"]
    assert rows[0].rstrip(" |").endswith("+0.00")
    assert rows[2].rstrip(" |").endswith(f"{only_warm - full:+.2f}")
    report = ablation_report(read_records(results), run.terms, tmp_path / "ablation-report")
    assert report.means == {r["variant"]: r["scores"]["avg-available"] for r in run.records}
    assert_png(tmp_path / "ablation-report" / "ablation.png")
    read_json(tmp_path / "ablation-report" / "ablation.json")

    again = ablation_run(None, [["warm"]], over, results_file=results, method=two_term_method)
    assert again.ran == [] and again.skipped == [("warm", 42)]
    with pytest.raises(CselabError, match="invalid loss-term subset"):
        ablation_run(None, [["nope"]], over, results_file=results, method=two_term_method)

    # the CLI trains only the subsets named with --subset (recorded here, so skipped); a bad one is one line
    from cselab.cli import main

    config = tmp_path / "two_terms.yaml"
    config.write_text(f"method: {two_term_method}\n", encoding="utf-8")
    cli = ["ablate", "--config", str(config), "--results", str(results), "--out", str(tmp_path / "cli-report")]
    main([*cli, "--subset", "warm", *over])
    assert "warm seed 42: already recorded, skipped" in capsys.readouterr().out
    assert len(read_records(results)) == 3 and (tmp_path / "cli-report" / "ablation.md").is_file()
    with pytest.raises(SystemExit) as exc:
        main([*cli, "--subset", "warm+nope", *over])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().startswith("error: invalid loss-term subset ['warm', 'nope']")


def test_twin_seeds_get_their_own_stage1_and_records_match_across_locations():

    from cselab.config.run_config import load_config

    root = REPO_ROOT
    tncse = load_config(root / "configs/tncse/cpu-minilm.yaml", [])
    jtcse = load_config(root / "configs/jtcse/cpu-minilm.yaml", [])
    shared = tncse.method_options["pipeline"]["stage1_dir"]
    assert shared == jtcse.method_options["pipeline"]["stage1_dir"]  # the presets share one stage 1
    assert seed_overrides(tncse, 3) == [
        "train.seed=3", f"train.output_dir={tncse.train.output_dir}-seed3",
        f"method_options.pipeline.stage1_dir={shared}-seed3",
    ]
    # ... and so do their runs of one seed
    assert seed_overrides(jtcse, 3)[-1] == f"method_options.pipeline.stage1_dir={shared}-seed3"
    # a single-encoder method only moves its output directory
    simcse = load_config(root / "configs/simcse/cpu-minilm.yaml", [])
    assert seed_overrides(simcse, 2) == ["train.seed=2", f"train.output_dir={simcse.train.output_dir}-seed2"]

    # where stage 1 lives is a location, not a setting; a stage-2 loss weight is a setting
    a = tncse.model_dump(mode="json")
    moved = load_config(root / "configs/tncse/cpu-minilm.yaml", ["method_options.pipeline.stage1_dir=elsewhere"])
    assert _config_differences(a, moved.model_dump(mode="json")) == []
    reweighted = load_config(root / "configs/tncse/cpu-minilm.yaml", ["method_options.loss_weights.ictn=0.5"])
    assert _config_differences(a, reweighted.model_dump(mode="json")) == ["method_options"]
    # a recorded pipeline run's stage-2 encoders are paths under its stage1_dir: derived, so not compared ...
    recorded = json.loads(json.dumps(a))
    recorded["method_options"].update(encoder_1="runs/x-seed1/encoder_1/best", encoder_2="runs/x-seed1/encoder_2/best")
    assert _config_differences(recorded, a) == []
    # ... but without a pipeline they are the run's chosen inputs
    no_pipeline = json.loads(json.dumps(recorded))
    del no_pipeline["method_options"]["pipeline"]
    other = json.loads(json.dumps(no_pipeline))
    other["method_options"]["encoder_1"] = "elsewhere"
    assert _config_differences(no_pipeline, other) == ["method_options"]


def test_seeds_skip_a_bf16_record_under_auto_only_where_auto_picks_bf16(tiny_bert_dir, sts_home, tmp_path,
                                                                        monkeypatch):
    from cselab.runtime import precision as precision_module

    class Rates:
        def __init__(self, fp32: float, bf16: float) -> None:
            self.rates = {"fp32": fp32, "bf16": bf16}

        def __call__(self, shape):
            return dict(self.rates)

    corpus = write_corpus(tmp_path / "corpus.txt", n=60)
    results = tmp_path / "results.jsonl"
    over = tiny_overrides(tiny_bert_dir, corpus, tmp_path / "run")
    seeds_run(None, [*over, "train.precision=bf16"], seeds=(1,), results_file=results)
    monkeypatch.setattr(precision_module, "probe_matmul", Rates(100.0, 500.0))  # auto -> bf16 here
    again = seeds_run(None, [*over, "train.precision=auto"], seeds=(1,), results_file=results)
    assert again.skipped == [1] and again.ran == []
    (tmp_path / "other-machine").mkdir()
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "other-machine"))  # no cached probe: another machine
    monkeypatch.setattr(precision_module, "probe_matmul", Rates(328.0, 167.0))  # auto -> fp32 there
    with pytest.raises(CselabError, match="train.precision"):
        seeds_run(None, [*over, "train.precision=auto"], seeds=(1,), results_file=results)
