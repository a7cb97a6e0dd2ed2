"""The learning-rate schedule both training scripts use: linear warm-up, linear decay."""

from __future__ import annotations

import torch

__all__ = ["warmup_then_decay"]


def warmup_then_decay(
    optimizer: torch.optim.Optimizer, steps: int, warmup_fraction: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """Rise to the set rate over the first ``warmup_fraction`` of ``steps``, then fall
    linearly to zero at the last step (the usual BERT fine-tuning schedule)."""
    warmup = max(1, int(steps * warmup_fraction))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup))),
    )
