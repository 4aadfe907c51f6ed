"""Distillation of a twin model (TNCSE-D / JTCSE-D) into a single student encoder: onto the teacher's vectors
(the papers'), or onto its in-batch cosine similarities (a teacher of any width)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab.losses._checks import as_float32, check_matrix, check_same_shape
from cselab.losses.info_nce import cosine_similarity_matrix


def distillation_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error ``mean_{i,k} (student[i,k] - teacher[i,k])^2`` with the teacher detached.

    The "-D" variants of TNCSE/JTCSE (the papers give no equation number; METHODS.md section 5): the
    student's CLS vector regresses onto the twin model's output ``h_I + h_II``.

    Args:
        student: ``[B, d]`` student embeddings (receive the gradient).
        teacher: ``[B, d]`` teacher embeddings (treated as constants).

    Returns:
        float32 scalar.
    """
    check_matrix("student", student)
    check_same_shape(("student", "teacher"), (student, teacher))
    return F.mse_loss(as_float32(student), as_float32(teacher.detach()).to(student.device))


def similarity_distillation_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error between the in-batch cosine-similarity matrices, over the off-diagonal pairs:
    ``mean_{i != j} (cos(s_i, s_j) - cos(t_i, t_j))^2`` with the teacher detached.

    Only similarities are compared, so the teacher's width need not be the student's (e.g. a 768-d MPNet, or a
    concatenating ensemble, taught to a 384-d MiniLM); the diagonal is 1 on both sides and left out.

    Args:
        student: ``[B, d_s]`` student embeddings (receive the gradient), ``B >= 2``.
        teacher: ``[B, d_t]`` teacher embeddings (treated as constants); any ``d_t``.

    Returns:
        float32 scalar.
    """
    check_matrix("student", student)
    check_matrix("teacher", teacher)
    if teacher.shape[0] != student.shape[0]:
        raise ValueError(f"teacher must have as many rows as student ({student.shape[0]}), got {tuple(teacher.shape)}")
    rows = student.shape[0]
    if rows < 2:
        raise ValueError(f"similarity distillation compares pairs of sentences: it needs a batch of at least 2, got {rows}")
    own = cosine_similarity_matrix(student, student)
    target = cosine_similarity_matrix(teacher.detach(), teacher.detach()).to(own.device)
    off_diagonal = ~torch.eye(rows, dtype=torch.bool, device=own.device)
    return F.mse_loss(own[off_diagonal], target[off_diagonal])
