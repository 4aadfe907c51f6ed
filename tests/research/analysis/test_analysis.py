"""Known-answer tests for cselab.research.analysis (alignment/uniformity, attention, cost, density, significance,
plots). Every expected value is computed independently of the code under test (by hand, a direct loop,
the standard library, or scipy where the brief asks for scipy's numbers)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.stats import gaussian_kde
from torch import nn
from transformers import BertConfig, BertModel

from cselab.errors import CselabError
from cselab.evaluation import alignment_uniformity as au
from cselab.research.analysis import attention as att
from cselab.research.analysis import cost, similarity_density
from cselab.research.reporting import plots, significance

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000
    assert data[:8] == PNG_MAGIC


def tiny_bert(pooler: bool = True) -> BertModel:
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    return BertModel(cfg, add_pooling_layer=pooler).eval()


# --------------------------------------------------------------------------------------------------
# alignment / uniformity
# --------------------------------------------------------------------------------------------------


def test_alignment_identical_is_zero():
    x = torch.randn(7, 5)
    assert au.alignment(x, x.clone()) == pytest.approx(0.0, abs=1e-12)
    # positively rescaled copies are identical after L2 normalisation
    assert au.alignment(x, 3.0 * x) == pytest.approx(0.0, abs=1e-12)


def test_alignment_hand_values():
    # after normalisation: [1,0] vs [0,1] -> ||.||^2 = 2 ; [1,0] vs [-1,0] -> 4
    x = np.array([[3.0, 0.0], [2.0, 0.0]])
    y = np.array([[0.0, 2.0], [-5.0, 0.0]])
    assert au.alignment(x, y) == pytest.approx((2.0 + 4.0) / 2)
    # alpha = 1: mean of distances sqrt(2) and 2
    assert au.alignment(x, y, alpha=1) == pytest.approx((math.sqrt(2) + 2.0) / 2)


def test_uniformity_three_points_by_hand():
    # unit vectors [1,0], [0,1], [-1,0]: squared distances 2, 4, 2
    x = np.array([[1.0, 0.0], [0.0, 5.0], [-2.0, 0.0]])
    expected = math.log((2 * math.exp(-2 * 2) + math.exp(-2 * 4)) / 3)
    assert au.uniformity(x) == pytest.approx(expected, rel=1e-12)


def double_loop_uniformity(rows: list[list[float]], t: float) -> float:
    unit = [[v / math.sqrt(sum(w * w for w in row)) for v in row] for row in rows]
    terms = []
    for i in range(len(unit)):
        for j in range(i + 1, len(unit)):
            d2 = sum((a - b) ** 2 for a, b in zip(unit[i], unit[j], strict=True))
            terms.append(math.exp(-t * d2))
    return math.log(sum(terms) / len(terms))


def test_uniformity_equals_double_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 4))
    assert au.uniformity(x) == pytest.approx(double_loop_uniformity(x.tolist(), 2.0), rel=1e-10)
    assert au.uniformity(torch.tensor(x), t=3) == pytest.approx(
        double_loop_uniformity(x.tolist(), 3.0), rel=1e-10
    )


def test_sts_positive_pairs_strictly_above_four():
    e1 = torch.arange(8.0).reshape(4, 2) + 1
    e2 = -e1
    a, b = au.sts_positive_pairs(e1, e2, [4.0, 4.5, 5.0, 3.0])
    assert a.tolist() == [[3.0, 4.0], [5.0, 6.0]]
    assert b.tolist() == [[-3.0, -4.0], [-5.0, -6.0]]
    res = au.sts_alignment_uniformity(e1, e2, [4.0, 4.5, 5.0, 3.0])
    assert res.n_positive_pairs == 2 and res.n_sentences == 8
    assert res.alignment == pytest.approx(4.0)  # antipodal pairs
    with pytest.raises(ValueError):
        au.sts_alignment_uniformity(e1, e2, [1.0, 2.0, 3.0, 4.0])


# --------------------------------------------------------------------------------------------------
# CLS energy weight
# --------------------------------------------------------------------------------------------------


def test_cls_energy_weight_crafted_context():
    ctx = torch.tensor(
        [
            [[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [100.0, 100.0]],  # last position is padding
            [[0.0, 1.0], [2.0, 0.0], [0.0, 2.0], [1.0, 2.0]],
        ]
    )
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    e = att.cls_energy_weight(ctx, mask)
    # sentence 0: ||[3,4]|| = 5, ||H_-||_F = sqrt(1 + 4) ; sentence 1: 1 / sqrt(4 + 4 + 5)
    assert e.tolist() == pytest.approx([5 / math.sqrt(5), 1 / math.sqrt(13)])
    # without the mask the padding row would be counted
    assert att.cls_energy_weight(ctx)[0].item() == pytest.approx(5 / math.sqrt(5 + 20000))

    layer2 = 2 * ctx  # E_CLS is scale invariant
    layer2[0, 0] = torch.tensor([0.0, 0.0])
    energy = att.cls_energy_from_contexts([ctx, layer2], mask)
    l1 = (math.sqrt(5) + 1 / math.sqrt(13)) / 2
    l2 = (0.0 + 1 / math.sqrt(13)) / 2
    assert energy.per_layer == pytest.approx([l1, l2])
    assert energy.mean == pytest.approx((l1 + l2) / 2)
    assert energy.per_sentence.shape == (2, 2)


def tiny_roberta() -> nn.Module:
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(0)
    cfg = RobertaConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=20,
        pad_token_id=1,
    )
    return RobertaModel(cfg).eval()


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_hooked_context_equals_recomputation_from_hidden_states(arch):
    model = tiny_bert() if arch == "bert" else tiny_roberta()
    pad = model.config.pad_token_id
    ids = torch.tensor([[2, 10, 11, 12, 3, pad], [2, 20, 21, 22, 23, 3]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    assert len(att.find_self_attention_modules(model)) == 2
    model.train()  # trace must switch to eval (no dropout) and restore the mode
    trace = att.trace_attention(model, ids, mask)
    assert model.training
    assert model.config._attn_implementation == "sdpa"  # eager only inside the trace
    model.eval()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    assert len(trace.contexts) == 2 and trace.attentions is not None
    for layer, ctx in enumerate(trace.contexts):
        sa = model.encoder.layer[layer].attention.self
        h = out.hidden_states[layer]
        b, t, _ = h.shape
        nh, dh = sa.num_attention_heads, sa.attention_head_size

        def split(x, nh=nh, dh=dh, b=b, t=t):
            return x.view(b, t, nh, dh).transpose(1, 2)

        with torch.no_grad():
            q, k, v = split(sa.query(h)), split(sa.key(h)), split(sa.value(h))
            scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
            scores = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
            probs = scores.softmax(-1)
            expected = (probs @ v).transpose(1, 2).reshape(b, t, nh * dh)
        torch.testing.assert_close(ctx, expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(trace.attentions[layer], probs, atol=1e-5, rtol=1e-4)


def test_trace_without_weights_and_missing_modules():
    model = tiny_bert()
    ids = torch.tensor([[2, 10, 3]])
    trace = att.trace_attention(model, ids, torch.ones_like(ids), with_weights=False)
    assert trace.attentions is None and trace.contexts[0].shape == (1, 3, 32)
    with pytest.raises(CselabError):
        att.trace_attention(nn.Linear(2, 2), ids, torch.ones_like(ids))


# --------------------------------------------------------------------------------------------------
# attention sink
# --------------------------------------------------------------------------------------------------


def crafted_attention() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch of 2 sentences, 2 heads, 4 positions.

    Sentence 0: ids [101, 5, 102, 0] ([CLS], a punctuation token 5, [SEP], padding), mask [1,1,1,0].
    Head 0 is the identity on the 3 valid queries, head 1 sends every valid query to position 2; the
    padding query row points at the padding key (it must be ignored).
    Sentence 1: ids [101, 7, 8, 102], no padding, uniform attention 1/4.
    """
    a = torch.zeros(2, 2, 4, 4)
    for q in range(3):
        a[0, 0, q, q] = 1.0
        a[0, 1, q, 2] = 1.0
    a[0, :, 3, 3] = 1.0  # padding query
    a[1] = 0.25
    ids = torch.tensor([[101, 5, 102, 0], [101, 7, 8, 102]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    return a, ids, mask


def test_attention_received_hand_values():
    a, _, mask = crafted_attention()
    r = att.attention_received(a, mask)
    # head 0 -> [1/3, 1/3, 1/3, 0], head 1 -> [0, 0, 1, 0]; mean -> [1/6, 1/6, 2/3, 0]
    assert r[0].tolist() == pytest.approx([1 / 6, 1 / 6, 2 / 3, 0.0])
    assert r[1].tolist() == pytest.approx([0.25] * 4)


def test_final_token_positions():
    _, ids, mask = crafted_attention()
    sep, punct = att.final_token_positions(ids, mask, punctuation_ids={5})
    assert sep.tolist() == [2, 3] and punct.tolist() == [1, -1]
    sep2, _ = att.final_token_positions(ids, mask, sep_token_id=102)
    assert sep2.tolist() == [2, 3]
    _, none = att.final_token_positions(ids, mask)
    assert none.tolist() == [-1, -1]


def test_attention_sink_statistics_hand_values():
    a, ids, mask = crafted_attention()
    layer2 = a.clone()
    layer2[0] = 0.0
    layer2[0, :, :3, 0] = 1.0  # every valid query of sentence 0 attends to [CLS]
    layer2[0, :, 3, 3] = 1.0
    s = att.attention_sink_statistics([a, layer2], mask, ids, punctuation_ids={5})
    assert s.cls == pytest.approx([(1 / 6 + 0.25) / 2, (1.0 + 0.25) / 2])
    assert s.sep == pytest.approx([(2 / 3 + 0.25) / 2, (0.0 + 0.25) / 2])
    assert s.punct == pytest.approx([1 / 6, 0.0])  # only sentence 0 ends with punctuation
    assert s.n_with_punct == 1 and s.n_sentences == 2
    assert s.uniform == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert np.isnan(s.punct_per_sentence[0, 1])


def test_analyze_attention_on_tiny_bert_matches_trace():
    model = tiny_bert()
    ids = torch.tensor([[2, 10, 11, 50, 3, 0, 0], [2, 20, 21, 22, 23, 50, 3], [2, 30, 3, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    res = att.analyze_attention(model, ids, mask, punctuation_ids={50}, batch_size=2)
    trace = att.trace_attention(model, ids, mask)
    ref_energy = att.cls_energy_from_contexts(trace.contexts, mask)
    ref_sink = att.attention_sink_statistics(trace.attentions, mask, ids, punctuation_ids={50})
    assert res.num_layers == 2
    assert res.energy.per_layer == pytest.approx(ref_energy.per_layer, rel=1e-5)
    assert res.sink.cls == pytest.approx(ref_sink.cls, rel=1e-5)
    assert res.sink.punct == pytest.approx(ref_sink.punct, rel=1e-5)
    assert res.sink.n_with_punct == 2


# --------------------------------------------------------------------------------------------------
# norm statistics
# --------------------------------------------------------------------------------------------------


def test_norm_statistics_hand_values():
    hidden = torch.zeros(3, 2, 2)
    hidden[:, 0] = torch.tensor([[3.0, 4.0], [0.0, 1.0], [6.0, 8.0]])  # norms 5, 1, 10
    hidden[:, 1] = 99.0  # non-CLS positions must be ignored
    pooled = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 3.0]])  # norms 1, 2, 3
    s = att.norm_statistics(hidden, pooled)
    assert s.n == 3
    assert s.cls_mean == pytest.approx(16 / 3)
    assert s.cls_std == pytest.approx(statistics.stdev([5.0, 1.0, 10.0]))
    assert (s.cls_min, s.cls_max) == (1.0, 10.0)
    assert s.pooled_mean == pytest.approx(2.0) and s.pooled_std == pytest.approx(1.0)
    assert s.pooled_cv == pytest.approx(0.5)


def test_model_norm_statistics_and_missing_pooler():
    model = tiny_bert()
    ids = torch.tensor([[2, 10, 11, 3], [2, 40, 3, 0]])
    mask = (ids != 0).long()
    s = att.model_norm_statistics(model, ids, mask, batch_size=1)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    assert s.cls_mean == pytest.approx(out.last_hidden_state[:, 0].norm(dim=-1).mean().item(), rel=1e-5)
    assert s.pooled_mean == pytest.approx(out.pooler_output.norm(dim=-1).mean().item(), rel=1e-5)
    with pytest.raises(CselabError):
        att.model_norm_statistics(tiny_bert(pooler=False), ids, mask)


# --------------------------------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------------------------------


class EmbedLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 10)
        self.lin = nn.Linear(10, 20)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.lin(self.emb(input_ids))


def test_gmacs_hand_counted_module():
    # seq_len 3 x (10 x 20) multiply-accumulates in the linear layer, the embedding lookup costs 0
    rep = cost.count_gmacs(EmbedLinear(), seq_len=3)
    assert rep.gmacs == pytest.approx(3 * 10 * 20 / 1e9)
    assert rep.gflops == pytest.approx(2 * 3 * 10 * 20 / 1e9)
    # per sentence even with a larger batch
    assert cost.count_gmacs(EmbedLinear(), seq_len=3, batch_size=4).gmacs == pytest.approx(600 / 1e9)


@pytest.fixture(scope="module")
def bert_base() -> BertModel:
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    return BertModel(cfg).eval()


def test_gmacs_bert_base_matches_paper_and_twin_doubles(bert_base):
    single = cost.count_gmacs(bert_base, seq_len=64)
    assert abs(single.gmacs - 5.4) / 5.4 < 0.05
    # independent hand count: 12 x (4*768*768 + 2*768*3072) * 64 linear + 12 x 2*64*64*768 attention
    # + 768*768 pooler
    hand = (12 * ((4 * 768 * 768 + 2 * 768 * 3072) * 64 + 2 * 64 * 64 * 768) + 768 * 768) / 1e9
    assert single.gmacs == pytest.approx(hand, rel=1e-9)
    twin = cost.count_gmacs([bert_base, bert_base], seq_len=64)
    assert twin.gmacs == pytest.approx(2 * single.gmacs, rel=1e-12)
    assert twin.per_module == pytest.approx([single.gmacs, single.gmacs])
    assert cost.efficiency(79.89, 5.40) == pytest.approx(14.79, abs=0.01)  # JTCSE Table VII
    assert cost.efficiency(79.89, single) == pytest.approx(79.89 / single.gmacs)


def test_gmacs_same_for_sdpa_and_eager(bert_base):
    sdpa = cost.count_gmacs(bert_base, seq_len=16)
    with att.eager_attention(bert_base):
        eager = cost.count_gmacs(bert_base, seq_len=16)
    assert bert_base.config._attn_implementation == "sdpa"
    assert sdpa.gmacs == pytest.approx(eager.gmacs, rel=1e-12)
    assert "aten.bmm" in eager.by_operator


# --------------------------------------------------------------------------------------------------
# similarity density
# --------------------------------------------------------------------------------------------------


def test_cosine_and_gold_groups():
    e1 = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [2.0, 0.0], [0.0, 1.0], [3.0, 3.0]])
    e2 = np.array([[5.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [0.0, 2.0], [1.0, 0.0]])
    sims = similarity_density.cosine_similarities(e1, e2)
    r = 1 / math.sqrt(2)
    assert sims.tolist() == pytest.approx([1.0, 0.0, -1.0, r, 1.0, r])
    gold = np.array([0.0, 0.99, 1.0, 3.99, 4.0, 5.0])
    groups = similarity_density.group_by_gold(sims, gold)
    assert list(groups) == ["[0,1)", "[1,2)", "[2,3)", "[3,4)", "[4,5]"]
    assert groups["[0,1)"].tolist() == pytest.approx([1.0, 0.0])
    assert groups["[1,2)"].tolist() == pytest.approx([-1.0])
    assert groups["[2,3)"].size == 0
    assert groups["[3,4)"].tolist() == pytest.approx([r])
    assert groups["[4,5]"].tolist() == pytest.approx([1.0, r])  # 5.0 is included


def test_similarity_density_kde_and_plot(tmp_path):
    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 5, size=200)
    e1 = rng.normal(size=(200, 8))
    e2 = e1 + rng.normal(size=(200, 8)) * (5.5 - gold)[:, None] / 3
    res = similarity_density.similarity_density(e1, e2, gold)
    g = res.groups["[2,3)"]
    assert res.density["[2,3)"] == pytest.approx(gaussian_kde(g)(res.grid))
    assert res.medians["[4,5]"] > res.medians["[0,1)"]
    path = plots.plot_similarity_density({"model A": res, "model B": res}, tmp_path / "d.png")
    assert_png(path)


