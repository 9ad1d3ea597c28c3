"""The GRPO training loop: rollout, advantages, update, validation, logging, checkpoints.

:class:`GRPOTrainer` takes ready parts (a policy and an environment, each a plain object or a
Ray actor handle, reached through :mod:`nemo_genrm.grpo.handles`), so the same loop runs the
full driver and the tests' rule-based runs.
"""

from __future__ import annotations

import logging
import math
import shutil
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm.contrib.logging import logging_redirect_tqdm

from nemo_genrm.grpo.checkpoint import Checkpointer
from nemo_genrm.grpo.config import GRPOMasterConfig
from nemo_genrm.grpo.data import Prompt, PromptSampler
from nemo_genrm.grpo.handles import EnvHandle, PolicyHandle
from nemo_genrm.grpo.logger import MetricsLogger
from nemo_genrm.grpo.loss import compute_advantages
from nemo_genrm.grpo.plot import plot_metrics
from nemo_genrm.grpo.policy import TrainBatch
from nemo_genrm.grpo.rollout import Rollout, rollout
from nemo_genrm.tasks.digit_addition import exact_match

logger = logging.getLogger(__name__)

__all__ = ["GRPOTrainer", "RunSummary"]

_VAL_SEED_OFFSET = 1_000_003  # validation's draws, apart from training's (grpo.seed + this + chunk start)


