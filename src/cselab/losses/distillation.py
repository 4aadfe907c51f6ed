"""Distillation of a twin model (TNCSE-D / JTCSE-D) into a single student encoder: onto the teacher's vectors
(the papers'), or onto its cosine similarities (a teacher of any width): the in-batch matrix value by value (MSE)
or as each sentence's distribution over the other sentences of the batch (KL), or chosen pairs (MSE)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab.losses._checks import as_float32, check_matrix, check_same_shape
from cselab.losses.info_nce import cosine_similarity_matrix


def distillation_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error ``mean_{i,k} (student[i,k] - teacher[i,k])^2`` with the teacher detached.

    The "-D" variants of TNCSE/JTCSE (the papers give no equation number; docs/methods.md#tncse): the
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


def distillation_cosine(student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cosine distance ``mean_i (1 - cos(student[i], target[i]))`` with the target detached.

    Only each vector's direction is matched: unlike :func:`distillation_mse`, the student's vector lengths are
    free, which is all a model compared by cosine is used for.

    Args:
        student: ``[B, d]`` student embeddings (receive the gradient).
        target: ``[B, d]`` target vectors (treated as constants).

    Returns:
        float32 scalar.
    """
    check_matrix("student", student)
    check_same_shape(("student", "target"), (student, target))
    cos = F.cosine_similarity(as_float32(student), as_float32(target.detach()).to(student.device), dim=-1)
    return (1.0 - cos).mean()


def _check_student_teacher(student: torch.Tensor, teacher: torch.Tensor) -> int:
    """The row count of two embedding matrices of any widths that must describe the same sentences."""
    check_matrix("student", student)
    check_matrix("teacher", teacher)
    if teacher.shape[0] != student.shape[0]:
        raise ValueError(f"teacher must have as many rows as student ({student.shape[0]}), got {tuple(teacher.shape)}")
    return student.shape[0]


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
    rows = _check_student_teacher(student, teacher)
    if rows < 2:
        raise ValueError("similarity distillation compares pairs of sentences: "
                         f"it needs a batch of at least 2, got {rows}")
    own = cosine_similarity_matrix(student, student)
    target = cosine_similarity_matrix(teacher.detach(), teacher.detach()).to(own.device)
    off_diagonal = ~torch.eye(rows, dtype=torch.bool, device=own.device)
    return F.mse_loss(own[off_diagonal], target[off_diagonal])


def similarity_distillation_kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """Row-wise KL divergence between the teacher's and the student's softmax distributions over the OTHER
    sentences of the batch, averaged over the rows:

    ``p_i(j) = exp(cos(t_i, t_j) / tau) / sum_{k != i} exp(cos(t_i, t_k) / tau)`` for ``j != i``, ``q_i`` the same
    from the student, loss ``= mean_i sum_{j != i} p_i(j) (log p_i(j) - log q_i(j))``, the teacher detached.

    Where :func:`similarity_distillation_mse` weighs every pair alike (in a batch of unrelated sentences mostly
    pairs near cos 0), this term asks the student to rank each sentence's nearest neighbours as the teacher does;
    ``tau`` sets how far down the ranking counts. Any teacher width.

    Args:
        student: ``[B, d_s]`` student embeddings (receive the gradient), ``B >= 3`` (two others per row).
        teacher: ``[B, d_t]`` teacher embeddings (treated as constants); any ``d_t``.
        temperature: ``tau > 0``, the same for both distributions.

    Returns:
        float32 scalar.
    """
    rows = _check_student_teacher(student, teacher)
    if rows < 3:
        raise ValueError(f"a distribution over the other sentences needs a batch of at least 3, got {rows}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    off_diagonal = ~torch.eye(rows, dtype=torch.bool, device=student.device)
    # [B, B-1]: row i holds cos(., j) for every j != i, in order
    own = cosine_similarity_matrix(student, student)[off_diagonal].view(rows, rows - 1)
    target = cosine_similarity_matrix(teacher.detach(), teacher.detach()).to(student.device)[off_diagonal]
    log_q = F.log_softmax(own / temperature, dim=-1)
    log_p = F.log_softmax(target.view(rows, rows - 1) / temperature, dim=-1)
    return F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)


def pair_similarity_mse(first: torch.Tensor, second: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between the student's cosine of each pair and the teacher's:
    ``mean_i (cos(first[i], second[i]) - target[i])^2`` with the target detached.

    Where :func:`similarity_distillation_mse` compares every pair of a batch (nearly all unrelated in a shuffled
    batch), this term compares the pairs the caller chose, e.g. each sentence with one of its nearest neighbours by
    the teacher and with a random sentence, so graded, related pairs weigh as much as unrelated ones.

    Args:
        first: ``[P, d]`` student embeddings of the pairs' first sentences (receive the gradient).
        second: ``[P, d]`` student embeddings of their second sentences (receive the gradient).
        target: ``[P]`` the teacher's cosine of each pair (treated as constants).

    Returns:
        float32 scalar.
    """
    check_matrix("first", first)
    check_same_shape(("first", "second"), (first, second))
    if target.dim() != 1 or target.shape[0] != first.shape[0]:
        raise ValueError(f"target must be a vector of {first.shape[0]} cosines, got shape {tuple(target.shape)}")
    own = F.cosine_similarity(as_float32(first), as_float32(second), dim=-1)
    return F.mse_loss(own, as_float32(target.detach()).to(own.device))
