"""IFCL: parallel data, views, the hippocampus queue, the terms' wiring, ablation switches, resume, whole loop."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import cselab.methods.ifcl as ifcl_module
from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.losses import info_nce
from cselab.methods.base import StepContext
from cselab.models.sentence_model import load_model
from cselab.reporter import console, reporting
from cselab.runtime.distributed import DistributedContext
from cselab.training.trainer import Trainer
from tests.helpers import REPO_ROOT, WORDS, run_whole_loop

REPO = REPO_ROOT
ALPHA = [w for w in WORDS if w.isalpha()]


def write_parallel(directory: Path, n: int = 40, seed: int = 0, target_lines: int | None = None) -> tuple[Path, Path]:
    """Two line-aligned files; the 'German' side is another sentence of different length (tiny vocabulary)."""
    import random

    rng = random.Random(seed)
    src = [" ".join(rng.choice(ALPHA) for _ in range(rng.randint(3, 8))) for _ in range(n)]
    tgt = [" ".join(rng.choice(ALPHA) for _ in range(rng.randint(2, 12))) for _ in range(n)]
    if target_lines is not None:
        tgt = tgt[:target_lines]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.en").write_text("\n".join(src) + "\n")
    (directory / "train.de").write_text("\n".join(tgt) + "\n")
    return directory / "train.en", directory / "train.de"


def ifcl_config(model_dir, files, out, *extra):
    src, tgt = files
    return load_config(None, [
        "method=ifcl", f"model.backbone={model_dir}", f"method_options.parallel.source={src}",
        f"method_options.parallel.target={tgt}", f"train.output_dir={out}", "train.batch_size=4",
        "train.max_steps=4", "train.eval_every=2", "train.lr=1e-3", "train.log_every=1", "model.max_length=16",
        "method_options.queue_size=10", *extra,
    ])


def ctx():
    generator = torch.Generator()
    generator.manual_seed(0)
    return StepContext(dist=DistributedContext(), step=0, generator=generator)


def loop_identical_loss(h, h_pos, queue, weights, tau):
    """l_I (IFCL Eq. 6) by direct loops in float64."""
    h, h_pos, queue = h.double(), h_pos.double(), queue.double()

    def s(a, b):
        return float(torch.dot(a, b) / (a.norm() * b.norm())) / tau

    total = 0.0
    for i in range(h.shape[0]):
        denominator = sum(math.exp(s(h[i], h_pos[j])) for j in range(h.shape[0]))
        denominator += sum(float(weights[m]) * math.exp(s(h[i], queue[m])) for m in range(queue.shape[0]))
        total += -math.log(math.exp(s(h[i], h_pos[i])) / denominator)
    return total / h.shape[0]


# -- data ------------------------------------------------------------------------------------------------
def test_collate_pads_both_sides_to_one_length(tiny_model_dir, tmp_path):
    config = ifcl_config(tiny_model_dir, write_parallel(tmp_path / "p"), tmp_path / "run")
    method = Trainer(config).method
    pairs = [("a man plays", "the dog runs on the road in the park"), ("two women walk in the big park", "cat")]
    batch = method.collate(pairs)
    tokenize = method.encoder.tokenizer  # default BEL_F: the source tokenizer for both sides
    source = tokenize(["a man plays", "two women walk in the big park"], padding=True, truncation=True, max_length=16)
    german = tokenize(["the dog runs on the road in the park", "cat"], padding=True, truncation=True, max_length=16)
    length = max(len(source["input_ids"][0]), len(german["input_ids"][0]))
    assert length <= 16 and len(source["input_ids"][0]) != len(german["input_ids"][0])
    pad = method.encoder.tokenizer.pad_token_id
    for key, enc in (("", source), ("fraternal_", german)):
        ids, mask = batch[f"{key}input_ids"], batch[f"{key}attention_mask"]
        assert ids.shape == mask.shape == (2, length)
        for row in range(2):
            n = len(enc["input_ids"][row])
            assert ids[row, :n].tolist() == enc["input_ids"][row]
            assert ids[row, n:].tolist() == [pad] * (length - n)
            assert mask[row, :n].tolist() == enc["attention_mask"][row] and mask[row, n:].sum() == 0


def test_views_embedding_summaries_and_fused_mask_by_independent_computation(tiny_model_dir, tmp_path):
    """In eval mode (no dropout): e = masked mean of BEL_S(x) (own mask); e_frat of 0.9*y + 0.1*y_de (OR mask)."""
    config = ifcl_config(tiny_model_dir, write_parallel(tmp_path / "p"), tmp_path / "run")
    method = Trainer(config).method.eval()
    batch = method.collate([("a man", "the dog runs on the road"), ("two women walk in the big park", "cat")])
    views = method.encode_views(batch)
    with torch.no_grad():
        embeddings = method.encoder.backbone.embeddings  # eval: the module's output IS BEL(x)
        y = embeddings(input_ids=batch["input_ids"])
        y_de = embeddings(input_ids=batch["fraternal_input_ids"])  # the frozen copy equals it before training
        mask = batch["attention_mask"].float()
        or_mask = ((batch["attention_mask"] + batch["fraternal_attention_mask"]) > 0).float()
        # row 0: the German side is longer, so the fused view attends to positions English does not have
        assert or_mask[0].sum() > mask[0].sum() and or_mask[1].sum() == mask[1].sum()
        expected_e = (y * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        fused = 0.9 * y + 0.1 * y_de
        expected_e_frat = (fused * or_mask[..., None]).sum(1) / or_mask.sum(1, keepdim=True)
        normal = method.encoder(batch, apply_head=True)  # the ordinary forward path, with the MLP
    assert torch.allclose(views["e"], expected_e, atol=1e-5) and torch.allclose(views["e_pos"], expected_e, atol=1e-5)
    assert torch.allclose(views["e_frat"], expected_e_frat, atol=1e-5)
    assert not (views["e"].requires_grad or views["e_pos"].requires_grad or views["e_frat"].requires_grad)
    assert torch.allclose(views["h"], normal, atol=1e-5) and torch.allclose(views["h_pos"], normal, atol=1e-5)
    assert views["h"].requires_grad and views["h_frat"].requires_grad
    assert not torch.allclose(views["h_frat"], normal, atol=1e-3)


def test_embedding_summaries_see_the_embedding_dropout(tiny_bert_dir, tmp_path):
    """Training mode: e / e_pos are means of the DROPPED-OUT embedding outputs (two different draws)."""
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run", "model.dropout=0.3",
                         "model.dropout_masks=torch")  # reproduced below with torch's own dropout
    method = Trainer(config).method.train()
    batch = method.collate([("a man", "the dog runs on the road"), ("two women walk in the big park", "cat")])
    torch.manual_seed(5)
    views = method.encode_views(batch)
    assert not torch.allclose(views["e"], views["e_pos"])
    # reproduce by hand: the embedding dropout over the stacked views is the step's first random draw
    embeddings = method.encoder.backbone.embeddings
    with torch.no_grad():
        embeddings.eval()
        y = embeddings(input_ids=batch["input_ids"])
        y_de = embeddings(input_ids=batch["fraternal_input_ids"])
        embeddings.train()
        or_mask = ((batch["attention_mask"] + batch["fraternal_attention_mask"]) > 0).long()
        torch.manual_seed(5)
        dropped = torch.nn.functional.dropout(torch.cat([y, y, 0.9 * y + 0.1 * y_de]), p=0.3, training=True)
    masks = torch.cat([batch["attention_mask"], batch["attention_mask"], or_mask]).float()[..., None]
    expected = (dropped * masks).sum(1) / masks.sum(1)
    assert torch.allclose(torch.cat([views["e"], views["e_pos"], views["e_frat"]]), expected, atol=1e-5)


def test_unequal_parallel_files_are_a_clear_error(tiny_bert_dir, tmp_path):
    files = write_parallel(tmp_path / "p", n=10, target_lines=9)
    with pytest.raises(CselabError, match="not line-aligned.*10 lines.*9"):
        Trainer(ifcl_config(tiny_bert_dir, files, tmp_path / "run"))


def test_skipped_pairs_are_counted_and_reported(tiny_bert_dir, tmp_path, capsys):
    src, tgt = write_parallel(tmp_path / "p", n=12)
    lines = tgt.read_text().splitlines()
    lines[3] = "   "  # blank translation: the pair is skipped
    lines[5] = " ".join(["dog"] * 30)  # too long with max_words 20
    tgt.write_text("\n".join(lines) + "\n")
    with reporting(console(bars=False)):  # the corpus summary is said to the reporter in effect
        trainer = Trainer(ifcl_config(tiny_bert_dir, (src, tgt), tmp_path / "run", "data.max_words=20"))
    assert len(trainer.examples) == 10
    english = src.read_text().splitlines()
    assert [e[0] for e in trainer.examples] == [s for i, s in enumerate(english) if i not in (3, 5)]
    out = capsys.readouterr().out
    assert "10 pairs used; skipped 1 (blank or invalid UTF-8 side), 1 (a side over max_words)" in out
    limited = Trainer(ifcl_config(tiny_bert_dir, (src, tgt), tmp_path / "r2", "data.max_sentences=8"))
    assert len(limited.examples) == 8


def test_corpus_names_and_conflicts(tiny_bert_dir, tmp_path, monkeypatch):
    files = write_parallel(tmp_path / "p")
    with pytest.raises(CselabError, match="give the parallel corpus once"):
        Trainer(ifcl_config(tiny_bert_dir, files, tmp_path / "run", "data.corpus=parallel-de"))
    bare = load_config(None, ["method=ifcl", f"model.backbone={tiny_bert_dir}", "train.batch_size=4"])
    with pytest.raises(CselabError, match="parallel sentences.*'default'"):
        Trainer(bare)
    home = tmp_path / "home"
    monkeypatch.setenv("CSELAB_HOME", str(home))
    named = load_config(None, ["method=ifcl", f"model.backbone={tiny_bert_dir}", "train.batch_size=4",
                               "data.corpus=parallel-de"])
    with pytest.raises(CselabError, match="cselab data fetch parallel-de"):
        Trainer(named)
    write_parallel(home / "parallel-de", n=9)
    trainer = Trainer(named)
    assert trainer.examples[0][0] == (home / "parallel-de" / "train.en").read_text().splitlines()[0]
    assert len(trainer.examples) == 9


# -- the hippocampus queue ---------------------------------------------------------------------------
def test_queue_order_size_coefficients_and_no_gradient_after_training_steps(tiny_bert_dir, tmp_path, monkeypatch):
    lam, batch_size, capacity = 0.05, 4, 10
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run",
                         f"method_options.forgetting_rate={lam}", f"method_options.queue_size={capacity}")
    trainer = Trainer(config)
    method = trainer.method.train()
    anchors, calls = [], []
    encode = method.encode_views

    def recording_encode(batch):
        views = encode(batch)
        anchors.append(views["h"].detach().float().clone())
        return views

    real_loss = ifcl_module.hippocampus_info_nce

    def spy(h, h_pos, queue, weights, temperature):
        calls.append((h.detach().clone(), h_pos.detach().clone(), queue.clone(), weights.clone()))
        return real_loss(h, h_pos, queue, weights, temperature)

    monkeypatch.setattr(method, "encode_views", recording_encode)
    monkeypatch.setattr(ifcl_module, "hippocampus_info_nce", spy)
    for step in range(4):
        values = trainer.train_step(trainer.batch_at(step))
        # after the step: this step's anchors first (batch row order kept), then older steps, oldest dropped
        expected_queue = torch.cat(anchors[::-1])[:capacity]
        assert len(method.queue) == min(capacity, batch_size * (step + 1))
        assert torch.equal(method.queue.embeddings, expected_queue)
        assert not method.queue.embeddings.requires_grad and method.queue.embeddings.grad_fn is None
        # the loss of this step saw only the PREVIOUS steps' anchors, with p_m = 1 - lam * ceil(m / N)
        h, h_pos, queue, weights = calls[step]
        previous = torch.cat(anchors[:step][::-1])[:capacity] if step else torch.zeros(0, h.shape[1])
        assert torch.equal(queue, previous)
        expected_weights = [1 - lam * math.ceil(m / batch_size) for m in range(1, queue.shape[0] + 1)]
        assert weights.tolist() == pytest.approx(expected_weights, abs=1e-7)
        assert values["identical"] == pytest.approx(loop_identical_loss(h, h_pos, queue, expected_weights, 0.05),
                                                    rel=1e-5)
    assert [w.shape[0] for *_, w in calls] == [0, 4, 8, 10]
    assert not torch.equal(anchors[0], anchors[3]), "anchors change as the model trains"


def test_queue_state_round_trip_through_safetensors(tiny_bert_dir, tmp_path):
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run")
    trainer = Trainer(config)
    method = trainer.method.train()
    empty = method.extra_state()
    save_file(empty, str(tmp_path / "empty.safetensors"))
    for step in range(3):
        trainer.train_step(trainer.batch_at(step))
    state = method.extra_state()
    save_file(state, str(tmp_path / "extra.safetensors"))
    other = Trainer(ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run2")).method
    other.load_extra_state(load_file(str(tmp_path / "extra.safetensors")))
    assert torch.equal(other.queue.embeddings, method.queue.embeddings) and len(other.queue) == 10
    other.load_extra_state(load_file(str(tmp_path / "empty.safetensors")))
    assert len(other.queue) == 0
    no_queue = Trainer(ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run3",
                                   "method_options.queue_size=0")).method
    assert no_queue.extra_state() == {}
    with pytest.raises(CselabError, match="hippocampus queue"):
        no_queue.load_extra_state(state)
    with pytest.raises(CselabError, match="no hippocampus queue"):
        other.load_extra_state({})


def test_resumed_run_restores_the_queue_exactly(tiny_bert_dir, sts_home, tmp_path):
    """6 steps straight == 3 steps, then --resume to 6: identical weights AND queue."""
    files = write_parallel(tmp_path / "p", n=40)
    common = ["train.scheduler=constant", "train.eval_at_start=false", "train.eval_every=100", "train.save_every=3"]
    Trainer(ifcl_config(tiny_bert_dir, files, tmp_path / "a", *common, "train.max_steps=6")).run()
    Trainer(ifcl_config(tiny_bert_dir, files, tmp_path / "b", *common, "train.max_steps=3")).run()
    half = load_file(str(tmp_path / "b" / "last" / "method_extra.safetensors"))["hippocampus_queue"]
    assert half.shape == (10, 32)
    resumed = Trainer(ifcl_config(tiny_bert_dir, files, tmp_path / "b", *common, "train.max_steps=6"))
    resumed.run(resume=True, allow_change=("train.max_steps",))  # the schedule is constant: extending is exact
    a_extra = load_file(str(tmp_path / "a" / "last" / "method_extra.safetensors"))
    b_extra = load_file(str(tmp_path / "b" / "last" / "method_extra.safetensors"))
    assert torch.equal(a_extra["hippocampus_queue"], b_extra["hippocampus_queue"])
    assert not torch.equal(b_extra["hippocampus_queue"], half)
    a_weights = load_file(str(tmp_path / "a" / "last" / "method.safetensors"))
    b_weights = load_file(str(tmp_path / "b" / "last" / "method.safetensors"))
    assert a_weights.keys() == b_weights.keys()
    assert all(torch.equal(a_weights[k], b_weights[k]) for k in a_weights)


# -- the terms' wiring -----------------------------------------------------------------------------------
def test_twins_and_fraternal_terms_on_hand_computed_tensors(tiny_bert_dir, tmp_path, monkeypatch):
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run", "method_options.queue_size=0")
    method = Trainer(config).method
    views = {
        "h": torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        "h_pos": torch.tensor([[1.0, 0.0], [1.0, 1.0]]),
        "h_frat": torch.tensor([[0.0, 1.0], [1.0, 2.0]]),
        "e": torch.tensor([[1.0, 0.0], [1.0, 0.0]]),
        "e_pos": torch.tensor([[0.0, 1.0], [1.0, 0.0]]),
        "e_frat": torch.tensor([[1.0, 0.0], [-1.0, 0.0]]),
    }
    monkeypatch.setattr(method, "encode_views", lambda batch: views)
    terms = method.loss_terms({}, ctx())
    e, r2, r5 = math.e, math.sqrt(2), math.sqrt(5)
    # row 0: cos(h,h+) = 1, cos(h,h-) = 0; innate margin from cos(e,e+) = 0, cos(e,e-) = 1
    row0 = abs((e - 1) - (1 - e))
    # row 1: cos(h,h+) = 1/sqrt2, cos(h,h-) = 2/sqrt5; margin from cos(e,e+) = 1, cos(e,e-) = -1
    row1 = abs((math.exp(1 / r2) - math.exp(2 / r5)) - (e - 1 / e))
    assert terms["twins"].item() == pytest.approx((row0 + row1) / 2, rel=1e-6)
    s = 1 / 0.05  # InfoNCE logits are cos / tau
    # fraternal: cos(h_i, h-_j) = [[0, 1/sqrt5], [1, 2/sqrt5]]
    frat0 = -math.log(1 / (1 + math.exp(s / r5)))
    frat1 = -math.log(math.exp(2 * s / r5) / (math.exp(s) + math.exp(2 * s / r5)))
    assert terms["fraternal"].item() == pytest.approx((frat0 + frat1) / 2, rel=1e-5)
    # identical (no queue): cos(h_i, h+_j) = [[1, 1/sqrt2], [0, 1/sqrt2]]
    ident0 = -math.log(math.exp(s) / (math.exp(s) + math.exp(s / r2)))
    ident1 = -math.log(math.exp(s / r2) / (1 + math.exp(s / r2)))
    assert terms["identical"].item() == pytest.approx((ident0 + ident1) / 2, rel=1e-5)


@pytest.mark.parametrize(
    ("overrides", "expected_terms", "rows", "queue", "fraternal"),
    [
        ([], {"identical", "fraternal", "twins"}, 3, True, True),
        (["method_options.loss_weights={fraternal: 0, twins: 0}"], {"identical"}, 2, True, False),  # w/o FI, TL
        (["method_options.queue_size=0"], {"identical", "fraternal", "twins"}, 3, False, True),  # w/o HQ
        (["method_options.queue_size=0", "method_options.loss_weights={twins: 0}"], {"identical", "fraternal"}, 3,
         False, True),
        (["method_options.loss_weights={identical: 0, twins: 0}"], {"fraternal"}, 2, False, True),
        (["method_options.loss_weights={identical: 0, fraternal: 0}"], {"twins"}, 3, False, True),
    ],
    ids=["full", "wo-fi-tl", "wo-hq", "wo-tl-hq", "fraternal-only", "twins-only"],
)
def test_ablation_switches_compute_exactly_the_expected_terms(tiny_bert_dir, tmp_path, monkeypatch,
                                                              overrides, expected_terms, rows, queue, fraternal):
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run", *overrides)
    trainer = Trainer(config)
    method = trainer.method.train()
    assert (method.queue is not None) == queue and (method.fraternal is not None) == fraternal
    passes = []
    method.encoder.backbone.encoder.register_forward_pre_hook(lambda module, args: passes.append(args[0].shape[0]))
    for step in range(2):
        batch = trainer.batch_at(step)
        assert ("fraternal_input_ids" in batch) == fraternal
        passes.clear()
        views = {}
        encode = method.encode_views

        def recording(b, encode=encode, views=views):
            views.update(encode(b))
            return views

        monkeypatch.setattr(method, "encode_views", recording)
        terms = method.loss_terms(batch, trainer._context())
        monkeypatch.undo()
        assert set(terms) == expected_terms
        assert passes == [rows * 4], "one forward pass of exactly the needed views"
        if "identical" in terms and not queue:
            assert torch.equal(terms["identical"], info_nce(views["h"], views["h_pos"], 0.05))
        if "fraternal" in terms:
            assert torch.equal(terms["fraternal"], info_nce(views["h"], views["h_frat"], 0.05))
        method.after_step()
        if queue:
            assert len(method.queue) == 4 * (step + 1)


def test_without_fraternal_twins_and_queue_ifcl_is_simcse_bit_for_bit(tiny_model_dir, tmp_path):
    """w/o FI, TL, HQ is the paper's SimCSE row: same seed -> the same loss value, exactly."""
    files = write_parallel(tmp_path / "p")
    pins = ("model.dropout_masks=torch", "train.length_group_window=null")  # one stream, one batch order for both
    config = ifcl_config(tiny_model_dir, files, tmp_path / "run", "method_options.queue_size=0",
                         "method_options.loss_weights={fraternal: 0, twins: 0}", *pins)
    torch.manual_seed(3)
    ifcl = Trainer(config)
    simcse_config = load_config(None, [f"model.backbone={tiny_model_dir}", f"data.corpus={files[0]}",
                                       "train.batch_size=4", "model.max_length=16",
                                       f"train.output_dir={tmp_path / 's'}", *pins])
    torch.manual_seed(3)
    simcse = Trainer(simcse_config)
    assert [e[0] for e in ifcl.examples] == list(simcse.examples)
    ifcl.method.train()
    simcse.method.train()
    for step in range(2):
        torch.manual_seed(10 + step)
        a = ifcl.method.loss_terms(ifcl.batch_at(step), ifcl._context())["identical"]
        torch.manual_seed(10 + step)
        b = simcse.method.loss_terms(simcse.batch_at(step), simcse._context())["info_nce"]
        assert torch.equal(a, b)