# --------------------------------------------------------------------------------------------------
# significance
# --------------------------------------------------------------------------------------------------


def test_summarize_seeds():
    vals = [76.1, 76.5, 75.9, 76.8, 76.3]
    s = significance.summarize_seeds(vals)
    assert s.mean == pytest.approx(statistics.mean(vals))
    assert s.std == pytest.approx(statistics.stdev(vals))
    assert s.n == 5
    assert significance.summarize_seeds({2: 1.0, 1: 3.0}).values == (3.0, 1.0)


def test_paired_t_test_hand_and_scipy():
    a = [76.1, 76.5, 75.9, 76.8, 76.3]
    b = [75.8, 76.0, 75.9, 76.1, 75.7]
    res = significance.paired_test(a, b)
    d = [x - y for x, y in zip(a, b, strict=True)]  # 0.3 0.5 0.0 0.7 0.6
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    t_hand = mean / (sd / math.sqrt(n))
    assert res.t_statistic == pytest.approx(t_hand, rel=1e-10)
    assert res.std_diff == pytest.approx(sd, rel=1e-10)
    ref = stats.ttest_rel(a, b)
    assert res.t_statistic == pytest.approx(ref.statistic)
    assert res.t_pvalue == pytest.approx(ref.pvalue)
    assert res.t_pvalue == pytest.approx(2 * stats.t.sf(abs(t_hand), n - 1))
    assert res.df == 4 and res.mean_diff == pytest.approx(0.42)
    assert res.wilcoxon_pvalue is None and res.tests == ("paired t-test",)
    assert res.significant()
    # one-sided, and the mapping form (matched by seed)
    greater = significance.paired_test(dict(enumerate(a, 1)), dict(enumerate(b, 1)), alternative="greater")
    assert greater.t_pvalue == pytest.approx(ref.pvalue / 2)
    with pytest.raises(ValueError):
        significance.paired_test({1: 1.0, 2: 2.0}, {1: 1.0, 3: 2.0})
    with pytest.raises(ValueError):
        significance.paired_test(a, b[:4])


