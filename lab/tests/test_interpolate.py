"""The weight interpolation of lab/domain_study/interpolate.py, against hand-computed tensors."""

from __future__ import annotations

import pytest
import torch

from lab.domain_study.interpolate import interpolated_state


def test_floating_weights_are_interpolated_and_index_buffers_kept():
    untouched = {"w": torch.tensor([0.0, 2.0, -4.0]), "ids": torch.tensor([0, 1, 2])}
    adapted = {"w": torch.tensor([1.0, 6.0, 4.0]), "ids": torch.tensor([0, 1, 3])}
    mixed = interpolated_state(untouched, adapted, 0.25)
    # 0.75 * untouched + 0.25 * adapted: 0.25, 3.0, -2.0
    torch.testing.assert_close(mixed["w"], torch.tensor([0.25, 3.0, -2.0]))
    assert torch.equal(mixed["ids"], adapted["ids"])
    torch.testing.assert_close(interpolated_state(untouched, adapted, 0.0)["w"], untouched["w"])
    torch.testing.assert_close(interpolated_state(untouched, adapted, 1.0)["w"], adapted["w"])
    assert torch.equal(untouched["w"], torch.tensor([0.0, 2.0, -4.0]))  # the inputs are left as they were


@pytest.mark.parametrize("adapted", [{"v": torch.zeros(3)}, {"w": torch.zeros(4)}])
def test_models_of_other_weights_are_refused(adapted):
    with pytest.raises(ValueError):
        interpolated_state({"w": torch.zeros(3)}, adapted, 0.5)
