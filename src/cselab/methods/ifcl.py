"""IFCL: identical and fraternal twins, the Twins loss and the hippocampus queue (docs/methods.md#ifcl).

Each example is an (English, German) pair. Per step, with ``y = BEL_S(x)`` the source embedding output
and ``y_de = BEL_F(x_de)`` the fraternal one (see :mod:`cselab.models.fusion` for what these are
exactly), ONE forward pass of the stacked views ``[y; y; fuse(y, y_de)]`` (3B rows, each with its own
embedding-dropout and layer-dropout draw) gives

- the anchor ``h = f(y)`` and the identical twin ``h+ = f(y)`` (IFCL Eq. 1),
- the fraternal twin ``h- = f(eps * y + (1 - eps) * y_de)`` (Eq. 3),

each the encoder's training pooler output (``cls`` = [CLS] + the train-only MLP, as in SimCSE). Terms
(names = ``loss_weights`` keys; weight 0 switches a term off and it is not computed):

- ``identical``: ``l_I`` with the hippocampus queue (Eq. 4, 6; :func:`cselab.losses.hippocampus_info_nce`);
  without a queue (``queue_size: 0``) it is plain in-batch InfoNCE.
- ``fraternal``: ``l_F = L_NCE(h, h-)``, in-batch only (Eq. 7).
- ``twins``: ``l_T = |exp cos(h, h+) - exp cos(h, h-) - M|`` (Eq. 8; :func:`cselab.losses.twins_loss`).

The paper's ablation rows (Table 2) are switches: w/o FI+TL = ``loss_weights: {fraternal: 0, twins: 0}``
(no fused view is built, no German is tokenised); w/o HQ = ``queue_size: 0``; w/o TL+HQ = ``twins: 0`` and
``queue_size: 0``; all three off is SimCSE. Only the views some active term needs are encoded.

**Decisions** (the paper is silent; docs/methods.md#ifcl):

- BEL_F, the embedding-output definition and the fusion of sequences of different lengths: see
  :mod:`cselab.models.fusion` (default BEL_F = frozen copy of the source embeddings on ``x_de`` tokenised
  with the source tokenizer; ``fraternal_model`` picks another HF model's embeddings, or a standalone
  embedding layer such as multilingual-e5-small's from ``cselab data fetch models-e5``, with its own
  tokenizer, + a learned projection when widths differ).
- Twins-loss margin ``M_i = exp cos(e_i, e+_i) - exp cos(e_i, e-_i)`` with ``e`` the masked mean (own
  attention mask of each view; the OR mask for the fused view) of the embedding-layer outputs the encoder
  actually saw (embedding dropout on: ``hidden_states[0]``), detached.
- The hippocampus queue holds the detached anchors ``h`` (after the MLP, the vectors the loss compares),
  newest first, pushed in :meth:`IFCL.after_step` (after the optimizer step, as Algorithm 1 line 26 does
  after the loss); ``N`` in ``p_m = 1 - lambda * ceil(m / N)`` is the global batch size. Under data
  parallelism the GLOBAL anchors are enqueued, so every rank holds the same queue. The queue is part of
  the resumable state (:meth:`IFCL.extra_state`).
- Embeddings entering a contrastive loss are gathered across ranks; the twins loss is per row but is
  also computed on the gathered rows so its gradient has the same scale as the other terms.
- ``BEL_S`` is trained with the rest of the backbone (f_theta is "the pre-trained BERT model", trained
  whole as in SimCSE); the paper calls it "the embedding layer without trainable parameters", which
  ``train_source_embeddings: false`` offers (frozen source embeddings).
- Evaluation pooler: the paper trains on [CLS] and reports mean pooling. The saved/evaluated model uses
  ``eval_pooler`` (default: ``model.pooler``, i.e. [CLS] without the MLP when ``model.pooler`` is
  ``cls``); the other pooler is one command away: ``cselab eval RUN/best --pooler mean`` (or ``cls``).
- Table 6's "similarity omega_a 0.85 / omega_b 0.80" are never defined in the paper; not implemented.

Data: ``data.corpus: parallel-de`` reads the fetched pair (``$CSELAB_HOME/parallel-de/train.{en,de}``,
``cselab data fetch parallel-de``); any two line-aligned files are given as
``method_options.parallel: {source: EN_FILE, target: DE_FILE}`` (``data.corpus`` then stays unset).
``data.max_words`` skips pairs with a longer side; ``data.max_sentences`` keeps the first N pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import Tensor

from cselab.errors import CselabError
from cselab.losses import hippocampus_info_nce, info_nce, twins_loss
from cselab.methods.base import Method, MethodOptions, StepContext, register_method
from cselab.methods.simcse import build_encoder
from cselab.models.encoder import Encoder
from cselab.models.fusion import (
    FraternalEmbeddings,
    embedding_output,
    embeddings_module,
    forward_from_embedding_output,
    fuse,
    pad_to_length,
)
from cselab.models.memory_queue import HippocampusQueue
from cselab.models.poolers import masked_mean
from cselab.paths import cselab_home
from cselab.reporter import report
from cselab.vocabulary import POOLERS

# parallel corpus name -> (source file, target file) under $CSELAB_HOME (`cselab data fetch NAME`)
NAMED_PARALLEL = {"parallel-de": ("parallel-de/train.en", "parallel-de/train.de")}
QUEUE_KEY = "hippocampus_queue"


class ParallelFiles(BaseModel):
    """Two line-aligned files: line i of ``target`` translates line i of ``source``."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="the source-language (English) file: anchors and identical twins")
    target: str = Field(description="the translation file (German): the fraternal twins")


