"""The configurations the benchmark's NLI ceiling tries, and that each really runs."""

from __future__ import annotations

import numpy as np

from streamproc.evaluate.nli_ceiling import ceiling_configs, ceiling_run
from streamproc.inference.options import InferenceSettings

PAIRS = [
    ("The supplier delivered 90 of 100 pieces.", "The supplier delivered 90 pieces."),
    ("The meeting moved to Thursday at 3 pm.", "The meeting is on Friday."),
    ("Shipping is free for orders over 50 euros.", "Shipping is free above 50 euros."),
] * 4


def test_the_configurations_cover_the_default_and_say_which_are_batch_invariant() -> None:
    two = ceiling_configs(2)
    assert [(c.batch_size, c.parallel_calls, c.batch_invariant) for c in two] == [
        (1, 1, True),
        (1, 2, True),
        (8, 1, False),
    ]
    defaults = InferenceSettings()
    assert any(
        (c.batch_size, c.parallel_calls) == (defaults.nli_batch_size, defaults.nli_parallel_calls)
        for c in two
    ), "the judge's own configuration is among those measured"
    assert [c.parallel_calls for c in ceiling_configs(1)] == [1, 1]


def test_each_configuration_scores_the_pairs_as_it_says() -> None:
    base = InferenceSettings()
    runs = {}
    for config in ceiling_configs(2):
        assert config.settings(base).nli_parallel_calls == config.parallel_calls
        rate, logits = ceiling_run(base, config, PAIRS)
        assert rate > 0
        runs[config.batch_size] = logits
    # The batched row really batches (the loader would otherwise clamp a model that is
    # not batch-invariant to one pair per call, and the row would measure nothing new):
    # its logits move away from one pair per call.
    assert np.abs(runs[8] - runs[1]).max() > 1e-3
