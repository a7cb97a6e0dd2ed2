"""The isolated ONNX Runtime ceiling of the judge's NLI model, for ``python -m bench judge``.

The judge's NLI stage is measured against the same model scoring the same pairs with
nothing else running, in each way the model can be run on the configured threads: one
pair per call on all intra-op threads; one pair per call, calls side by side on one thread
each (the default); length-sorted batches of 8 on all threads (the model's best on these
machines, but a pair's score then moves with its neighbours, so the judge may not use it).
The fastest is the ceiling; the benchmark prints the judge's NLI stage as a share of it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamproc.inference.loader import load_nli
from streamproc.inference.options import InferenceSettings

__all__ = ["CeilingConfig", "ceiling_configs", "ceiling_run"]


@dataclass(frozen=True, slots=True)
class CeilingConfig:
    """One way to run the model: pairs per call, calls at once, threads in all."""

    label: str
    batch_size: int
    parallel_calls: int
    batch_invariant: bool

    def settings(self, base: InferenceSettings) -> InferenceSettings:
        return base.model_copy(
            update={"nli_batch_size": self.batch_size, "nli_parallel_calls": self.parallel_calls}
        )


def ceiling_configs(threads: int) -> list[CeilingConfig]:
    """The configurations worth trying on ``threads`` intra-op threads."""
    configs = [CeilingConfig(f"1 pair/call, 1 call x {threads} threads", 1, 1, True)]
    if threads > 1:
        configs.append(CeilingConfig(f"1 pair/call, {threads} calls x 1 thread", 1, threads, True))
    configs.append(CeilingConfig(f"batches of 8, 1 call x {threads} threads", 8, 1, False))
    return configs


def ceiling_run(
    base: InferenceSettings, config: CeilingConfig, pairs: Sequence[tuple[str, str]]
) -> tuple[float, NDArray[np.float32]]:
    """Score ``pairs`` once (after an untimed warm-up call) with ``config``: pairs/s, and
    the logits, so that a configuration's drift from one pair per call can be shown."""
    scorer = load_nli(config.settings(base), replayable=config.batch_invariant)
    scorer.score(list(pairs[:8]))
    started = time.perf_counter()
    logits = scorer.score_detailed(list(pairs)).logits
    return len(pairs) / (time.perf_counter() - started), logits
