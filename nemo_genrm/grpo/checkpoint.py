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

The driver gives each run a folder of its own (:func:`plan_run`): ``exp_<NNN>`` under both
``checkpointing.checkpoint_dir`` and ``logger.log_dir``, numbered as NeMo-RL numbers its log
folders, so a rerun of the same command trains afresh beside the earlier runs instead of finding
their last checkpoint. A run continues an earlier one only when ``checkpointing.resume`` asks
(``true``: the newest run with a checkpoint; a path: that run folder), as torchtune's
``resume_from_checkpoint`` does. :class:`Checkpointer` itself works in the one folder it is given.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nemo_genrm.config import ConfigError
from nemo_genrm.files.atomic import write_json_atomic
from nemo_genrm.grpo.config import CheckpointingConfig
from nemo_genrm.grpo.handles import PolicyHandle

if TYPE_CHECKING:
    from nemo_genrm.grpo.config import GRPOMasterConfig

logger = logging.getLogger(__name__)

__all__ = ["BEST_DIR", "RUN_PREFIX", "STATE_FILE", "Checkpointer", "RunFolders", "plan_run"]

STATE_FILE = "trainer_state.json"
BEST_DIR = "best"
RUN_PREFIX = "exp_"
"""Run folders are ``exp_001``, ``exp_002``, ... (NeMo-RL's names for its log folders)."""
_STEP_DIR = re.compile(r"^step_(\d+)$")
_RUN_DIR = re.compile(rf"^{RUN_PREFIX}(\d+)$")


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
        logger.debug("Resumed from %s (step %d)", path, state["step"])  # the run's line said it
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


# ---------------------------------------------------------------------------- run folders
@dataclass(frozen=True)
class RunFolders:
    """Where one run writes, and what it continues.

    Attributes:
        name: The run's folder name (``exp_003``), the same under both roots.
        log_dir: The run's log folder.
        checkpoint_dir: The run's checkpoint folder (``None`` with checkpointing off).
        resume_from: The checkpoint the run continues from, or ``None`` for a new run.
        resumed_step: That checkpoint's step (0 for a new run).
        note: Why a run asked to resume starts new, if it does.
    """

    name: str
    log_dir: Path
    checkpoint_dir: Path | None
    resume_from: Path | None = None
    resumed_step: int = 0
    note: str = ""

    def describe(self, max_num_steps: int) -> str:
        """The one line that says what the run does: which run, new or resumed, and where it writes."""
        where = f"logs in {self.log_dir}"
        if self.checkpoint_dir is not None:
            where = f"checkpoints in {self.checkpoint_dir}, {where}"
        if self.resume_from is None:
            why = f" ({self.note})" if self.note else " (checkpointing.resume=true would continue the newest run)"
            return f"Run {self.name}: a new run{why}; {where}"
        if self.resumed_step >= max_num_steps:
            todo = f"nothing left to train: raise grpo.max_num_steps above {self.resumed_step} to continue it"
        else:
            todo = f"training steps {self.resumed_step + 1}..{max_num_steps}"
        return f"Run {self.name}: resuming {self.resume_from} (step {self.resumed_step}), {todo}; {where}"

    def apply(self, cfg: GRPOMasterConfig) -> GRPOMasterConfig:
        """``cfg`` with the run's own folders, and ``resume`` true exactly when it continues a run."""
        ckpt = cfg.checkpointing.model_copy(
            update={
                "checkpoint_dir": str(self.checkpoint_dir or cfg.checkpointing.checkpoint_dir),
                "resume": self.resume_from is not None,
            }
        )
        log = cfg.logger.model_copy(update={"log_dir": str(self.log_dir)})
        return cfg.model_copy(update={"checkpointing": ckpt, "logger": log})


def plan_run(cfg: GRPOMasterConfig) -> RunFolders:
    """Choose the run's folders from ``checkpointing`` and ``logger`` (creating a new run's).

    ``checkpointing.resume``: ``false`` starts ``exp_<N+1>``, one past the highest number under
    either root; ``true`` continues the newest run under ``checkpoint_dir`` that has a complete
    checkpoint (a new run, saying so, when none has); a path continues that run folder.

    Raises:
        ConfigError: ``resume`` names a folder that holds no complete checkpoint.
    """
    ckpt_cfg = cfg.checkpointing
    log_root, ckpt_root = Path(cfg.logger.log_dir), Path(ckpt_cfg.checkpoint_dir)
    resume = ckpt_cfg.resume if ckpt_cfg.enabled else False
    note = ""
    if isinstance(resume, str):
        return _resumed(Path(resume), log_root, "checkpointing.resume")
    if resume:
        for number in sorted(_run_numbers(ckpt_root), reverse=True):
            folder = ckpt_root / f"{RUN_PREFIX}{number:03d}"
            if Checkpointer(ckpt_cfg.model_copy(update={"checkpoint_dir": str(folder)})).latest() is not None:
                return _resumed(folder, log_root, "checkpointing.resume=true")
        note = f"checkpointing.resume=true found no checkpoint in a run folder under {ckpt_root}"
    roots = [log_root, ckpt_root] if ckpt_cfg.enabled else [log_root]
    name = _claim_new_run(roots)
    return RunFolders(name, log_root / name, ckpt_root / name if ckpt_cfg.enabled else None, note=note)


def _resumed(folder: Path, log_root: Path, asked_by: str) -> RunFolders:
    found = Checkpointer(CheckpointingConfig(checkpoint_dir=str(folder))).latest()
    if found is None:
        raise ConfigError(
            [
                f"{asked_by}: {folder} holds no complete checkpoint (a step_<N> folder with its "
                f"{STATE_FILE}): give a run folder such as <checkpoint_dir>/exp_001, or "
                "checkpointing.resume=false to start a new run"
            ]
        )
    step = int(json.loads((found / STATE_FILE).read_text(encoding="utf-8"))["step"])
    return RunFolders(folder.name, log_root / folder.name, folder, resume_from=found, resumed_step=step)


def _run_numbers(root: Path) -> set[int]:
    if not root.is_dir():
        return set()
    return {int(m.group(1)) for child in root.iterdir() if (m := _RUN_DIR.match(child.name)) and child.is_dir()}


def _claim_new_run(roots: list[Path]) -> str:
    """Create ``exp_<N>`` under every root, N one past the highest found; retry if another run took it."""
    number = max((n for root in roots for n in _run_numbers(root)), default=0) + 1
    while True:
        name, created = f"{RUN_PREFIX}{number:03d}", []
        try:
            for root in roots:
                root.mkdir(parents=True, exist_ok=True)
                (root / name).mkdir()
                created.append(root / name)
        except FileExistsError:  # a run started at the same moment took this number
            for folder in created:
                folder.rmdir()
            number = max((n for root in roots for n in _run_numbers(root)), default=number) + 1
            continue
        return name