class IFCLOptions(MethodOptions):
    fusion_rate: float = Field(0.9, ge=0.0, le=1.0, description="eps in eps*y + (1-eps)*y_de (IFCL Eq. 3)")
    queue_size: int = Field(416, ge=0, description="hippocampus queue length k*N; 0 = no queue (w/o HQ)")
    forgetting_rate: float = Field(0.002, ge=0.0, description="lambda in p_m = 1 - lambda*ceil(m/N) (Eq. 4)")
    fraternal_model: str | None = Field(
        None,
        description="HF model, or standalone embedding layer (e.g. multilingual-e5-small-embeddings, `cselab data "
        "fetch models-e5`), whose embedding layer is BEL_F with its own tokenizer; null = frozen copy of the source's",
    )
    train_source_embeddings: bool = Field(True, description="false freezes BEL_S (the source embedding layer)")
    eval_pooler: str | None = Field(None, description="pooler of the saved/evaluated model; null = model.pooler")
    parallel: ParallelFiles | None = Field(None, description="explicit parallel files instead of data.corpus")

    @field_validator("eval_pooler")
    @classmethod
    def _known_pooler(cls, value: str | None) -> str | None:
        if value is not None and value not in POOLERS:
            raise ValueError(f"unknown pooler {value!r}; choose one of: {', '.join(POOLERS)}")
        return value


# -- data ---------------------------------------------------------------------------------------------
def parallel_files(config: Any, parallel: ParallelFiles | None, home: Path | None = None) -> tuple[Path, Path]:
    """The (source, target) files of a run: ``method_options.parallel`` or a named fetched pair."""
    corpus = config.data.corpus
    if parallel is not None:
        if corpus != "default":
            raise CselabError(
                f"config: give the parallel corpus once: data.corpus={corpus!r} and method_options.parallel "
                "are both set (leave data.corpus unset when method_options.parallel names the files)"
            )
        return Path(parallel.source).expanduser(), Path(parallel.target).expanduser()
    if corpus not in NAMED_PARALLEL:
        raise CselabError(
            f"config: IFCL trains on parallel sentences; data.corpus={corpus!r} is not one of "
            f"{', '.join(NAMED_PARALLEL)} (or name two line-aligned files in method_options.parallel: "
            "{source: EN_FILE, target: DE_FILE})"
        )
    root = home or cselab_home()
    source, target = (root / name for name in NAMED_PARALLEL[corpus])
    if not (source.is_file() and target.is_file()):
        raise CselabError(f"parallel corpus {corpus!r} is not fetched yet: run `cselab data fetch {corpus}` first")
    return source, target