def test_paired_wilcoxon_from_six_seeds():
    a = [1.0, 2.0, 3.5, 4.2, 5.9, 6.1]
    b = [0.5, 2.2, 2.0, 3.9, 4.0, 6.0]
    res = significance.paired_test(a, b)
    ref = stats.wilcoxon(a, b)
    assert res.tests == ("paired t-test", "Wilcoxon signed-rank test")
    assert res.wilcoxon_statistic == pytest.approx(ref.statistic)
    assert res.wilcoxon_pvalue == pytest.approx(ref.pvalue)
    # signed ranks of |d| = .5 .2 1.5 .3 1.9 .1 -> only d = -0.2 (rank 2) is negative: W = min(19, 2)
    assert res.wilcoxon_statistic == pytest.approx(2.0)


# --------------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------------


def test_alignment_uniformity_scatter(tmp_path):
    pts = [
        plots.AlignUniformPoint("SimCSE", 0.24, -2.3, 76.3),
        plots.AlignUniformPoint("JTCSE", 0.21, -2.6, 79.7),
        plots.AlignUniformPoint("BERT", 0.05, -1.1),
    ]
    assert_png(plots.plot_alignment_uniformity(pts, tmp_path / "au.png"))
    assert_png(
        plots.plot_alignment_uniformity({"a": (0.2, -2.0), "b": (0.3, -3.0)}, tmp_path / "sub" / "au2.png")
    )