def test_source_embeddings_can_be_frozen(tiny_bert_dir, tmp_path):
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run",
                         "method_options.train_source_embeddings=false")
    trainer = Trainer(config)
    method = trainer.method.train()
    before = method.encoder.backbone.embeddings.word_embeddings.weight.clone()
    layer = method.encoder.backbone.encoder.layer[0].output.dense.weight.clone()
    trainer.train_step(trainer.batch_at(0))
    assert torch.equal(method.encoder.backbone.embeddings.word_embeddings.weight, before)
    assert not torch.equal(method.encoder.backbone.encoder.layer[0].output.dense.weight, layer)


def test_fraternal_model_option_uses_its_own_tokenizer_and_trains_the_projection(tiny_bert_dir, tiny_roberta_dir,
                                                                                  tmp_path):
    from tests.models.test_fusion import _small_roberta_dir

    other = _small_roberta_dir(tmp_path, tiny_roberta_dir, hidden=16)
    config = ifcl_config(tiny_bert_dir, write_parallel(tmp_path / "p"), tmp_path / "run",
                         f"method_options.fraternal_model={other}")
    trainer = Trainer(config)
    method = trainer.method.train()
    assert method.fraternal.tokenizer.pad_token == "<pad>" and method.fraternal.projection is not None
    batch = trainer.batch_at(0)
    assert int(batch["fraternal_input_ids"][:, 0].unique().item()) == method.fraternal.tokenizer.bos_token_id
    projection = method.fraternal.projection.weight.clone()
    frozen = method.fraternal.embeddings.word_embeddings.weight.clone()
    trainer.train_step(batch)
    assert not torch.equal(method.fraternal.projection.weight, projection)
    assert torch.equal(method.fraternal.embeddings.word_embeddings.weight, frozen)


