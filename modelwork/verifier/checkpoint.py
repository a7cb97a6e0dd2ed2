"""Resumable training: a run on 2 cores stops at its time budget (or with a killed
session) and the next one goes on from the last checkpoint, not from the start.

A checkpoint holds the model, the optimiser and schedule, the step reached, the running
loss, the seconds trained so far and torch's random state (dropout), written atomically
every ``every`` steps. The batch order is fixed by the seed before the first step, so a
resumed run trains on exactly the batches the uninterrupted one would have. A checkpoint
names its run (:func:`run_fingerprint`: the arguments that shape it and the pair count);
another run's is refused rather than continued.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["Checkpoints", "Resumed", "run_fingerprint"]

_SHAPING = (
    "seed", "steps", "epochs", "batch_size", "max_length", "lr", "warmup", "head_lr_scale",
    "summaries", "dialogues", "per_doc", "composed", "layers", "dev_fraction", "teacher",
    "distill_weight", "temperature", "freeze_word_embeddings",
)  # fmt: skip


def run_fingerprint(args: dict[str, Any], train_pairs: int) -> str:
    """What makes two runs the same run: the shaping arguments and the training pairs."""
    shaping = {key: args.get(key) for key in _SHAPING}
    text = json.dumps({**shaping, "train_pairs": train_pairs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Resumed:
    """Where a resumed run goes on from."""

    step: int
    running_loss: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """The checkpoints of one run, in ``folder``."""

    folder: Path
    fingerprint: str
    every: int

    @property
    def _path(self) -> Path:
        return self.folder / f"run-{self.fingerprint}.pt"

    def due(self, step: int) -> bool:
        """Whether a checkpoint is written after ``step`` steps."""
        return self.every > 0 and step % self.every == 0

    def save(
        self,
        step: int,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
        running_loss: float,
        seconds: float,
    ) -> None:
        """The state after ``step`` steps, replacing the previous one only once written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        state = {
            "fingerprint": self.fingerprint,
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "running_loss": running_loss,
            "seconds": seconds,
            "torch_rng": torch.get_rng_state(),
        }
        partial = self._path.with_suffix(".partial")
        torch.save(state, partial)
        os.replace(partial, self._path)

    def restore(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
    ) -> Resumed:
        """The run's last state loaded into the given objects; step 0 when it has none.
        A checkpoint of another run in the folder is left alone."""
        if not self._path.is_file():
            return Resumed(0, 0.0, 0.0)
        state = torch.load(self._path, weights_only=False)
        if state.get("fingerprint") != self.fingerprint:
            raise ValueError(f"{self._path} belongs to another run: start it afresh")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["torch_rng"])
        return Resumed(int(state["step"]), float(state["running_loss"]), float(state["seconds"]))
