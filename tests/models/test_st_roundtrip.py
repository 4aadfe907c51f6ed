"""Every saved model kind loads in sentence-transformers and encodes exactly as cselab does.

For each kind: save with cselab, load with plain ``SentenceTransformer(dir)`` (``trust_remote_code=True``
only where a cselab module is needed), compare with cselab's own ``encode`` (max abs difference <= 1e-5);
custom kinds without the flag must be refused, never loaded as something else. The reference values are
also recomputed by hand from the backbone's hidden states, so a shared bug in both loaders cannot pass.
"""

from __future__ import annotations

import json

import pytest
import torch

from cselab.models.encoder import Encoder, MLPHead
from cselab.models.prompts import PromptTemplate
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model

st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (extra 'bench')")

SENTENCES = [
    "a man plays the guitar .",
    "the dog runs on the road with the big red ball , and the cat sits on the chair in the old house .",
    "two women are eating food in the park",
    "a",
]
TEMPLATE = 'this sentence : "[X]" means [MASK] .'
TOL = 1e-5


def _st_encode(path, trust: bool) -> torch.Tensor:
    model = st.SentenceTransformer(str(path), trust_remote_code=trust, device="cpu")
    return torch.as_tensor(model.encode(SENTENCES, convert_to_numpy=True, batch_size=3))


def _by_hand(encoder: Encoder, pooler: str) -> torch.Tensor:
    """The pooled vector of each sentence alone (no batching), from the backbone's raw outputs."""
    rows = []
    tok = encoder.tokenizer
    encoder.eval()  # no dropout (encode() leaves a freshly built Encoder in train mode)
    for text in SENTENCES:
        if encoder.prompt is not None:
            before, after = encoder.prompt.text.split("[X]")
            ids = (tok(before.rstrip().replace("[MASK]", tok.mask_token), add_special_tokens=False)["input_ids"])
            lead = " " if before[-1:].isspace() else ""  # a space before [X] goes with the sentence
            sent = tok(lead + text, add_special_tokens=False, truncation=True,
                       max_length=encoder.max_length)["input_ids"]
            post = tok(after.replace("[MASK]", tok.mask_token), add_special_tokens=False)["input_ids"]
            ids = [tok.cls_token_id, *ids, *sent, *post, tok.sep_token_id]
        else:
            ids = tok(text, truncation=True, max_length=encoder.max_length)["input_ids"]
        input_ids = torch.tensor([ids])
        with torch.no_grad():
            out = encoder.backbone(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                   output_hidden_states=True)
        states = out.hidden_states
        if pooler == "cls":
            rows.append(states[-1][0, 0])
        elif pooler == "mean":
            rows.append(states[-1][0].mean(0))
        elif pooler == "first_last_avg":
            rows.append(((states[1][0] + states[-1][0]) / 2).mean(0))
        elif pooler == "pooler":
            dense = encoder.backbone.pooler.dense
            rows.append(torch.tanh(states[-1][0, 0] @ dense.weight.T + dense.bias))
        elif pooler == "mask":
            last_mask = max(i for i, t in enumerate(ids) if t == tok.mask_token_id)
            rows.append(states[-1][0, last_mask])
    return torch.stack(rows)


def _check(path, model, trust: bool, expected: torch.Tensor | None = None) -> None:
    own = load_model(path).encode(SENTENCES)
    assert (own - model.encode(SENTENCES)).abs().max() <= TOL  # cselab reload == in-memory model
    if expected is not None:
        assert (own - expected).abs().max() <= TOL
    assert (_st_encode(path, trust) - own).abs().max() <= TOL
    modules = json.loads((path / "modules.json").read_text())
    uses_cselab = any(m["type"].startswith("cselab.") for m in modules)
    assert uses_cselab == trust
    if trust:
        with pytest.raises(ValueError, match="trust_remote_code"):
            st.SentenceTransformer(str(path), device="cpu")
    card = (path / "README.md").read_text()  # the model card says how to load it
    assert card.startswith("---") and ("trust_remote_code=True" in card) == trust


@pytest.mark.parametrize("pooler", ["cls", "cls_before_pooler", "mean", "pooler", "first_last_avg"])
def test_single_encoder_poolers_load_with_standard_modules(tiny_model_dir, tmp_path, pooler):
    encoder = Encoder.from_pretrained(tiny_model_dir, pooler=pooler, max_length=12,
                                      with_head=pooler == "cls")  # the train-only head is not part of encode
    path = save_model(encoder, tmp_path / "m")
    hand_pooler = "cls" if pooler == "cls_before_pooler" else pooler
    _check(path, encoder, trust=False, expected=_by_hand(encoder, hand_pooler))


