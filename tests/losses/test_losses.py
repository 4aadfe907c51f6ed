"""Loss terms pinned to independent float64 references (Python loops with math.exp / math.log)
and to tiny hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from cselab.losses import (
    cosine_similarity_matrix,
    cross_encoder_info_nce,
    dimension_contrastive_loss,
    distillation_mse,
    extended_info_nce,
    hippocampus_info_nce,
    info_nce,
    interaction_tensor_norm_loss,
    offdropout_info_nce,
    similarity_distillation_kl,
    similarity_distillation_mse,
    tensor_norm_loss,
    twins_loss,
)

E = math.e
R2 = 1 / math.sqrt(2)  # cos 45 degrees
ATOL = 2e-5


# ---------------------------------------------------------------- independent reference helpers


def rand(rows: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, dim, generator=g)


def rows(x: torch.Tensor) -> list[list[float]]:
    return x.detach().double().tolist()


def cos(u: list[float], v: list[float]) -> float:
    dot = sum(a * b for a, b in zip(u, v, strict=True))
    return dot / (math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v)))


def norm(u: list[float]) -> float:
    return math.sqrt(sum(a * a for a in u))


def ref_info_nce(a: torch.Tensor, b: torch.Tensor, tau: float) -> float:
    A, B = rows(a), rows(b)
    total = 0.0
    for i in range(len(A)):
        denom = sum(math.exp(cos(A[i], B[j]) / tau) for j in range(len(B)))
        total += -math.log(math.exp(cos(A[i], B[i]) / tau) / denom)
    return total / len(A)


def ref_icnce(a: torch.Tensor, b: torch.Tensor, tau: float) -> float:
    A, B = rows(a), rows(b)
    n = len(A)
    half = n // 2
    total = 0.0
    for k in range(n):
        positive = (k + half) % n
        denom = sum(math.exp(cos(A[k], B[col]) / tau) for col in range(n) if col != k)
        total += -math.log(math.exp(cos(A[k], B[positive]) / tau) / denom)
    return total / n


def ref_offdropout(z1, z2, z0, tau: float, m: float, scale: str) -> float:
    Z1, Z2, Z0 = rows(z1), rows(z2), rows(z0)
    n = len(Z1)
    total = 0.0
    for i in range(n):
        pos = cos(Z1[i], Z2[i]) / tau
        negs = [math.exp(cos(Z0[i], Z0[j]) / tau) for j in range(n) if j != i]
        if scale == "negatives":
            total += -pos + math.log(math.exp(pos) + m * sum(negs))
        else:
            total += -m * pos + math.log(math.exp(m * pos) + sum(negs))
    return total / n


def ref_standardise(z: list[list[float]], eps: float) -> list[list[float]]:
    n, d = len(z), len(z[0])
    out = [[0.0] * d for _ in range(n)]
    for c in range(d):
        mean = sum(z[i][c] for i in range(n)) / n
        var = sum((z[i][c] - mean) ** 2 for i in range(n)) / (n - 1)
        for i in range(n):
            out[i][c] = (z[i][c] - mean) / math.sqrt(var + eps)
    return out


def ref_dcl(z1, z2, tau: float, eps: float) -> float:
    Z1, Z2 = ref_standardise(rows(z1), eps), ref_standardise(rows(z2), eps)
    n, d = len(Z1), len(Z1[0])
    total = 0.0
    for c in range(d):
        s_row = [sum(Z1[i][c] * Z2[i][e] for i in range(n)) / n / tau for e in range(d)]
        total += -s_row[c] + math.log(sum(math.exp(s) for s in s_row))
    return total / d


def ref_extended(r, rp, rn, tau: float, template_negatives: bool) -> float:
    R, RP, RN = rows(r), rows(rp), rows(rn)
    n = len(R)
    total = 0.0
    for i in range(n):
        logits = [cos(R[i], RP[j]) / tau for j in range(n)]
        logits += [cos(R[i], RN[j]) / tau for j in range(n)]
        if template_negatives:
            logits += [cos(RP[i], RN[j]) / tau for j in range(n)]
        total += -math.log(math.exp(logits[i]) / sum(math.exp(x) for x in logits))
    return total / n


def ref_tensor_norm(ha, hb, pa, pb, floor: float) -> float:
    HA, HB, PA, PB = rows(ha), rows(hb), rows(pa), rows(pb)
    total = 0.0
    for i in range(len(HA)):
        c = max(cos(HA[i], HB[i]), floor)
        gap = norm([x - y for x, y in zip(PA[i], PB[i], strict=True)])
        total += -math.log(c) * gap / (norm(PA[i]) + norm(PB[i]))
    return total / len(HA)


def ref_hippocampus(h, hp, queue, weights, tau: float) -> float:
    H, HP, Q, P = rows(h), rows(hp), rows(queue), weights.double().tolist()
    total = 0.0
    for i in range(len(H)):
        denom = sum(math.exp(cos(H[i], HP[j]) / tau) for j in range(len(HP)))
        denom += sum(P[m] * math.exp(cos(H[i], Q[m]) / tau) for m in range(len(Q)))
        total += -math.log(math.exp(cos(H[i], HP[i]) / tau) / denom)
    return total / len(H)


def ref_twins(h, hp, hf, e, ep, ef) -> float:
    H, HP, HF, EE, EP, EF = (rows(x) for x in (h, hp, hf, e, ep, ef))
    total = 0.0
    for i in range(len(H)):
        margin = math.exp(cos(EE[i], EP[i])) - math.exp(cos(EE[i], EF[i]))
        total += abs(math.exp(cos(H[i], HP[i])) - math.exp(cos(H[i], HF[i])) - margin)
    return total / len(H)


def t(data) -> torch.Tensor:
    return torch.tensor(data, dtype=torch.float32)


# ---------------------------------------------------------------- cosine matrix / InfoNCE


def test_cosine_similarity_matrix_matches_loop():
    a, b = rand(3, 5, 0), rand(4, 5, 1)
    got = cosine_similarity_matrix(a, b)
    assert got.shape == (3, 4) and got.dtype == torch.float32
    A, B = rows(a), rows(b)
    for i in range(3):
        for j in range(4):
            assert got[i, j].item() == pytest.approx(cos(A[i], B[j]), abs=1e-6)


def test_info_nce_hand_case():
    a = t([[1, 0], [0, 1]])
    b = t([[1, 0], [1, 1]])
    # cos: (a1,b1)=1, (a1,b2)=1/sqrt2, (a2,b1)=0, (a2,b2)=1/sqrt2; tau = 1.
    expected = ((-1 + math.log(E + math.exp(R2))) + (-R2 + math.log(1 + math.exp(R2)))) / 2
    assert info_nce(a, b, temperature=1.0).item() == pytest.approx(expected, abs=1e-6)
    # Temperature divides the cosine: tau = 0.5 doubles every logit.
    expected_half = (
        (-2 + math.log(E**2 + math.exp(2 * R2))) + (-2 * R2 + math.log(1 + math.exp(2 * R2)))
    ) / 2
    assert info_nce(a, b, temperature=0.5).item() == pytest.approx(expected_half, abs=1e-6)


@pytest.mark.parametrize("tau", [0.05, 0.7])
def test_info_nce_matches_loop(tau):
    a, b = rand(6, 8, 2), rand(6, 8, 3)
    assert info_nce(a, b, tau).item() == pytest.approx(ref_info_nce(a, b, tau), abs=ATOL)


def test_info_nce_is_not_symmetric_in_arguments():
    a, b = rand(5, 4, 4), rand(5, 4, 5)
    assert info_nce(a, b).item() == pytest.approx(ref_info_nce(a, b, 0.05), abs=ATOL)
    assert info_nce(b, a).item() == pytest.approx(ref_info_nce(b, a, 0.05), abs=ATOL)


# ---------------------------------------------------------------- cross-encoder InfoNCE (ICNCE)


def test_cross_encoder_info_nce_hand_case():
    # Two sentences, both copies identical: rows (1,0), (0,1), (1,0), (0,1) in both encoders.
    x = t([[1, 0], [0, 1], [1, 0], [0, 1]])
    # Row 0: column 0 masked; logits of columns 1, 2 (positive), 3 are 0, 1, 0 (tau = 1).
    expected = -1 + math.log(E + 2)
    assert cross_encoder_info_nce(x, x, temperature=1.0).item() == pytest.approx(expected, abs=1e-6)
    unmasked = -1 + math.log(2 * E + 2)
    assert abs(expected - unmasked) > 0.1  # the hand case distinguishes masking from not masking


def test_cross_encoder_info_nce_single_sentence_is_zero():
    # B = 1: after masking the same-copy partner only the positive logit remains.
    a, b = rand(2, 3, 6), rand(2, 3, 7)
    assert cross_encoder_info_nce(a, b).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("tau", [0.05, 1.0])
def test_cross_encoder_info_nce_matches_masked_loop(tau):
    a, b = rand(8, 6, 8), rand(8, 6, 9)
    assert cross_encoder_info_nce(a, b, tau).item() == pytest.approx(ref_icnce(a, b, tau), abs=ATOL)
    # Not the plain InfoNCE between the stacks (which would use row k of b as positive, unmasked).
    assert abs(cross_encoder_info_nce(a, b, tau).item() - ref_info_nce(a, b, tau)) > 1e-3


def test_cross_encoder_info_nce_rejects_odd_rows():
    with pytest.raises(ValueError, match="even"):
        cross_encoder_info_nce(rand(3, 4, 0), rand(3, 4, 1))


# ---------------------------------------------------------------- off-dropout (SimCSE++)


def test_offdropout_hand_case():
    z12 = t([[1, 0], [0, 1]])  # cos(z1_i, z2_i) = 1
    z0 = t([[1, 0], [1, 1]])  # cos(z0_1, z0_2) = 1/sqrt2
    got_neg = offdropout_info_nce(z12, z12, z0, temperature=1.0, m=0.5, scale="negatives").item()
    assert got_neg == pytest.approx(-1 + math.log(E + 0.5 * math.exp(R2)), abs=1e-6)
    got_pos = offdropout_info_nce(z12, z12, z0, temperature=1.0, m=0.5, scale="positive").item()
    assert got_pos == pytest.approx(-0.5 + math.log(math.exp(0.5) + math.exp(R2)), abs=1e-6)


def test_offdropout_m1_variants_coincide_with_loop():
    z1, z2, z0 = rand(5, 6, 10), rand(5, 6, 11), rand(5, 6, 12)
    neg = offdropout_info_nce(z1, z2, z0, 0.05, m=1.0, scale="negatives").item()
    pos = offdropout_info_nce(z1, z2, z0, 0.05, m=1.0, scale="positive").item()
    expected = ref_offdropout(z1, z2, z0, 0.05, 1.0, "negatives")
    assert neg == pytest.approx(expected, abs=ATOL)
    assert pos == pytest.approx(expected, abs=ATOL)


@pytest.mark.parametrize("scale", ["negatives", "positive"])
def test_offdropout_matches_loop(scale):
    z1, z2, z0 = rand(6, 5, 13), rand(6, 5, 14), rand(6, 5, 15)
    for tau in (0.05, 0.5):
        got = offdropout_info_nce(z1, z2, z0, tau, m=0.9, scale=scale).item()
        assert got == pytest.approx(ref_offdropout(z1, z2, z0, tau, 0.9, scale), abs=ATOL)


def test_offdropout_variants_differ_and_negatives_come_from_z0():
    z1, z2, z0 = rand(4, 5, 16), rand(4, 5, 17), rand(4, 5, 18)
    a = offdropout_info_nce(z1, z2, z0, 0.5, m=0.5, scale="negatives").item()
    b = offdropout_info_nce(z1, z2, z0, 0.5, m=0.5, scale="positive").item()
    assert abs(a - b) > 1e-3
    # Replacing z0 changes the loss; it is not the plain InfoNCE of the two dropout views.
    assert abs(offdropout_info_nce(z1, z2, z1, 0.5, m=0.5).item() - a) > 1e-3


def test_offdropout_rejects_bad_arguments():
    z = rand(3, 4, 0)
    with pytest.raises(ValueError, match="scale"):
        offdropout_info_nce(z, z, z, scale="both")
    with pytest.raises(ValueError, match="m must"):
        offdropout_info_nce(z, z, z, m=0.0)
    with pytest.raises(ValueError, match="same shape"):
        offdropout_info_nce(z, z, rand(4, 4, 1))


# ---------------------------------------------------------------- DCL (SimCSE++)


def test_dcl_hand_case():
    z1 = t([[1, 2], [-1, -2]])  # standardised: every entry +-1/sqrt2 (eps negligible)
    z2 = t([[1, -1], [-1, 1]])
    # S = [[0.5, -0.5], [0.5, -0.5]] / tau; with tau = 1 the mean row loss is log(e^0.5 + e^-0.5).
    expected = math.log(math.exp(0.5) + math.exp(-0.5))
    got = dimension_contrastive_loss(z1, z2, temperature=1.0, eps=1e-12).item()
    assert got == pytest.approx(expected, abs=1e-6)


def test_dcl_identical_views_hand_case():
    z = t([[1, 2], [-1, -2]])
    # Identical views, perfectly correlated dims: every S entry is 0.5 / tau, so the loss is log(d).
    assert dimension_contrastive_loss(z, z, temperature=1.0, eps=1e-12).item() == pytest.approx(
        math.log(2), abs=1e-6
    )
    assert dimension_contrastive_loss(z, z, temperature=5.0, eps=1e-12).item() == pytest.approx(
        math.log(2), abs=1e-6
    )


def test_dcl_identical_views_matches_independent_value():
    # For identical views S is a scaled covariance matrix:
    # S[c, e] = (B-1)/B * cov(c, e) / sqrt((var_c + eps)(var_e + eps)) / tau  (unbiased cov and var).
    z = rand(7, 5, 20)
    n, d, eps, tau = 7, 5, 1e-5, 5.0
    Z = rows(z)
    means = [sum(r[c] for r in Z) / n for c in range(d)]

    def cov(c: int, e: int) -> float:
        return sum((r[c] - means[c]) * (r[e] - means[e]) for r in Z) / (n - 1)

    total = 0.0
    for c in range(d):
        s_row = [
            (n - 1) / n * cov(c, e) / math.sqrt((cov(c, c) + eps) * (cov(e, e) + eps)) / tau for e in range(d)
        ]
        total += -s_row[c] + math.log(sum(math.exp(x) for x in s_row))
    expected = total / d
    assert expected == pytest.approx(ref_dcl(z, z, tau, eps), abs=1e-9)
    assert dimension_contrastive_loss(z, z, temperature=tau, eps=eps).item() == pytest.approx(
        expected, abs=ATOL
    )


@pytest.mark.parametrize("tau", [5.0, 0.5])
def test_dcl_matches_loop(tau):
    z1, z2 = rand(6, 4, 21) * 3 + 1, rand(6, 4, 22)
    got = dimension_contrastive_loss(z1, z2, temperature=tau, eps=1e-5).item()
    assert got == pytest.approx(ref_dcl(z1, z2, tau, 1e-5), abs=ATOL)


def test_dcl_needs_two_rows():
    with pytest.raises(ValueError, match="at least 2"):
        dimension_contrastive_loss(rand(1, 4, 0), rand(1, 4, 1))


# ---------------------------------------------------------------- extended InfoNCE (CoT-BERT)


def test_extended_info_nce_hand_case():
    r = t([[1, 0], [0, 1]])
    rn = t([[1, 1], [-1, 0]])
    # cos(r_i, r+_j) = identity; cos(r_1, r-) = [1/sqrt2, -1]; cos(r_2, r-) = [1/sqrt2, 0]; r+ = r.
    row1_two = [1, 0, R2, -1]
    row2_two = [0, 1, R2, 0]
    row1_three = row1_two + [R2, -1]
    row2_three = row2_two + [R2, 0]

    def ce(logits, label):
        return -logits[label] + math.log(sum(math.exp(x) for x in logits))

    with_third = (ce(row1_three, 0) + ce(row2_three, 1)) / 2
    without_third = (ce(row1_two, 0) + ce(row2_two, 1)) / 2
    assert extended_info_nce(r, r, rn, temperature=1.0).item() == pytest.approx(with_third, abs=1e-6)
    got = extended_info_nce(r, r, rn, temperature=1.0, template_negatives=False).item()
    assert got == pytest.approx(without_third, abs=1e-6)


@pytest.mark.parametrize("template_negatives", [True, False])
def test_extended_info_nce_matches_loop(template_negatives):
    r, rp, rn = rand(5, 6, 30), rand(5, 6, 31), rand(5, 6, 32)
    got = extended_info_nce(r, rp, rn, 0.05, template_negatives=template_negatives).item()
    assert got == pytest.approx(ref_extended(r, rp, rn, 0.05, template_negatives), abs=ATOL)


def test_extended_info_nce_blocks_matter():
    r, rp, rn = rand(5, 6, 33), rand(5, 6, 34), rand(5, 6, 35)
    full = extended_info_nce(r, rp, rn, 0.1).item()
    two = extended_info_nce(r, rp, rn, 0.1, template_negatives=False).item()
    assert full > two + 1e-3  # adding negatives can only raise the cross-entropy
    assert two > info_nce(r, rp, 0.1).item() + 1e-3


# ---------------------------------------------------------------- tensor norm (TNCSE)


def test_tensor_norm_hand_case_with_clamp():
    h_a = t([[1, 0], [1, 0]])
    h_b = t([[1, 1], [-1, 0]])  # cos = 1/sqrt2, then -1 (clamped to the floor)
    p_a = t([[3, 0], [1, 0]])
    p_b = t([[0, 4], [-1, 0]])  # factors 5/7 and 2/2
    expected = ((math.log(2) / 2) * 5 / 7 + math.log(1e4) * 1.0) / 2
    assert tensor_norm_loss(h_a, h_b, p_a, p_b).item() == pytest.approx(expected, rel=1e-5)
    # A different floor changes only the clamped row.
    expected_floor = ((math.log(2) / 2) * 5 / 7 + math.log(1e2)) / 2
    assert tensor_norm_loss(h_a, h_b, p_a, p_b, cos_floor=1e-2).item() == pytest.approx(
        expected_floor, rel=1e-5
    )


def test_tensor_norm_matches_loop_including_negative_cosines():
    h_a, h_b = rand(10, 6, 40), rand(10, 6, 41)
    p_a, p_b = rand(10, 3, 42), rand(10, 3, 43)
    cosines = torch.nn.functional.cosine_similarity(h_a, h_b)
    assert bool((cosines <= 0).any()) and bool((cosines > 0).any())  # both branches exercised
    got = tensor_norm_loss(h_a, h_b, p_a, p_b).item()
    assert got == pytest.approx(ref_tensor_norm(h_a, h_b, p_a, p_b, 1e-4), rel=1e-5)


def test_interaction_tensor_norm_is_the_crossed_sum():
    hs = [rand(4, 5, s) for s in range(50, 54)]  # hI, hI+, hII, hII+
    ps = [rand(4, 3, s) for s in range(54, 58)]  # PI, PI+, PII, PII+
    expected = ref_tensor_norm(hs[0], hs[3], ps[0], ps[3], 1e-4) + ref_tensor_norm(
        hs[2], hs[1], ps[2], ps[1], 1e-4
    )
    got = interaction_tensor_norm_loss(*hs, *ps).item()
    assert got == pytest.approx(expected, rel=1e-5)


def test_tensor_norm_rejects_row_mismatch():
    with pytest.raises(ValueError, match="one row per row"):
        tensor_norm_loss(rand(3, 4, 0), rand(3, 4, 1), rand(2, 4, 2), rand(2, 4, 3))


# ---------------------------------------------------------------- IFCL hippocampus InfoNCE and twins


def test_hippocampus_hand_case():
    h = t([[1, 0], [0, 1]])
    queue = t([[1, 1]])
    weights = t([0.5])
    # Each row: positive logit 1, other in-batch 0, queue cos 1/sqrt2 weighted by 0.5 (tau = 1).
    expected = -1 + math.log(E + 1 + 0.5 * math.exp(R2))
    assert hippocampus_info_nce(h, h, queue, weights, temperature=1.0).item() == pytest.approx(
        expected, abs=1e-6
    )


def test_hippocampus_empty_queue_equals_info_nce():
    h, hp = rand(5, 6, 60), rand(5, 6, 61)
    empty = torch.zeros(0, 6)
    got = hippocampus_info_nce(h, hp, empty, torch.zeros(0), 0.05)
    assert got.item() == pytest.approx(info_nce(h, hp, 0.05).item(), abs=1e-6)
    assert got.item() == pytest.approx(ref_info_nce(h, hp, 0.05), abs=ATOL)


def test_hippocampus_with_queue_matches_loop():
    h, hp, queue = rand(4, 6, 62), rand(4, 6, 63), rand(7, 6, 64)
    weights = torch.tensor([0.99, 0.99, 0.98, 0.98, 0.5, 0.3, 0.1])
    for tau in (0.05, 0.5):
        got = hippocampus_info_nce(h, hp, queue, weights, tau).item()
        assert got == pytest.approx(ref_hippocampus(h, hp, queue, weights, tau), abs=ATOL)
    # The weights matter (p_m = 1 is a different value).
    ones = hippocampus_info_nce(h, hp, queue, torch.ones(7), 0.5).item()
    assert abs(ones - hippocampus_info_nce(h, hp, queue, weights, 0.5).item()) > 1e-3


def test_hippocampus_rejects_bad_queue():
    h = rand(3, 4, 0)
    with pytest.raises(ValueError, match="> 0"):
        hippocampus_info_nce(h, h, rand(2, 4, 1), torch.tensor([0.5, 0.0]))
    with pytest.raises(ValueError, match="one entry per queue row"):
        hippocampus_info_nce(h, h, rand(2, 4, 1), torch.tensor([0.5]))
    with pytest.raises(ValueError, match="width"):
        hippocampus_info_nce(h, h, rand(2, 5, 1), torch.tensor([0.5, 0.5]))


def test_hippocampus_no_gradient_into_queue():
    h = rand(3, 4, 1).requires_grad_()
    queue = rand(2, 4, 2).requires_grad_()
    hippocampus_info_nce(h, rand(3, 4, 3), queue, torch.tensor([0.9, 0.8])).backward()
    assert h.grad is not None and queue.grad is None


def test_twins_hand_case():
    h = t([[1, 0]])
    h_pos = t([[1, 0]])  # cos 1
    h_frat = t([[0, 1]])  # cos 0
    e = t([[1, 0]])
    e_pos = t([[1, 1]])  # cos 1/sqrt2
    e_frat = t([[-1, 0]])  # cos -1
    expected = abs(E - 1 - (math.exp(R2) - math.exp(-1)))
    assert twins_loss(h, h_pos, h_frat, e, e_pos, e_frat).item() == pytest.approx(expected, abs=1e-6)


def test_twins_matches_loop():
    hs = [rand(6, 5, s) for s in (70, 71, 72)]
    es = [rand(6, 3, s) for s in (73, 74, 75)]
    assert twins_loss(*hs, *es).item() == pytest.approx(ref_twins(*hs, *es), abs=ATOL)


def test_twins_gradient_does_not_flow_into_e():
    hs = [rand(4, 5, s).requires_grad_() for s in (76, 77, 78)]
    es = [rand(4, 3, s).requires_grad_() for s in (79, 80, 81)]
    twins_loss(*hs, *es).backward()
    assert all(x.grad is not None and bool(x.grad.abs().sum() > 0) for x in hs)
    assert all(x.grad is None for x in es)


# ---------------------------------------------------------------- distillation


def test_distillation_hand_case_and_teacher_detached():
    student = t([[1, 2], [0, -1]]).requires_grad_()
    teacher = t([[0, 0], [1, 1]]).requires_grad_()
    loss = distillation_mse(student, teacher)
    assert loss.item() == pytest.approx((1 + 4 + 1 + 4) / 4, abs=1e-6)
    loss.backward()
    assert teacher.grad is None
    assert torch.allclose(student.grad, 2 * (student.detach() - teacher.detach()) / 4)


def ref_similarity_distillation(student, teacher) -> float:
    """mean over i != j of (cos(s_i, s_j) - cos(t_i, t_j))^2, with Python loops in float64."""

    def cos(u, v):
        return sum(x * y for x, y in zip(u, v, strict=True)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))

    s, te = rows(student), rows(teacher)
    pairs = [(i, j) for i in range(len(s)) for j in range(len(s)) if i != j]
    return sum((cos(s[i], s[j]) - cos(te[i], te[j])) ** 2 for i, j in pairs) / len(pairs)


def test_similarity_distillation_hand_case_with_a_wider_teacher():
    # student rows at 0, 90 and 45 degrees: cosines 0, R2, R2; teacher (3-d): all cosines 0 but one of 1
    student = t([[1, 0], [0, 2], [3, 3]]).requires_grad_()
    teacher = t([[1, 0, 0], [0, 1, 0], [0, 5, 0]])
    loss = similarity_distillation_mse(student, teacher)
    # off-diagonal pairs (each twice): (0,1): (0 - 0)^2, (0,2): (R2 - 0)^2, (1,2): (R2 - 1)^2
    assert loss.item() == pytest.approx((0 + 0.5 + (R2 - 1) ** 2) * 2 / 6, abs=1e-6)
    assert loss.item() == pytest.approx(ref_similarity_distillation(student, teacher), abs=1e-6)


@pytest.mark.parametrize(("rows_", "d_student", "d_teacher"), [(2, 4, 4), (5, 3, 7), (6, 8, 2)])
def test_similarity_distillation_matches_a_loop_and_teaches_the_student_only(rows_, d_student, d_teacher):
    student = rand(rows_, d_student, 90 + rows_).requires_grad_()
    teacher = rand(rows_, d_teacher, 91 + rows_).requires_grad_()
    loss = similarity_distillation_mse(student, teacher)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ref_similarity_distillation(student, teacher), abs=ATOL)
    loss.backward()
    assert teacher.grad is None
    assert student.grad is not None and bool(student.grad.abs().sum() > 0)
    # the student equal to the teacher (up to scale per row) gives 0
    same = rand(rows_, d_teacher, 5)
    assert similarity_distillation_mse(same * torch.arange(1, rows_ + 1.0)[:, None], same).item() == pytest.approx(
        0, abs=1e-6)


def test_similarity_distillation_needs_pairs_of_one_batch():
    with pytest.raises(ValueError, match="at least 2, got 1"):
        similarity_distillation_mse(rand(1, 4, 0), rand(1, 6, 1))
    with pytest.raises(ValueError, match="as many rows"):
        similarity_distillation_mse(rand(3, 4, 0), rand(4, 4, 1))


def ref_similarity_distillation_kl(student, teacher, tau) -> float:
    """mean over i of sum_{j != i} p_ij log(p_ij / q_ij), p/q the softmax over j != i of cos / tau of the
    teacher/student, with Python loops in float64."""

    def cos(u, v):
        return sum(x * y for x, y in zip(u, v, strict=True)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))

    def softmax_over_others(x, i):
        others = [j for j in range(len(x)) if j != i]
        weights = [math.exp(cos(x[i], x[j]) / tau) for j in others]
        return [w / sum(weights) for w in weights]

    s, te = rows(student), rows(teacher)
    total = 0.0
    for i in range(len(s)):
        p, q = softmax_over_others(te, i), softmax_over_others(s, i)
        total += sum(pj * math.log(pj / qj) for pj, qj in zip(p, q, strict=True))
    return total / len(s)


def test_similarity_distillation_kl_hand_case():
    # student cosines: (0,1) 0, (0,2) R2, (1,2) R2; teacher (3-d): (0,1) 0, (0,2) 0, (1,2) 1; tau 1
    student = t([[1, 0], [0, 1], [1, 1]]).requires_grad_()
    teacher = t([[1, 0, 0], [0, 1, 0], [0, 5, 0]])

    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))

    def two(x, y):  # softmax of two logits
        return [math.exp(x) / (math.exp(x) + math.exp(y)), math.exp(y) / (math.exp(x) + math.exp(y))]

    expected = (kl([0.5, 0.5], two(0, R2))         # row 0 over (1, 2)
                + kl(two(0, 1), two(0, R2))        # row 1 over (0, 2)
                + kl(two(0, 1), [0.5, 0.5])) / 3   # row 2 over (0, 1)
    loss = similarity_distillation_kl(student, teacher, temperature=1.0)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    assert student.grad is not None and bool(student.grad.abs().sum() > 0)


@pytest.mark.parametrize(("rows_", "d_student", "d_teacher", "tau"), [(3, 4, 4, 0.5), (6, 3, 7, 0.05), (9, 8, 2, 0.1)])
def test_similarity_distillation_kl_matches_a_loop(rows_, d_student, d_teacher, tau):
    student = rand(rows_, d_student, 190 + rows_).requires_grad_()
    teacher = rand(rows_, d_teacher, 191 + rows_).requires_grad_()
    loss = similarity_distillation_kl(student, teacher, temperature=tau)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ref_similarity_distillation_kl(student, teacher, tau), abs=1e-4, rel=1e-4)
    loss.backward()
    assert teacher.grad is None
    # zero when the student's cosines are the teacher's (rows rescaled), whatever the widths
    same = rand(rows_, d_teacher, 7)
    scaled = same * torch.arange(1, rows_ + 1.0)[:, None]
    assert similarity_distillation_kl(scaled, same, temperature=tau).item() == pytest.approx(0, abs=1e-5)


def test_similarity_distillation_kl_refuses_bad_input():
    with pytest.raises(ValueError, match="at least 3, got 2"):
        similarity_distillation_kl(rand(2, 4, 0), rand(2, 6, 1), temperature=0.1)
    with pytest.raises(ValueError, match="as many rows"):
        similarity_distillation_kl(rand(3, 4, 0), rand(4, 4, 1), temperature=0.1)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        similarity_distillation_kl(rand(3, 4, 0), rand(3, 4, 1), temperature=0.0)


# ---------------------------------------------------------------- common behaviour of every loss


def _cases(dtype: torch.dtype, requires_grad: bool):
    """Every loss on small random inputs: (name, thunk computing the loss, inputs that need a gradient)."""

    def make(shape, seed, grad=True):
        x = rand(*shape, seed).to(dtype)
        return x.requires_grad_(requires_grad and grad)

    cases = []
    a, b = make((4, 6), 1), make((4, 6), 2)
    cases.append(("info_nce", lambda: info_nce(a, b), [a, b]))
    xa, xb = make((6, 6), 3), make((6, 6), 4)
    cases.append(("cross_encoder_info_nce", lambda: cross_encoder_info_nce(xa, xb), [xa, xb]))
    z1, z2, z0 = make((4, 6), 5), make((4, 6), 6), make((4, 6), 7)
    for scale in ("negatives", "positive"):
        cases.append(
            (f"offdropout_{scale}", lambda s=scale: offdropout_info_nce(z1, z2, z0, scale=s), [z1, z2, z0])
        )
    cases.append(("dcl", lambda: dimension_contrastive_loss(z1, z2), [z1, z2]))
    cases.append(("extended", lambda: extended_info_nce(z1, z2, z0), [z1, z2, z0]))
    pa, pb = make((4, 3), 8), make((4, 3), 9)
    cases.append(("tensor_norm", lambda: tensor_norm_loss(a, b, pa, pb), [a, pa, pb]))
    queue = make((5, 6), 10, grad=False)
    weights = torch.linspace(0.99, 0.9, 5)
    cases.append(("hippocampus", lambda: hippocampus_info_nce(a, b, queue, weights), [a, b]))
    e1, e2, e3 = make((4, 3), 11, False), make((4, 3), 12, False), make((4, 3), 13, False)
    cases.append(("twins", lambda: twins_loss(z1, z2, z0, e1, e2, e3), [z1, z2, z0]))
    cases.append(("distillation", lambda: distillation_mse(a, b), [a]))
    wide = make((4, 9), 14, grad=False)
    cases.append(("similarity_distillation", lambda: similarity_distillation_mse(a, wide), [a]))
    cases.append(("similarity_distillation_kl", lambda: similarity_distillation_kl(a, wide, 0.1), [a]))
    return cases


CASE_NAMES = [
    "info_nce",
    "cross_encoder_info_nce",
    "offdropout_negatives",
    "offdropout_positive",
    "dcl",
    "extended",
    "tensor_norm",
    "hippocampus",
    "twins",
    "distillation",
    "similarity_distillation",
    "similarity_distillation_kl",
]


def test_cases_cover_every_loss():
    assert [name for name, _, _ in _cases(torch.float32, False)] == CASE_NAMES


@pytest.mark.parametrize("case", CASE_NAMES)
def test_backward_gives_finite_nonzero_gradients(case):
    name, thunk, inputs = _cases(torch.float32, True)[CASE_NAMES.index(case)]
    loss = thunk()
    assert loss.dim() == 0 and torch.isfinite(loss), name
    loss.backward()
    for x in inputs:
        assert x.grad is not None and bool(torch.isfinite(x.grad).all()), name
        assert bool(x.grad.abs().sum() > 0), name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_give_float32_outputs(dtype):
    low = _cases(dtype, True)
    ref = _cases(torch.float32, False)
    assert len(low) == len(ref) == len(CASE_NAMES)
    for (name, thunk, inputs), (_, ref_thunk, _) in zip(low, ref, strict=True):
        loss = thunk()
        assert loss.dtype == torch.float32, name
        # Same value as the float32 computation on the (rounded) inputs, up to input rounding.
        assert loss.item() == pytest.approx(ref_thunk().item(), rel=0.05, abs=0.05), name
        loss.backward()
        assert all(x.grad is not None and x.grad.dtype == dtype for x in inputs), name


@pytest.mark.parametrize(
    "call",
    [
        lambda: info_nce(rand(3, 4, 0), rand(4, 4, 1)),
        lambda: info_nce(rand(3, 4, 0), rand(3, 4, 1), temperature=0.0),
        lambda: info_nce(torch.randn(3), torch.randn(3)),
        lambda: extended_info_nce(rand(3, 4, 0), rand(3, 4, 1), rand(3, 5, 2)),
        lambda: twins_loss(*(rand(3, 4, s) for s in range(3)), *(rand(2, 4, s) for s in range(3))),
        lambda: distillation_mse(rand(3, 4, 0), rand(3, 5, 1)),
        lambda: similarity_distillation_mse(rand(3, 4, 0), rand(2, 4, 1)),
        lambda: similarity_distillation_mse(rand(1, 4, 0), rand(1, 4, 1)),
        lambda: similarity_distillation_mse(torch.randn(3), torch.randn(3)),
        lambda: dimension_contrastive_loss(rand(3, 4, 0), rand(3, 4, 1), eps=0.0),
    ],
)
def test_invalid_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_info_nce_leaves_out_the_negatives_a_mask_drops_as_a_per_row_loop_does():
    """``negatives[i, j]`` False drops b_j from a_i's sum (the positive b_i is always kept); a loop over the rows."""
    generator = torch.Generator().manual_seed(5)
    a, b = torch.randn(5, 4, generator=generator), torch.randn(5, 4, generator=generator)
    negatives = torch.rand(5, 5, generator=generator) > 0.4
    negatives[0, 0] = False  # the diagonal is kept whatever the mask says
    tau = 0.1
    a_n = a.double() / a.double().norm(dim=1, keepdim=True)
    b_n = b.double() / b.double().norm(dim=1, keepdim=True)
    losses = []
    for i in range(5):
        kept = [j for j in range(5) if j == i or bool(negatives[i, j])]
        logits = [float(a_n[i] @ b_n[j]) / tau for j in kept]
        losses.append(-(float(a_n[i] @ b_n[i]) / tau - math.log(sum(math.exp(x) for x in logits))))
    assert info_nce(a, b, tau, negatives=negatives).item() == pytest.approx(sum(losses) / 5, rel=1e-5)
    assert info_nce(a, b, tau, negatives=torch.ones(5, 5, dtype=torch.bool)).item() == pytest.approx(
        info_nce(a, b, tau).item(), rel=1e-6)
    with pytest.raises(ValueError, match="boolean matrix of shape"):
        info_nce(a, b, tau, negatives=torch.ones(5, 4, dtype=torch.bool))
