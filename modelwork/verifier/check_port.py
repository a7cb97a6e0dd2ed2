"""Check that the transformers verifier computes what the hand-written one did.

Until 2026-12-01 the verifier was a hand-written BERT in plain torch
(``scripts/verifier/bert.py`` at commit 846ad50); ``classifier.py`` now builds it from
``transformers.BertModel``. This loads both on the same base weights, gives them the same
head, and compares their logits on real training-style pairs (claim/evidence pairs of
different lengths, batched with padding), in eval mode and for one training step's
gradients. The old module is read from git, so the check stays runnable after its removal.

    .venv-train/bin/python modelwork/verifier/check_port.py
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from modelwork.verifier.classifier import load_base  # noqa: E402
from modelwork.verifier.pairs import Pair  # noqa: E402
from modelwork.verifier.train_verifier import Encoder, _base_dir, _pad  # noqa: E402

OLD = ("846ad50", "scripts/verifier/bert.py")
PAIRS = [
    ("The supplier invoiced 100 pieces but only 90 were delivered.", "90 pieces arrived."),
    ("Payment is on hold until the goods receipt is posted.", "The invoice was paid."),
    ("The meeting moved to Thursday at 3 pm in room 4.", "The meeting is on Monday."),
    ("Photosynthesis converts light into chemical energy.", "Plants turn light into energy."),
    ("Yes.", "The answer is yes."),
]


def _pairs() -> list[Pair]:
    return [Pair(premise, claim, 1, "check", "check") for premise, claim in PAIRS]


def _old_module() -> Any:
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{OLD[0]}:{OLD[1]}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_bert.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_bert", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_bert"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def main() -> int:
    torch.manual_seed(0)
    base = _base_dir()
    new = load_base(base)
    old = _old_module().load_base(base)
    old.classifier.load_state_dict(new.classifier.state_dict())
    ids, mask, types = (
        torch.from_numpy(a) for a in _pad(Encoder(base / "tokenizer.json", 128).encode(_pairs()))
    )
    new.eval()
    old.eval()
    with torch.no_grad():
        logits_new, logits_old = new(ids, mask, types), old(ids, mask, types)
    forward = (logits_new - logits_old).abs().max().item()
    print(f"eval logits, {len(PAIRS)} padded pairs: max |difference| {forward:.2e}")
    labels = torch.tensor([1, 0, 0, 1, 1])
    for model in (new, old):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(ids, mask, types), labels).backward()  # type: ignore[no-untyped-call]
    grads = [
        (new.classifier.weight.grad, old.classifier.weight.grad),
        (
            new.encoder.encoder.layer[0].attention.self.query.weight.grad,
            old.layers[0].query.weight.grad,
        ),
    ]
    worst = max((a - b).abs().max().item() / b.abs().max().item() for a, b in grads)
    print(f"gradients (head, first query matrix): max relative |difference| {worst:.2e}")
    return 0 if forward < 1e-4 and worst < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