def test_cot_bert_prompted_encoder_needs_the_cselab_module(tiny_model_dir, tmp_path):
    encoder = Encoder.from_pretrained(tiny_model_dir, pooler="mask", max_length=8, prompt=PromptTemplate(TEMPLATE))
    path = save_model(encoder, tmp_path / "cot")
    _check(path, encoder, trust=True, expected=_by_hand(encoder, "mask"))


def _second_encoder(tmp_path, family="bert"):
    from tests.helpers import build_tiny_model_dir

    return Encoder.from_pretrained(build_tiny_model_dir(tmp_path / f"second-{family}", family, seed=7),
                                   pooler="cls", max_length=12)


def test_twin_is_the_sum_of_its_members(tiny_bert_dir, tmp_path):
    first = Encoder.from_pretrained(tiny_bert_dir, pooler="cls", max_length=12)
    first.head = MLPHead(first.hidden_size)  # stage-2 twins keep their members' heads: never used by encode
    second = _second_encoder(tmp_path)
    twin = TwinModel(first, second)
    path = save_model(twin, tmp_path / "twin")
    expected = _by_hand(first, "cls") + _by_hand(second, "cls")
    _check(path, twin, trust=True, expected=expected)


def test_ensemble_of_a_twin_and_a_roberta_encoder(tiny_bert_dir, tiny_roberta_dir, tmp_path):
    """Members with different tokenizers and kinds: each member tokenises for itself."""
    first = Encoder.from_pretrained(tiny_bert_dir, pooler="mean", max_length=12)
    twin = TwinModel(first, _second_encoder(tmp_path))
    roberta = Encoder.from_pretrained(tiny_roberta_dir, pooler="cls", max_length=12)
    ensemble = EnsembleModel([twin, roberta], [0.3, 0.7])
    path = save_model(ensemble, tmp_path / "ens")
    twin_hand = _by_hand(first, "mean") + _by_hand(twin.encoders[1], "cls")
    expected = 0.3 * twin_hand + 0.7 * _by_hand(roberta, "cls")
    _check(path, ensemble, trust=True, expected=expected)
    # each member directory is a complete model of its own kind
    assert json.loads((path / "member_1" / "cselab.json").read_text())["kind"] == "twin"
    assert (_st_encode(path / "member_2", False) - _by_hand(roberta, "cls")).abs().max() <= TOL


def test_distilled_student_and_ifcl_models_are_plain_encoders(tiny_bert_dir, tmp_path, sts_home):
    """The distilled student and IFCL save their single encoder: a standard sentence-transformers model."""
    from cselab.config.run_config import load_config
    from cselab.methods import build_method

    for method in ("ifcl", "simcse"):
        config = load_config(None, [f"model.backbone={tiny_bert_dir}", "model.pooler=cls", "model.max_length=12"],
                             method=method)
        model = build_method(config).inference_model()
        path = save_model(model, tmp_path / method)
        assert json.loads((path / "cselab.json").read_text())["kind"] == "encoder"
        _check(path, model, trust=False, expected=_by_hand(model, "cls"))


def test_unknown_kind_is_one_line_error(tiny_bert_dir, tmp_path):
    from cselab.errors import CselabError

    path = save_model(Encoder.from_pretrained(tiny_bert_dir), tmp_path / "m")
    description = json.loads((path / "cselab.json").read_text())
    (path / "cselab.json").write_text(json.dumps({**description, "kind": "hologram"}))
    with pytest.raises(CselabError, match="unknown model kind 'hologram'"):
        load_model(path)


def test_a_cselab_module_model_saved_by_sentence_transformers_reloads(tiny_bert_dir, tmp_path):
    """SentenceTransformer.save of a twin writes a directory both libraries load to the same embeddings."""
    twin = TwinModel(Encoder.from_pretrained(tiny_bert_dir, pooler="mean", max_length=12), _second_encoder(tmp_path))
    path = save_model(twin, tmp_path / "twin")
    st.SentenceTransformer(str(path), trust_remote_code=True, device="cpu").save(str(tmp_path / "resaved"))
    assert json.loads((tmp_path / "resaved" / "modules.json").read_text())[0]["type"] == "cselab.st_modules.Twin"
    expected = twin.encode(SENTENCES)
    assert (load_model(tmp_path / "resaved").encode(SENTENCES) - expected).abs().max() <= TOL
    assert (_st_encode(tmp_path / "resaved", True) - expected).abs().max() <= TOL
