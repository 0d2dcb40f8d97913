"""The shared optimizer: what it trains, and that its fast CPU kernel makes AdamW's updates."""

import pytest
import torch
from torch import nn

from theseus_pl.lightning.optim import LinearDecay, adamw_with_linear_schedule

pytestmark = pytest.mark.quick


def _layer(seed: int) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(8, 4)


def test_cpu_steps_use_the_fused_kernel_and_match_adamw_step_by_step():
    fast, reference = _layer(0), _layer(0)
    optimizer, _ = adamw_with_linear_schedule(fast.parameters(), 1e-2, 0.1, 0.0, total_steps=10)
    assert optimizer.defaults["fused"]
    expected = torch.optim.AdamW(
        [
            {"params": [reference.weight], "weight_decay": 0.1},
            {"params": [reference.bias], "weight_decay": 0.0},
        ],
        lr=1e-2,
        foreach=False,
    )
    for step in range(3):
        torch.manual_seed(100 + step)
        batch = torch.randn(5, 8)
        for layer, opt in ((fast, optimizer), (reference, expected)):
            opt.zero_grad()
            layer(batch).pow(2).sum().backward()
            opt.step()
        torch.testing.assert_close(fast.weight, reference.weight)
        torch.testing.assert_close(fast.bias, reference.bias)


def test_parameters_without_grad_are_left_out():
    layer = _layer(0)
    layer.bias.requires_grad_(False)
    optimizer, _ = adamw_with_linear_schedule(layer.parameters(), 1e-3, 0.01, 0.0, total_steps=10)
    assert [p for group in optimizer.param_groups for p in group["params"]] == [layer.weight]


def test_the_linear_decay_is_transformers_schedule_and_restarts_decay_again_to_zero():
    from transformers import get_linear_schedule_with_warmup

    reference = get_linear_schedule_with_warmup(torch.optim.SGD(_layer(0).parameters(), lr=1.0), 3, 10).lr_lambdas[0]
    assert [LinearDecay(3, 10)(step) for step in range(12)] == pytest.approx([reference(s) for s in range(12)])
    assert [LinearDecay(0, 8, [4])(step) for step in range(9)] == pytest.approx(
        [1.0, 0.75, 0.5, 0.25, 1.0, 0.75, 0.5, 0.25, 0.0]
    )
    with pytest.raises(ValueError, match="after the warm-up and before step 8"):
        LinearDecay(2, 8, [2])