def test_other_plots(tmp_path):
    assert_png(
        plots.plot_seed_summary({"A": [76.1, 76.5, 75.9], "B": [75.8, 76.0, 75.9]}, tmp_path / "s.png")
    )
    assert_png(
        plots.plot_metric_vs_score(
            {"a": 0.1, "b": 0.2, "c": 0.15}, {"a": 76, "b": 79, "c": 77}, tmp_path / "m.png"
        )
    )
    a, ids, mask = crafted_attention()
    s = att.attention_sink_statistics([a, a], mask, ids, punctuation_ids={5})
    assert_png(plots.plot_attention_sink({"m1": s, "m2": s}, tmp_path / "sink.png"))
    assert_png(plots.plot_attention_heatmap(a[0, 0], ["[CLS]", "w", ".", "[PAD]"], tmp_path / "h.png"))


def test_sentence_heatmap_with_local_tokenizer(tmp_path):
    from transformers import BertTokenizer

    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "this",
        "is",
        "an",
        "example",
        "sentence",
        ".",
        ",",
    ]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    assert tok("this is an example sentence.")["input_ids"] == [2, 5, 6, 7, 8, 9, 10, 3]
    assert att.punctuation_token_ids(tok) == {10, 11}
    model = tiny_bert()
    p1 = att.sentence_attention_heatmap(model, tok, "this is an example sentence.", tmp_path / "mean.png")
    p2 = att.sentence_attention_heatmap(
        model, tok, "this is an example sentence.", tmp_path / "layers.png", layers=[0, -1]
    )
    assert_png(p1)
    assert_png(p2)
    with pytest.raises(CselabError):
        att.sentence_attention_heatmap(model, tok, "this", tmp_path / "x.png", layers=[5])
