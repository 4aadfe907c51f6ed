"""CoT-BERT: template rows, [PAD] empty templates (alignment, only the batch's lengths), denoised
representations and the saved prompted model against hand-built ids, extended-InfoNCE wiring, the loop."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.methods import build_method
from cselab.methods.base import StepContext
from cselab.methods.cot_bert import shipped_template_sets
from cselab.models.sentence_model import load_model, save_model
from cselab.runtime.distributed import DistributedContext
from tests.helpers import REPO_ROOT, run_whole_loop, write_corpus

CONFIGS = REPO_ROOT / "configs"
ROLES = ("anchor", "positive", "negative")
# lengths differ, two sentences share one length: the distinct lengths are fewer than the sentences
SENTENCES = ["a man plays the guitar .", "the dog runs", "two women walk in the park with a big dog .",
             "the cat eats", "a child rides a horse on the road"]
MAX_LEN = 16


def ctx() -> StepContext:
    return StepContext(dist=DistributedContext(), step=0, generator=torch.Generator())


def family(model_dir) -> str:
    return "roberta" if "roberta" in Path(model_dir).name else "bert"


def make_method(model_dir, *overrides, dropout=0.0):
    config = load_config(None, [f"model.backbone={model_dir}", "model.pooler=mask", f"model.max_length={MAX_LEN}",
                                f"model.dropout={dropout}", f"method_options.templates={family(model_dir)}",
                                *overrides], method="cot-bert")
    method = build_method(config)
    method.train()
    return method


def hand_parts(tokenizer, text):
    """Template ids before/after the sentence, built here from the template text (a space right before
    [X] is tokenised with the sentence: ``sentence_ids``)."""
    before, after = text.replace("[MASK]", tokenizer.mask_token).split("[X]")
    pre = tokenizer(before.rstrip(), add_special_tokens=False)["input_ids"] if before.strip() else []
    post = tokenizer(after, add_special_tokens=False)["input_ids"] if after.strip() else []
    return [tokenizer.cls_token_id, *pre], [*post, tokenizer.sep_token_id]


def sentence_ids(tokenizer, sentence, max_len=MAX_LEN):
    lead = " " if "roberta" in type(tokenizer).__name__.lower() or tokenizer.mask_token == "<mask>" else ""
    return tokenizer(lead + sentence, add_special_tokens=False)["input_ids"][:max_len]


def model_positions(backbone, length):
    """The position ids the model gives a row of ``length`` real (non-pad) tokens."""
    offset = backbone.config.pad_token_id + 1 if backbone.config.model_type == "roberta" else 0
    return torch.arange(offset, offset + length).unsqueeze(0)


def last_mask_state(backbone, ids, mask_id, positions=None):
    ids_t = torch.tensor([ids])
    out = backbone(input_ids=ids_t, attention_mask=torch.ones_like(ids_t), position_ids=positions).last_hidden_state
    last = max(i for i, t in enumerate(ids) if t == mask_id)
    return out[0, last]


def count_backbone_rows(monkeypatch, encoder):
    rows = []
    original = encoder.backbone.forward

    def counting(*args, **kwargs):
        x = kwargs.get("input_ids")
        rows.append((x if x is not None else kwargs["inputs_embeds"]).shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(encoder.backbone, "forward", counting)
    return rows


def templates(model_dir):
    return shipped_template_sets()[family(model_dir)]


# -- collation ------------------------------------------------------------------------------------------
def test_template_rows_are_prefix_sentence_suffix(tiny_model_dir):
    method = make_method(tiny_model_dir)
    tok = method.encoder.tokenizer
    batch = method.collate(SENTENCES)
    b = len(SENTENCES)
    assert batch["input_ids"].shape[0] == 3 * b
    for t, role in enumerate(ROLES):
        pre, post = hand_parts(tok, getattr(templates(tiny_model_dir), role))
        for i, sentence in enumerate(SENTENCES):
            row = pre + sentence_ids(tok, sentence) + post
            got = batch["input_ids"][t * b + i]
            assert got[: len(row)].tolist() == row
            assert batch["attention_mask"][t * b + i].tolist() == [1] * len(row) + [0] * (len(got) - len(row))


def test_template_rows_equal_tokenising_the_filled_in_text(tiny_model_dir):
    # the oracle: the tokenizer run once over the whole text with the sentence written into the template;
    # with byte-level BPE this has no stray lone-space token before the sentence (no truncation here)
    method = make_method(tiny_model_dir, "model.max_length=64")
    tok = method.encoder.tokenizer
    batch = method.collate(SENTENCES)
    b = len(SENTENCES)
    for t, role in enumerate(ROLES):
        text = getattr(templates(tiny_model_dir), role).replace("[MASK]", tok.mask_token)
        for i, sentence in enumerate(SENTENCES):
            expected = tok(text.replace("[X]", sentence))["input_ids"]
            assert batch["input_ids"][t * b + i][: len(expected)].tolist() == expected
            assert int(batch["attention_mask"][t * b + i].sum()) == len(expected)


def test_empty_templates_align_with_their_sentences(tiny_model_dir):
    method = make_method(tiny_model_dir)
    tok = method.encoder.tokenizer
    batch = method.collate(SENTENCES)
    b = len(SENTENCES)
    lengths = [len(sentence_ids(tok, s)) for s in SENTENCES]
    distinct = sorted(set(lengths))
    assert batch["empty_input_ids"].shape[0] == 3 * len(distinct)
    for t, role in enumerate(ROLES):
        pre, _ = hand_parts(tok, getattr(templates(tiny_model_dir), role))
        for i, n in enumerate(lengths):
            k = int(batch["length_index"][i])
            assert distinct[k] == n
            e_ids, e_mask = (batch["empty_input_ids"][t * len(distinct) + k],
                             batch["empty_attention_mask"][t * len(distinct) + k])
            s_ids, s_mask = batch["input_ids"][t * b + i], batch["attention_mask"][t * b + i]
            width = int(s_mask.sum())
            assert int(e_mask.sum()) == width, "same row length"
            assert e_mask[:width].tolist() == [1] * width, "attention 1 over the whole row, the [PAD] slot included"
            slot = slice(len(pre), len(pre) + n)
            assert e_ids[slot].tolist() == [tok.pad_token_id] * n
            outside = [j for j in range(width) if not slot.start <= j < slot.stop]
            assert e_ids[outside].tolist() == s_ids[outside].tolist(), "identical ids at every other position"


def test_only_the_lengths_present_in_the_batch_are_encoded(tiny_bert_dir, monkeypatch):
    method = make_method(tiny_bert_dir)
    tok = method.encoder.tokenizer
    rows = count_backbone_rows(monkeypatch, method.encoder)
    sentences = ["the dog runs", "the cat eats", "a man plays the guitar .", "a dog sits", "the bird sings"]
    distinct = {len(sentence_ids(tok, s)) for s in sentences}
    assert len(distinct) < len(sentences)
    method.loss_terms(method.collate(sentences), ctx())
    assert rows[0] == 3 * len(sentences), "one 3B pass of the templated sentences"
    assert sum(rows[1:]) == 3 * len(distinct), "then 3 templates x the distinct lengths, nothing more"
    assert len(rows) - 1 == min(method.options.denoise_chunks, 3 * len(distinct))
    rows.clear()
    off = make_method(tiny_bert_dir, "method_options.denoise=false")
    rows_off = count_backbone_rows(monkeypatch, off.encoder)
    batch = off.collate(sentences)
    assert "empty_input_ids" not in batch
    off.loss_terms(batch, ctx())
    assert rows_off == [3 * len(sentences)]


# -- representations --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mlp", [False, True])
def test_denoised_representation_is_h_minus_the_empty_template_by_hand(tiny_model_dir, mlp):
    method = make_method(tiny_model_dir, f"method_options.mlp={str(mlp).lower()}")
    tok, backbone = method.encoder.tokenizer, method.encoder.backbone
    batch = method.collate(SENTENCES)
    with torch.no_grad():
        r = method.representations(batch)
    b, i = len(SENTENCES), 2
    ids = sentence_ids(tok, SENTENCES[i])
    for t, role in enumerate(ROLES):
        pre, post = hand_parts(tok, getattr(templates(tiny_model_dir), role))
        row, empty = pre + ids + post, pre + [tok.pad_token_id] * len(ids) + post
        positions = model_positions(backbone, len(row))
        with torch.no_grad():
            h = last_mask_state(backbone, row, tok.mask_token_id)
            assert torch.allclose(h, last_mask_state(backbone, row, tok.mask_token_id, positions), atol=1e-6)
            h_hat = last_mask_state(backbone, empty, tok.mask_token_id, positions)
            expected = h - h_hat
            if mlp:
                expected = method.encoder.head(expected)
            if family(tiny_model_dir) == "roberta":
                # pad ids would be numbered as padding without explicit positions: the alignment matters
                naive = last_mask_state(backbone, empty, tok.mask_token_id)
                assert not torch.allclose(naive, h_hat, atol=1e-3)
        torch.testing.assert_close(r[t * b + i], expected, atol=2e-5, rtol=1e-4)


def test_length_grouped_passes_do_not_change_the_template_bias(tiny_model_dir):
    one, many = (make_method(tiny_model_dir, f"method_options.denoise_chunks={c}") for c in (1, 5))
    many.load_state_dict(one.state_dict())
    batch_one, batch_many = one.collate(SENTENCES), many.collate(SENTENCES)  # the grouping is planned in collate
    assert len(batch_one["empty_chunks"]) == 1 and len(batch_many["empty_chunks"]) == 5
    # every empty row is in exactly one group, and each group's width covers its rows
    widths = batch_many["empty_attention_mask"].sum(dim=1)
    order = batch_many["empty_order"]
    assert sorted(order.tolist()) == list(range(len(widths)))
    for a, b, width in batch_many["empty_chunks"]:
        assert int(widths[order[a:b]].max()) == width
    with torch.no_grad():
        torch.testing.assert_close(one.template_bias(batch_one), many.template_bias(batch_many), atol=2e-5, rtol=1e-4)


def test_without_denoising_the_representation_is_the_last_mask_state(tiny_bert_dir):
    method = make_method(tiny_bert_dir, "method_options.denoise=false", "method_options.mlp=false")
    tok, backbone = method.encoder.tokenizer, method.encoder.backbone
    with torch.no_grad():
        r = method.representations(method.collate(SENTENCES))
        pre, post = hand_parts(tok, templates(tiny_bert_dir).positive)
        h = last_mask_state(backbone, pre + sentence_ids(tok, SENTENCES[0]) + post, tok.mask_token_id)
    torch.testing.assert_close(r[len(SENTENCES)], h, atol=2e-5, rtol=1e-4)


def test_empty_templates_get_gradients_and_dropout(tiny_bert_dir):
    method = make_method(tiny_bert_dir, dropout=0.3)
    batch = method.collate(SENTENCES)
    a, b = method.template_bias(batch), method.template_bias(batch)
    assert a.requires_grad and not torch.allclose(a, b), "encoded with dropout on, in the training graph"
    (a * torch.randn_like(a)).sum().backward()
    assert method.encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("template_negatives", [True, False])
def test_extended_info_nce_wiring(tiny_bert_dir, template_negatives):
    method = make_method(tiny_bert_dir, f"method_options.template_negatives={str(template_negatives).lower()}",
                         "method_options.temperature=0.1")
    batch = method.collate(SENTENCES)
    terms = method.loss_terms(batch, ctx())
    assert set(terms) == {"extended_info_nce"}
    with torch.no_grad():
        r, r_pos, r_neg = F.normalize(method.representations(batch), dim=-1).chunk(3)
    blocks = [r @ r_pos.T, r @ r_neg.T] + ([r_pos @ r_neg.T] if template_negatives else [])
    logits = torch.cat(blocks, dim=1) / 0.1
    assert logits.shape[1] == (3 if template_negatives else 2) * len(SENTENCES)
    expected = F.cross_entropy(logits, torch.arange(len(SENTENCES)))
    torch.testing.assert_close(terms["extended_info_nce"].detach(), expected, atol=1e-5, rtol=1e-5)


# -- the saved model ------------------------------------------------------------------------------------------
def test_saved_model_encodes_with_the_anchor_template_by_hand(tiny_model_dir, tmp_path):
    method = make_method(tiny_model_dir, dropout=0.1)
    save_model(method.inference_model(), tmp_path / "model")
    loaded = load_model(tmp_path / "model")
    assert loaded.prompt.text == templates(tiny_model_dir).anchor and loaded.pooler == "mask"
    assert loaded.head is not None, "the train-only MLP is saved but not used by encode()"
    long_sentence = " ".join(["the dog runs"] * 8)  # > 16 tokens: inference does not truncate at model.max_length
    texts = [SENTENCES[0], long_sentence, SENTENCES[3]]
    got = loaded.encode(texts, batch_size=2)
    tok, backbone = method.encoder.tokenizer, method.encoder.backbone
    backbone.eval()
    pre, post = hand_parts(tok, templates(tiny_model_dir).anchor)
    with torch.no_grad():
        expected = torch.stack([last_mask_state(backbone, pre + sentence_ids(tok, s, 256) + post, tok.mask_token_id)
                                for s in texts])
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4)


# -- the loop -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["", "method_options.template_negatives=false", "method_options.denoise=false"])
def test_whole_loop(tiny_model_dir, sts_home, tmp_path, variant):
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = load_config(None, [
        f"model.backbone={tiny_model_dir}", "model.pooler=mask", f"data.corpus={corpus}",
        f"train.output_dir={tmp_path / 'run'}", "train.batch_size=8", "train.max_steps=4", "train.eval_every=2",
        "train.lr=1e-3", "train.log_every=1", "model.max_length=16",
        f"method_options.templates={family(tiny_model_dir)}",
        *([variant] if variant else []),
    ], method="cot-bert")
    _, log = run_whole_loop(config, steps=4)
    losses = [r["extended_info_nce"] for r in log if "loss" in r]
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(v)) for v in losses)
    best = load_model(tmp_path / "run" / "best")
    assert best.prompt.text == templates(tiny_model_dir).anchor
    assert torch.isfinite(best.encode(SENTENCES)).all()


# -- options and configuration ----------------------------------------------------------------------------------
def test_template_sets_are_package_data_and_well_formed():
    sets = shipped_template_sets()
    assert {"bert", "roberta"} <= set(sets)
    for entry in sets.values():
        for role in ROLES:
            text = getattr(entry, role)
            assert text.count("[X]") == 1 and text.count("[MASK]") == 2
    assert "' [X] '" in sets["roberta"].anchor


def test_custom_templates_and_clear_errors(tiny_bert_dir):
    custom = '{anchor: "[X] means [MASK] .", positive: "[X] : [MASK] .", negative: "[X] not [MASK] ."}'
    method = make_method(tiny_bert_dir, f"method_options.templates={custom}")
    assert method.encoder.prompt.text == "[X] means [MASK] ."
    with pytest.raises(CselabError, match="unknown CoT-BERT template set 'gpt'"):
        make_method(tiny_bert_dir, "method_options.templates=gpt")
    with pytest.raises(CselabError, match="exactly one"):
        make_method(tiny_bert_dir,
                    'method_options.templates={anchor: "[MASK]", positive: "[X] [MASK]", negative: "[X] [MASK]"}')
    with pytest.raises(CselabError, match="model.pooler: mask"):
        build_method(load_config(None, [f"model.backbone={tiny_bert_dir}", "model.pooler=cls"], method="cot-bert"))


def _protocol(path):
    raw = yaml.safe_load(path.read_text())
    raw["train"].pop("output_dir")
    return raw


@pytest.mark.parametrize("name", ["cpu-minilm.yaml", "cpu-minilm-no-template-negatives.yaml"])
def test_cpu_configs_share_the_simcse_protocol(name):
    """Same budget, data order, seed and backbone as the SimCSE CPU row; the method part (pooler, lr,
    options) is CoT-BERT's."""
    ours, simcse = _protocol(CONFIGS / "cot_bert" / name), _protocol(CONFIGS / "simcse" / "cpu-minilm.yaml")
    assert ours["data"] == simcse["data"]
    assert ({k: v for k, v in ours["train"].items() if k != "lr"}
            == {k: v for k, v in simcse["train"].items() if k != "lr"})
    assert ({k: v for k, v in ours["model"].items() if k != "pooler"}
            == {k: v for k, v in simcse["model"].items() if k != "pooler"})
    assert ours["model"]["pooler"] == "mask" and ours["method"] == "cot-bert"


def test_no_third_block_variant_differs_only_there():
    full = _protocol(CONFIGS / "cot_bert" / "cpu-minilm.yaml")
    ablation = _protocol(CONFIGS / "cot_bert" / "cpu-minilm-no-template-negatives.yaml")
    assert full["method_options"].pop("template_negatives") is True
    assert ablation["method_options"].pop("template_negatives") is False
    assert full == ablation