@dataclass
class RunSummary:
    """What a run did, for the closing message.

    Attributes:
        first_step: The first step this process ran (after a resume, the one after the checkpoint).
        last_step: The last step run (``first_step - 1`` when none ran).
        train_rewards: Mean training reward of each step run, in order.
        val_rewards: ``{step: mean validation reward}``.
        val_exact_match: ``{step: share of validation responses whose answer is the reference}``,
            measured by :func:`nemo_genrm.tasks.digit_addition.exact_match`, apart from the judge.
        parse_failure_rates: The environment's ``genrm/parse_failure_rate`` of each step run.
        log_dir: Where the metrics went.
        plot: The PNG of reward and exact match per step, if one was drawn.
        checkpoint: The newest checkpoint, if any.
        resumed_from: The checkpoint this run started from, if any.
        elapsed_s: Wall time of the loop.
        best_step: The validation step with the highest mean held-out reward (the judge's;
            the earliest of equals), ``None`` before any validation.
        best_checkpoint: Where that step's policy is kept (``checkpointing.keep_best``), if saved.
    """

    first_step: int
    last_step: int
    train_rewards: list[float] = field(default_factory=list)
    val_rewards: dict[int, float] = field(default_factory=dict)
    val_exact_match: dict[int, float] = field(default_factory=dict)
    parse_failure_rates: list[float] = field(default_factory=list)
    log_dir: str = ""
    plot: str | None = None
    checkpoint: str | None = None
    resumed_from: str | None = None
    elapsed_s: float = 0.0
    best_step: int | None = None
    best_val_reward: float | None = None
    best_exact_match: float | None = None
    best_checkpoint: str | None = None

    @property
    def final_is_best(self) -> bool:
        """Whether the last validation is the best one (or there is none)."""
        return self.best_step is None or not self.val_rewards or self.best_step == max(self.val_rewards)

    def lines(self) -> list[str]:
        """A short human-readable report."""
        if self.last_step < self.first_step:  # resumed at or past grpo.max_num_steps
            out = [f"GRPO trained no step: the run was already at step {self.last_step} ({self.elapsed_s:.1f}s)"]
        else:
            out = [f"GRPO finished steps {self.first_step}..{self.last_step} in {self.elapsed_s:.1f}s"]
        if self.resumed_from:
            out.append(f"  resumed from       {self.resumed_from}")
        if self.train_rewards:
            k = max(1, min(3, len(self.train_rewards) // 2))
            first, last = statistics.fmean(self.train_rewards[:k]), statistics.fmean(self.train_rewards[-k:])
            out.append(f"  train reward       first {k} step(s) {first:.3f} -> last {k} step(s) {last:.3f}")
            out.append(f"  train reward range {min(self.train_rewards):.3f} .. {max(self.train_rewards):.3f}")
        for step, value in sorted(self.val_rewards.items()):
            exact = self.val_exact_match.get(step)
            shown = f"  exact match {exact:.3f}" if exact is not None else ""
            out.append(f"  val reward @ {step:<5d} {value:.3f}{shown}")
        if not self.final_is_best:
            shown = f", exact match {self.best_exact_match:.3f}" if self.best_exact_match is not None else ""
            kept = f": {self.best_checkpoint}" if self.best_checkpoint else " (not saved)"
            out.append(f"  best validation    step {self.best_step} (reward {self.best_val_reward:.3f}{shown}){kept}")
        rates = [r for r in self.parse_failure_rates if not math.isnan(r)]
        if rates:
            out.append(f"  judge parse failures {statistics.fmean(rates):.3f} of judged samples")
        out.append(f"  logs               {self.log_dir} (metrics.jsonl, tensorboard/)")
        if self.plot:
            out.append(f"  plot               {self.plot}")
        if self.checkpoint:
            out.append(f"  checkpoint         {self.checkpoint}")
        return out


def _judge_while_generating(cfg: GRPOMasterConfig) -> bool:
    """Whether a separate judge scores each generation batch while the policy samples the next
    (``grpo.judge_while_generating``; ``auto``: when the judge computes on devices of its own)."""
    genrm = cfg.env.genrm
    if genrm.resources.placement != "separate" or cfg.grpo.judge_while_generating == "off":
        return False
    own_devices = genrm.judge.backend == "http" or genrm.resources.gpus_per_replica > 0
    return cfg.grpo.judge_while_generating == "on" or own_devices


class GRPOTrainer:
    """Runs GRPO steps until ``grpo.max_num_steps`` (or the data's epochs) are done.

    Args:
        cfg: The validated config.
        policy: A :class:`~nemo_genrm.grpo.policy.PolicyWorker` or its actor handle (kept as
            :attr:`policy`; the loop calls it through a :class:`~nemo_genrm.grpo.handles.PolicyHandle`).
        env: The environment (object or actor handle) with NeMo-RL's ``step``; ``last_metrics``
            is used when it has one (kept as :attr:`env`, called through an
            :class:`~nemo_genrm.grpo.handles.EnvHandle`).
        train_prompts: Rendered training prompts.
        val_prompts: Rendered validation prompts (may be empty).
        metrics_logger: Where metrics go.
        checkpointer: Saves and resumes; ``None`` disables both.
    """

    def __init__(
        self,
        cfg: GRPOMasterConfig,
        policy: Any,
        env: Any,
        train_prompts: Sequence[Prompt],
        val_prompts: Sequence[Prompt],
        metrics_logger: MetricsLogger,
        checkpointer: Checkpointer | None = None,
    ):
        self.cfg, self.policy, self.env = cfg, policy, env
        self._policy, self._env = PolicyHandle.of(policy), EnvHandle.of(env)
        self._judge_batch = cfg.policy.generation_batch_size if _judge_while_generating(cfg) else None
        self.val_prompts = list(val_prompts)[: cfg.grpo.max_val_samples]
        self.metrics = metrics_logger
        self.checkpointer = checkpointer
        self._best: dict[str, Any] | None = None  # the best validation so far: step, reward, exact match
        self.sampler = PromptSampler(
            train_prompts, seed=cfg.grpo.seed, shuffle=cfg.data.shuffle, max_epochs=cfg.grpo.max_num_epochs
        )

    # ------------------------------------------------------------------------------ the run
    def fit(self) -> RunSummary:
        """Resume if a checkpoint exists, then train, validate, log and save until done."""
        start = time.perf_counter()
        step, resumed = self._resume()
        summary = RunSummary(first_step=step + 1, last_step=step, log_dir=str(self.metrics.log_dir))
        summary.resumed_from = summary.checkpoint = str(resumed) if resumed else None
        if resumed is None and self.checkpointer is not None and self.checkpointer.best_dir.is_dir():
            # Another run's: this one starts afresh and must never report it as its own.
            logger.info("Removing %s, left by an earlier run", self.checkpointer.best_dir)
            shutil.rmtree(self.checkpointer.best_dir)
        if self._best is not None:
            self._note_best(summary)
        self.metrics.begin(step)
        if step >= self.cfg.grpo.max_num_steps:
            logger.warning(
                "The checkpoint in %s is at step %d, already grpo.max_num_steps (%d): nothing to do. "
                "Raise grpo.max_num_steps to continue it, or drop checkpointing.resume to start a new run",
                self.checkpointer.root if self.checkpointer else "-",
                step,
                self.cfg.grpo.max_num_steps,
            )
        if self.cfg.grpo.val_at_start and step == 0 and self.val_prompts:
            self._log_validation(0, summary)
        try:
            with logging_redirect_tqdm():
                self._train_until_done(step, summary)
        finally:  # a run the watchdog stopped is drawn too
            plot = plot_metrics(self.metrics.log_dir)
            summary.plot = str(plot) if plot else None
        summary.elapsed_s = time.perf_counter() - start
        return summary

    def _train_until_done(self, step: int, summary: RunSummary) -> None:
        last = self.cfg.grpo.max_num_steps
        bar = self._progress(step, last)
        while step < last:
            prompts = self.sampler.next_batch(self.cfg.grpo.num_prompts_per_step)
            if prompts is None:
                logger.info("Reached grpo.max_num_epochs (%d); stopping", self.cfg.grpo.max_num_epochs)
                break
            step += 1
            metrics = self.train_step(prompts)
            if self._due(step, self.cfg.grpo.val_period) and self.val_prompts:
                metrics.update(self.validate(step))
                self._record_validation(step, metrics, summary)
            self.metrics.log(metrics, step)
            summary.train_rewards.append(metrics["train/reward_mean"])
            if "genrm/parse_failure_rate" in metrics:
                summary.parse_failure_rates.append(metrics["genrm/parse_failure_rate"])
            summary.last_step = step
            stop = self._env.watchdog_stop()
            if self.checkpointer is not None and (self.checkpointer.should_save(step, last) or stop is not None):
                summary.checkpoint = str(self.checkpointer.save(step, self._policy, self._state(summary)))
            if stop is not None:  # reward.watchdog.action: stop, after this step's checkpoint
                logger.error(
                    "Stopping at step %d: the reward watchdog fired (checkpoint: %s)", step, summary.checkpoint
                )
                raise stop
            if bar is not None:
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['train/reward_mean']:.3f}")
        if bar is not None:
            bar.close()

    def _resume(self) -> tuple[int, Any]:
        if self.checkpointer is None:
            return 0, None
        if not self.checkpointer.cfg.resume:
            self.checkpointer.require_empty()
            return 0, None
        latest = self.checkpointer.latest()
        if latest is None:
            return 0, None
        state = self.checkpointer.load(latest, self._policy)
        self.sampler.load_state_dict(state["sampler"])
        self._best = state.get("best")
        return int(state["step"]), latest

    def _state(self, summary: RunSummary) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict(), "train_rewards": summary.train_rewards, "best": self._best}

    def _progress(self, step: int, last: int) -> Any:
        if not self.cfg.logger.progress_bar:
            return None
        from tqdm.auto import tqdm

        # On a terminal only: elsewhere the per-step log line is the progress (no redrawn bar in files).
        return tqdm(total=last, initial=step, desc="GRPO", unit="step", dynamic_ncols=True, disable=None)

    @staticmethod
    def _due(step: int, period: int) -> bool:
        return period > 0 and step % period == 0

    # ------------------------------------------------------------------------------ one step
    def train_step(self, prompts: Sequence[Prompt]) -> dict[str, float]:
        """Rollout, advantages and one policy update; returns the step's metrics."""
        step_start = time.perf_counter()
        grpo = self.cfg.grpo
        ro = rollout(self._policy, self._env, prompts, grpo.num_generations_per_prompt, batch_size=self._judge_batch)
        advantages = compute_advantages(
            ro.rewards,
            grpo.num_generations_per_prompt,
            leave_one_out=grpo.use_leave_one_out_baseline,
            normalize=grpo.normalize_rewards,
            valid=ro.valid,
        )  # [N]
        batch = TrainBatch(
            prompt_ids=[s.prompt_ids for s in ro.samples],
            response_ids=[s.response_ids for s in ro.samples],
            advantages=advantages.tolist(),
        )
        train_start = time.perf_counter()
        train_metrics = self._policy.train(batch)
        train_s = time.perf_counter() - train_start
        metrics = {**_rollout_metrics(ro, grpo.num_generations_per_prompt, "train")}
        metrics["train/advantage_abs_mean"] = advantages.abs().mean().item()
        metrics.update({f"train/{k}": v for k, v in train_metrics.items() if k != "train_time_s"})
        metrics.update(self._env.metrics_since_last())  # every step call of the rollout
        metrics.update(
            {
                "timeline/generation_s": ro.generation_s,
                "timeline/judge_s": ro.env_s,
                "timeline/train_s": train_s,
                "timeline/step_s": time.perf_counter() - step_start,
            }
        )
        return metrics

    # ---------------------------------------------------------------------------- validation
    def validate(self, step: int) -> dict[str, float]:
        """Mean reward and exact match of sampled responses to the held-out prompts.

        ``grpo.num_val_generations_per_prompt`` responses are sampled per prompt. Exact match
        (:func:`~nemo_genrm.tasks.digit_addition.exact_match`) is checked here, apart from the judge, so the
        two can be compared.
        """
        start = time.perf_counter()
        rewards: list[torch.Tensor] = []
        valid: list[torch.Tensor] = []
        matches: list[bool] = []
        shown = 0
        for i in range(0, len(self.val_prompts), self.cfg.grpo.val_batch_size):
            chunk = self.val_prompts[i : i + self.cfg.grpo.val_batch_size]
            # The same draws at every validation (common random numbers): two validations differ
            # by the policy alone, and validating leaves training's random stream as it was.
            seed = self.cfg.grpo.seed + _VAL_SEED_OFFSET + i
            ro = rollout(self._policy, self._env, chunk, self.cfg.grpo.num_val_generations_per_prompt, seed)
            rewards.append(ro.rewards)
            valid.append(ro.valid)
            matches += [exact_match(s.text, p.ground_truth) for p, s in zip(ro.prompts, ro.samples, strict=True)]
            shown = self._print_samples(ro, step, shown)
        all_rewards, all_valid = torch.cat(rewards), torch.cat(valid)  # [V], [V]
        self._env.metrics_since_last()  # validation's judge calls are not the next training step's
        return {
            "val/reward_mean": _counted_mean(all_rewards, all_valid),
            "val/exact_match": statistics.fmean(matches),
            "val/num_samples": float(all_rewards.numel()),
            "val/masked_samples": float((~all_valid).sum().item()),
            "timeline/val_s": time.perf_counter() - start,
        }

    def _log_validation(self, step: int, summary: RunSummary) -> None:
        metrics = self.validate(step)
        self.metrics.log(metrics, step)
        self._record_validation(step, metrics, summary)

    def _record_validation(self, step: int, metrics: dict[str, float], summary: RunSummary) -> None:
        """Note a validation; keep the policy when its held-out reward (the judge's) is the best yet.

        The choice reads the reward only, as a run without a checker would: the exact match is
        reported beside it, never used to pick.
        """
        reward = metrics["val/reward_mean"]
        summary.val_rewards[step] = reward
        summary.val_exact_match[step] = metrics["val/exact_match"]
        if math.isnan(reward) or (self._best is not None and reward <= self._best["val_reward"]):
            return
        self._best = {"step": step, "val_reward": reward, "val_exact_match": metrics["val/exact_match"]}
        self._note_best(summary)
        ckpt = self.checkpointer
        if ckpt is not None and ckpt.cfg.enabled and ckpt.cfg.keep_best:
            summary.best_checkpoint = str(ckpt.save_best(step, self._policy, dict(self._best)))

    def _note_best(self, summary: RunSummary) -> None:
        summary.best_step = self._best["step"]
        summary.best_val_reward, summary.best_exact_match = self._best["val_reward"], self._best["val_exact_match"]
        ckpt = self.checkpointer
        if ckpt is not None and ckpt.best_dir.is_dir():  # kept by a run this one resumed
            summary.best_checkpoint = str(ckpt.best_dir)

    def _print_samples(self, ro: Rollout, step: int, shown: int) -> int:
        for prompt, sample, reward in zip(ro.prompts, ro.samples, ro.rewards.tolist(), strict=True):
            if shown >= self.cfg.logger.num_val_samples_to_print:
                break
            logger.info(
                "val sample (step %d) Q: %s | ref: %s | response: %r | reward %.3f",
                step,
                prompt.question,
                prompt.ground_truth,
                sample.text,
                reward,
            )
            shown += 1
        return shown