def load_parallel_examples(config: Any, parallel: ParallelFiles | None,
                           home: Path | None = None) -> list[tuple[str, str]]:
    """Read the pairs, drop pairs with a side over ``data.max_words``, keep the first ``data.max_sentences``.

    Prints one line with the number of pairs used and of pairs skipped (blank / invalid UTF-8 side, too long).
    """
    from cselab.data.text.parallel import read_parallel

    source, target = parallel_files(config, parallel, home)
    pairs, skipped = read_parallel(source, target)
    max_words = config.data.max_words
    too_long = 0
    if max_words is not None:
        kept = [p for p in pairs if len(p[0].split()) <= max_words and len(p[1].split()) <= max_words]
        too_long = len(pairs) - len(kept)
        pairs = kept
    if not pairs:
        raise CselabError(f"parallel corpus {source} / {target}: no pair has at most {max_words} words per side")
    if config.data.max_sentences is not None:
        pairs = pairs[: config.data.max_sentences]
    summary = (
        f"parallel corpus {source} / {target}: {len(pairs)} pairs used; skipped {skipped} "
        f"(blank or invalid UTF-8 side), {too_long} (a side over max_words)"
    )
    report().say(summary)
    return pairs


# -- the method ---------------------------------------------------------------------------------------
@register_method
class IFCL(Method):
    name = "ifcl"
    terms = ("identical", "fraternal", "twins")
    Options = IFCLOptions
    in_batch_negatives = True
    preset_dir = "ifcl"
    views = 3  # two dropout views and the fraternal (translated) one

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.encoder = build_encoder(config)
        if not self.options.train_source_embeddings:
            embeddings_module(self.encoder.backbone).requires_grad_(False)
        self.needs_identical = self.active("identical") or self.active("twins")
        self.needs_fraternal = self.active("fraternal") or self.active("twins")
        self.fraternal: FraternalEmbeddings | None = None
        if self.needs_fraternal:
            if self.options.fraternal_model:
                self.fraternal = FraternalEmbeddings.from_pretrained(self.options.fraternal_model,
                                                                     self.encoder.hidden_size)
            else:
                self.fraternal = FraternalEmbeddings.copy_of_source(self.encoder)
        self.queue: HippocampusQueue | None = None
        if self.options.queue_size > 0 and self.active("identical"):
            batch = config.train.batch_size
            # fail at start rather than at step ceil(queue/N): every p_m must stay > 0
            if self.options.forgetting_rate * math.ceil(self.options.queue_size / batch) >= 1:
                raise CselabError(
                    f"config: forgetting_rate {self.options.forgetting_rate} * ceil(queue_size "
                    f"{self.options.queue_size} / batch_size {batch}) >= 1 gives non-positive forgetting coefficients"
                )
            self.queue = HippocampusQueue(self.options.queue_size, dim=self.encoder.hidden_size)
        self._pending_anchors: Tensor | None = None

    # -- data -----------------------------------------------------------------------------------------
    def training_examples(self) -> Sequence[tuple[str, str]]:
        return load_parallel_examples(self.config, self.options.parallel)

    def collate(self, examples: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """Source tokens (+ fraternal tokens), both right-padded to one common length ``L <= max_len``."""
        max_length = self.config.model.max_length
        batch = self.encoder.tokenize([e[0] for e in examples], max_length=max_length)
        if self.fraternal is None:
            return batch
        frat = self.fraternal.tokenize([e[1] for e in examples], max_length=max_length)
        length = max(batch["input_ids"].shape[1], frat["input_ids"].shape[1])
        source_pad = self.encoder.tokenizer.pad_token_id
        if source_pad is None:
            raise CselabError("IFCL pads to a common length and needs a source tokenizer with a pad token")
        ids, mask = pad_to_length(batch["input_ids"], batch["attention_mask"], length, source_pad)
        frat_ids, frat_mask = pad_to_length(frat["input_ids"], frat["attention_mask"], length,
                                            self.fraternal.pad_token_id)
        return {"input_ids": ids, "attention_mask": mask,
                "fraternal_input_ids": frat_ids, "fraternal_attention_mask": frat_mask}

    # -- views ----------------------------------------------------------------------------------------
    def encode_views(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Encode the needed views in ONE forward pass.

        Returns ``h`` (+ ``h_pos``, ``h_frat``) ``[B, d]`` pooled (+ MLP) outputs and ``e`` (+ ``e_pos``,
        ``e_frat``) ``[B, d]`` detached masked means of the embedding outputs the layers saw.
        """
        ids, mask = batch["input_ids"], batch["attention_mask"]
        y = embedding_output(embeddings_module(self.encoder.backbone), ids)
        names, views, masks = [("h", "e")], [y], [mask]
        if self.needs_identical:
            names.append(("h_pos", "e_pos"))
            views.append(y)
            masks.append(mask)
        if self.needs_fraternal:
            assert self.fraternal is not None
            y_de = self.fraternal(batch["fraternal_input_ids"])
            y_fused, fused_mask = fuse(y, mask, y_de.to(y.dtype), batch["fraternal_attention_mask"],
                                       self.options.fusion_rate)
            names.append(("h_frat", "e_frat"))
            views.append(y_fused)
            masks.append(fused_mask)
        features = {"input_ids": ids.repeat(len(views), 1), "attention_mask": torch.cat(masks)}
        outputs = forward_from_embedding_output(self.encoder, torch.cat(views), features)
        pooled = self.encoder.pool_outputs(outputs, features)
        z = self.encoder.head(pooled) if self.encoder.head is not None else pooled
        e = masked_mean(outputs.hidden_states[0].detach().float(), features["attention_mask"])
        result = {}
        for (h_name, e_name), z_part, e_part in zip(names, z.chunk(len(views)), e.chunk(len(views)), strict=True):
            result[h_name], result[e_name] = z_part, e_part
        return result

    # -- loss -----------------------------------------------------------------------------------------
    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        return self.encode_views(batch)

    def loss_from_embeddings(self, views: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        h = views["h"]
        tau = self.options.temperature
        terms: dict[str, Tensor] = {}
        if self.active("identical"):
            h_pos = views["h_pos"]
            if self.queue is not None:
                weights = self.queue.forgetting_coefficients(self.config.train.batch_size, self.options.forgetting_rate)
                terms["identical"] = hippocampus_info_nce(h, h_pos, self.queue.embeddings, weights, tau)
                self._pending_anchors = h.detach()
            else:
                terms["identical"] = info_nce(h, h_pos, tau)
        if self.active("fraternal"):
            terms["fraternal"] = info_nce(h, views["h_frat"], tau)
        if self.active("twins"):
            terms["twins"] = twins_loss(
                h, views["h_pos"], views["h_frat"], views["e"], views["e_pos"], views["e_frat"],
            )
        return terms

    def after_step(self) -> None:
        """Push this step's (global, detached) anchors into the hippocampus queue."""
        if self.queue is not None and self._pending_anchors is not None:
            self.queue.enqueue(self._pending_anchors)
        self._pending_anchors = None

    # -- state ----------------------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Tensor]:
        if self.queue is None:
            return {}
        return {QUEUE_KEY: self.queue.state_dict()["embeddings"]}

    def load_extra_state(self, state: dict[str, Tensor]) -> None:
        unknown = set(state) - {QUEUE_KEY}
        if unknown:
            raise CselabError(f"method 'ifcl' cannot load extra state {sorted(unknown)}")
        if self.queue is None:
            if state:
                raise CselabError("the saved run has a hippocampus queue but this config has none (queue_size 0?)")
            return
        if QUEUE_KEY not in state:
            raise CselabError("the saved run has no hippocampus queue but this config uses one")
        entries = state[QUEUE_KEY]
        dim = int(entries.shape[1]) if entries.dim() == 2 else -1
        try:
            self.queue.load_state_dict({"capacity": self.queue.capacity, "dim": dim, "embeddings": entries})
        except ValueError as exc:
            raise CselabError(f"cannot restore the hippocampus queue: {exc}") from exc
        self._pending_anchors = None

    # -- inference ------------------------------------------------------------------------------------
    def inference_model(self) -> Encoder:
        """The trained encoder; with ``eval_pooler`` set, a view of it (same modules) with that pooler."""
        pooler = self.options.eval_pooler
        if pooler is None or pooler == self.encoder.pooler:
            return self.encoder
        view = Encoder(
            self.encoder.backbone, self.encoder.tokenizer, pooler=pooler,
            max_length=self.encoder.max_length, head=self.encoder.head, prompt=self.encoder.prompt,
        )
        return view.train(self.encoder.training)
