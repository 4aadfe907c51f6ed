"""Loss terms as small pure functions of tensors (in the style of ``torch.nn.functional``).

Convention: ``temperature`` is tau and logits are ``cos / tau``. Every loss computes in float32 (inputs
in bf16/fp16 are cast inside) and returns a float32 scalar.
"""

from cselab.losses.dimension_contrastive import dimension_contrastive_loss
from cselab.losses.distillation import (
    distillation_cosine,
    distillation_mse,
    pair_similarity_mse,
    similarity_distillation_kl,
    similarity_distillation_mse,
)
from cselab.losses.extended_info_nce import extended_info_nce
from cselab.losses.info_nce import (
    cosine_similarity_matrix,
    cross_encoder_info_nce,
    info_nce,
    rowwise_cosine,
)
from cselab.losses.offdropout import OFFDROPOUT_SCALES, offdropout_info_nce
from cselab.losses.tensor_norm import interaction_tensor_norm_loss, tensor_norm_loss
from cselab.losses.twins import hippocampus_info_nce, twins_loss

__all__ = [
    "OFFDROPOUT_SCALES",
    "cosine_similarity_matrix",
    "cross_encoder_info_nce",
    "dimension_contrastive_loss",
    "distillation_cosine",
    "distillation_mse",
    "extended_info_nce",
    "hippocampus_info_nce",
    "info_nce",
    "interaction_tensor_norm_loss",
    "offdropout_info_nce",
    "pair_similarity_mse",
    "rowwise_cosine",
    "similarity_distillation_kl",
    "similarity_distillation_mse",
    "tensor_norm_loss",
    "twins_loss",
]