def _counted_mean(rewards: torch.Tensor, valid: torch.Tensor) -> float:
    """Mean reward over the samples that count (not masked by the environment); ``nan`` if none.

    The same rule as the environment's ``genrm/mean_reward``: masked parse failures carry a
    placeholder reward of 0 that is not a judgement, so they stay out of the mean.
    """
    counted = rewards[valid]  # [n_valid]
    return counted.mean().item() if counted.numel() else math.nan


def _rollout_metrics(ro: Rollout, num_generations: int, prefix: str) -> dict[str, float]:
    rewards = ro.rewards  # [N]
    counted = rewards[ro.valid]  # [n_valid]
    groups = rewards.view(-1, num_generations)  # [P, G]
    lengths = [len(s.response_ids) for s in ro.samples]
    return {
        f"{prefix}/reward_mean": _counted_mean(rewards, ro.valid),
        f"{prefix}/reward_std": counted.std().item() if counted.numel() > 1 else 0.0,
        f"{prefix}/zero_variance_groups": (groups.max(dim=1).values == groups.min(dim=1).values).float().mean().item(),
        f"{prefix}/masked_samples": float((~ro.valid).sum().item()),
        f"{prefix}/response_length_mean": float(statistics.fmean(lengths)) if lengths else math.nan,
        f"{prefix}/truncated_fraction": sum(s.truncated for s in ro.samples) / max(len(ro.samples), 1),
    }
