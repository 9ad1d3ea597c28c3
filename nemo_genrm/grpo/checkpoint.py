"""Checkpoints: policy weights, optimizer, step, data position and RNG state; resumable.

A checkpoint is the folder ``<checkpoint_dir>/step_<N>``:

- ``policy/``: the model (``from_pretrained`` loads it) and tokenizer;
- ``optimizer.pt`` and ``policy_rng.pt``: written by the policy worker;
- ``trainer_state.json``: the step, the data sampler's position and the run's history, written
  last, so a folder without it is incomplete and ignored.

It is first written as ``tmp_step_<N>`` and renamed, so a crash never leaves a half checkpoint
that looks complete; ``trainer_state.json`` itself is written atomically (temporary file,
fsync, rename). A checkpoint of the same step that already exists is moved aside
(``old_step_<N>``) before the new one takes its name and deleted after, so a kill at any moment
leaves a complete ``step_<N>`` or the previous ones. Resuming loads the newest complete one
and continues at the next step; a ``trainer_state.json`` that cannot be read marks that folder
incomplete, and the next older checkpoint is used.

With ``keep_best`` the policy of the validation with the highest held-out reward so far is kept
in ``<checkpoint_dir>/best`` (same layout; never pruned, never resumed from).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from nemo_genrm.config import ConfigError
from nemo_genrm.files.atomic import write_json_atomic
from nemo_genrm.grpo.config import CheckpointingConfig
from nemo_genrm.grpo.handles import PolicyHandle

logger = logging.getLogger(__name__)

__all__ = ["BEST_DIR", "Checkpointer", "STATE_FILE"]

STATE_FILE = "trainer_state.json"
BEST_DIR = "best"
_STEP_DIR = re.compile(r"^step_(\d+)$")


class Checkpointer:
    """Saves and finds checkpoints under ``checkpoint_dir``.

    Args:
        cfg: The ``checkpointing`` section.
    """

    def __init__(self, cfg: CheckpointingConfig):
        self.cfg = cfg
        self.root = Path(cfg.checkpoint_dir)

    def steps(self) -> list[int]:
        """Steps with a complete checkpoint (a readable trainer state), oldest first."""
        return self._steps(readable=True)

    def _steps(self, readable: bool) -> list[int]:
        if not self.root.is_dir():
            return []
        found = []
        for child in self.root.iterdir():
            match = _STEP_DIR.match(child.name)
            state = child / STATE_FILE
            if match and (_readable_state(state) if readable else state.is_file()):
                found.append(int(match.group(1)))
        return sorted(found)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or ``None``."""
        steps = self.steps()
        return self.root / f"step_{steps[-1]}" if steps else None

    def require_empty(self) -> None:
        """Refuse a fresh run (``resume: false``) in a folder that holds another run's checkpoints.

        Its saves would mix with the old steps, and pruning by step number could delete the new
        checkpoints while keeping stale higher-numbered ones.

        Raises:
            ConfigError: ``checkpoint_dir`` already holds ``step_*`` checkpoints (readable or
                not: a torn one is still another run's).
        """
        steps = self._steps(readable=False)
        if steps:
            raise ConfigError(
                [
                    f"checkpointing.checkpoint_dir {self.root} already holds checkpoints of steps "
                    f"{steps} and checkpointing.resume is false: set a new checkpointing.checkpoint_dir "
                    "to start over, or checkpointing.resume=true to continue that run"
                ]
            )

    def should_save(self, step: int, last_step: int) -> bool:
        """Whether ``step`` is a save step (every ``save_period`` and the last one)."""
        return self.cfg.enabled and (step % self.cfg.save_period == 0 or step == last_step)

    def save(self, step: int, policy: PolicyHandle | Any, state: dict[str, Any]) -> Path:
        """Write the checkpoint of ``step``.

        Args:
            step: The step just finished.
            policy: The policy: a handle, the worker or its actor (it writes its own files).
            state: JSON-able trainer state (step, sampler position, history).

        Returns:
            The checkpoint folder.
        """
        final = self.root / f"step_{step}"
        tmp = self.root / f"tmp_step_{step}"
        old = self.root / f"old_step_{step}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        PolicyHandle.of(policy).save_checkpoint(str(tmp.resolve()))
        torch.save({"python": random.getstate(), "torch": torch.get_rng_state()}, tmp / "driver_rng.pt")
        write_json_atomic(tmp / STATE_FILE, {"step": step, **state})  # last: marks it complete
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        self._prune()
        logger.info("Saved checkpoint %s", final)
        return final

    @property
    def best_dir(self) -> Path:
        """Where :meth:`save_best` keeps the best validation's checkpoint."""
        return self.root / BEST_DIR

    def save_best(self, step: int, policy: PolicyHandle | Any, state: dict[str, Any]) -> Path:
        """Write the checkpoint of ``step`` as the best one, replacing the previous best.

        The folder has the layout of a step checkpoint (``policy/`` loads with
        ``from_pretrained``), is never pruned and is never resumed from.

        Args:
            step: The validated step.
            policy: The policy, as for :meth:`save`.
            state: JSON-able description (step, held-out reward and exact match).

        Returns:
            The folder, :attr:`best_dir`.
        """
        final, tmp, old = self.best_dir, self.root / f"tmp_{BEST_DIR}", self.root / f"old_{BEST_DIR}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        PolicyHandle.of(policy).save_checkpoint(str(tmp.resolve()))
        write_json_atomic(tmp / STATE_FILE, {"step": step, **state})
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        logger.info("Saved the best validation so far (step %d) in %s", step, final)
        return final

    def load(self, path: Path, policy: PolicyHandle | Any) -> dict[str, Any]:
        """Restore a checkpoint into ``policy`` (as in :meth:`save`) and the driver's RNG; return the trainer state."""
        PolicyHandle.of(policy).load_checkpoint(str(Path(path).resolve()))
        rng = torch.load(path / "driver_rng.pt", weights_only=False)
        random.setstate(rng["python"])
        torch.set_rng_state(rng["torch"])
        state = json.loads((path / STATE_FILE).read_text())
        logger.info("Resumed from %s (step %d)", path, state["step"])
        return state

    def _prune(self) -> None:
        keep = self.cfg.keep_last
        if keep is None:
            return
        for step in self.steps()[:-keep]:
            shutil.rmtree(self.root / f"step_{step}", ignore_errors=True)


def _readable_state(path: Path) -> bool:
    """Whether ``path`` holds a trainer state (a torn or foreign file marks the folder incomplete)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if path.exists():
            logger.warning("%s cannot be read; that checkpoint is skipped", path)
        return False
    return isinstance(state, dict)
