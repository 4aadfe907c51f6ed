"""CoT-BERT's extended InfoNCE: template-based hard negatives, compared with anchors AND positives."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab.losses._checks import check_matrix, check_positive, check_same_shape
from cselab.losses.info_nce import cosine_similarity_matrix


def extended_info_nce(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor,
    temperature: float = 0.05,
    template_negatives: bool = True,
) -> torch.Tensor:
    """Extended InfoNCE of CoT-BERT (paper Eq. 3).

    Row i has the logits (each block over j = 1..B, all divided by tau)::

        [cos(r_i, r+_j)]_j  ++  [cos(r_i, r-_j)]_j  ++  [cos(r+_i, r-_j)]_j

    and label i (the positive ``cos(r_i, r+_i)``); the loss is the mean cross-entropy over rows.
    ``template_negatives=False`` drops the third block (the paper's Table 4 ablation).

    Args:
        anchor: ``[B, d]`` r (anchor-template representations).
        positive: ``[B, d]`` r+ (positive-template representations).
        negative: ``[B, d]`` r- (negative-template representations).
        temperature: tau > 0.
        template_negatives: keep the positive-vs-negative block.

    Returns:
        float32 scalar.
    """
    check_matrix("anchor", anchor)
    check_same_shape(("anchor", "positive", "negative"), (anchor, positive, negative))
    check_positive("temperature", temperature)
    blocks = [cosine_similarity_matrix(anchor, positive), cosine_similarity_matrix(anchor, negative)]
    if template_negatives:
        blocks.append(cosine_similarity_matrix(positive, negative))
    logits = torch.cat(blocks, dim=1) / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    return F.cross_entropy(logits, labels)