# -- whole loop ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("eval_pooler", [None, "mean"])
def test_whole_loop_on_tiny_models(tiny_model_dir, sts_home, tmp_path, eval_pooler):
    extra = [f"method_options.eval_pooler={eval_pooler}"] if eval_pooler else []
    config = ifcl_config(tiny_model_dir, write_parallel(tmp_path / "p", n=40), tmp_path / "run", *extra)
    trainer, log = run_whole_loop(config, steps=4)
    losses = [r for r in log if "loss" in r]
    assert len(losses) == 4 and all({"identical", "fraternal", "twins"} <= set(r) for r in losses)
    assert all(math.isfinite(r["loss"]) for r in losses)
    assert [r["step"] for r in log if "dev" in r] == [0, 2, 4]
    assert len(trainer.method.queue) == 10
    saved = json.loads((tmp_path / "run" / "best" / "cselab.json").read_text())
    assert saved["pooler"] == (eval_pooler or "cls") and saved["head"] is not None
    model = load_model(tmp_path / "run" / "best")
    assert model.pooler == (eval_pooler or "cls")
    other = load_model(tmp_path / "run" / "best", pooler="cls" if eval_pooler else "mean")
    assert other.encode(["a man plays"]).shape == (1, 32)


def test_shipped_configs_validate(tmp_path):
    from cselab.methods.ifcl import IFCLOptions

    configs = {p.stem: load_config(p) for p in sorted((REPO / "configs" / "ifcl").glob("*.yaml"))}
    assert set(configs) >= {"paper-bert-base", "cpu-minilm", "cpu-minilm-wo-fi-tl", "cpu-minilm-wo-hq",
                            "cpu-minilm-wo-tl-hq", "cpu-minilm-simcse-same-data"}
    options = {name: IFCLOptions.model_validate(c.method_options) for name, c in configs.items() if c.method == "ifcl"}
    assert options["cpu-minilm-wo-fi-tl"].loss_weights == {"fraternal": 0, "twins": 0}
    assert options["cpu-minilm-wo-fi-tl"].queue_size == 416
    assert options["cpu-minilm-wo-hq"].queue_size == 0 and not options["cpu-minilm-wo-hq"].loss_weights
    assert (options["cpu-minilm-wo-tl-hq"].queue_size == 0
            and options["cpu-minilm-wo-tl-hq"].loss_weights == {"twins": 0})
    paper = configs["paper-bert-base"]
    assert (paper.train.lr, paper.model.dropout, paper.train.eval_every) == (1e-5, 0.15, 151)
    assert options["paper-bert-base"].eval_pooler == "mean"
    simcse = load_config(REPO / "configs" / "simcse" / "cpu-minilm.yaml")
    for name in ("cpu-minilm", "cpu-minilm-wo-fi-tl", "cpu-minilm-wo-hq", "cpu-minilm-wo-tl-hq",
                 "cpu-minilm-simcse-same-data"):
        c = configs[name]
        same = ("seed", "batch_size", "max_steps", "eval_every", "precision", "lr", "scheduler")
        assert all(getattr(c.train, k) == getattr(simcse.train, k) for k in same), name
        assert c.model == simcse.model, name
    assert configs["cpu-minilm-simcse-same-data"].data.corpus == "parallel-de.en"
    outputs = [c.train.output_dir for c in configs.values()]
    assert len(set(outputs)) == len(outputs)
