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


def test_the_largest_weight_within_the_tolerance_is_kept_asking_from_the_largest_down():
    from lab.domain_study.interpolate import largest_weight_within

    dev = {1.0: 80.0, 0.75: 81.0, 0.5: 81.8, 0.25: 82.1}
    asked_order = []

    def dev_of(weight):
        asked_order.append(weight)
        return dev[weight]

    # the untouched model at 82.0, tolerance 0.3: 0.5 (81.8 >= 81.7) is the first from the top that passes
    weight, asked = largest_weight_within(dev_of, [0.25, 0.5, 1.0, 0.75], 82.0, 0.3)
    assert weight == 0.5 and asked_order == [1.0, 0.75, 0.5] and asked == {1.0: 80.0, 0.75: 81.0, 0.5: 81.8}
    # none within: the untouched model (weight 0), every weight asked
    assert largest_weight_within(dev.__getitem__, [1.0, 0.75], 83.0, 0.3) == (0.0, {1.0: 80.0, 0.75: 81.0})
