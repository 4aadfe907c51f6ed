"""Distillation of a twin model (TNCSE-D / JTCSE-D) into a single student encoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab.losses._checks import as_float32, check_matrix, check_same_shape


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
