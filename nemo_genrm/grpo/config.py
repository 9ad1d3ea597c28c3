"""Config sections of the built-in GRPO driver, named as in NeMo-RL's ``grpo_math_1B.yaml``.

The top level of a ``grpo_*.yaml`` file is :class:`GRPOMasterConfig`: ``grpo``, ``loss_fn``,
``policy``, ``data``, ``env`` (holding ``env.genrm``, validated by
:class:`nemo_genrm.config.GenRMConfig`), ``cluster``, ``logger`` and ``checkpointing``. Keys keep
NeMo-RL's names where the meaning is the same, so a NeMo-RL user reads the file without a map.

Model paths of the form ``tiny://<name>`` (e.g. ``tiny://policy``, ``tiny://judge``) name tiny
random-weight models that :mod:`nemo_genrm.testing` builds offline on first use and caches; the
driver resolves them to real folders before anything loads (see :mod:`nemo_genrm.grpo.models`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from nemo_genrm.config import GenRMConfig, StrictModel
from nemo_genrm.config.loading import load_config, report_problems, to_container, validate
from nemo_genrm.samples.groups import group_size_problems

__all__ = [
    "AdamWKwargs",
    "CheckpointingConfig",
    "ClusterConfig",
    "DataConfig",
    "EnvConfig",
    "GRPOConfig",
    "GRPOMasterConfig",
    "GenerationConfig",
    "LoggerConfig",
    "LossFnConfig",
    "OptimizerConfig",
    "PolicyConfig",
    "TensorboardConfig",
    "TokenizerConfig",
    "WandbConfig",
    "load_grpo_config",
]


class GRPOConfig(StrictModel):
    """The ``grpo`` section: how many samples a step takes and how rewards become advantages."""

    num_prompts_per_step: int = Field(4, ge=1, description="Prompts drawn per step.")
    num_generations_per_prompt: int = Field(
        4, ge=1, description="Responses sampled per prompt (the group of the baseline)."
    )
    max_num_steps: int = Field(10, ge=1, description="Training steps in total (a resumed run counts on).")
    max_num_epochs: int = Field(
        100, ge=1, description="Passes over the training split at most (ends the run early if reached)."
    )
    normalize_rewards: bool = Field(
        True, description="Divide each advantage by its group's reward std (where the std is > 0)."
    )
    use_leave_one_out_baseline: bool = Field(
        True, description="Baseline of a sample is the mean reward of the other samples of its prompt."
    )
    val_period: int = Field(0, ge=0, description="Validate every this many steps; 0 disables.")
    val_at_start: bool = Field(False, description="Also validate before the first step.")
    val_batch_size: int = Field(8, ge=1, description="Validation prompts per generation call.")
    num_val_generations_per_prompt: int = Field(
        1, ge=1, description="Responses sampled per validation prompt (more: steadier validation metrics)."
    )
    max_val_samples: int = Field(32, ge=1, description="Validation prompts used at most.")
    seed: int = Field(42, description="Seeds data order, sampling and model init.")
    judge_while_generating: Literal["auto", "on", "off"] = Field(
        "auto",
        description=(
            "on: with a separate judge (env.genrm.resources.placement: separate), each generation batch "
            "(policy.generation_batch_size samples, whole prompts) goes to the environment as soon as it "
            "is sampled, so the judge scores it while the policy samples the next; auto: on when the "
            "judge also has devices of its own (gpus_per_replica > 0, or backend http), off when it "
            "shares the policy's CPU cores (overlapping there slowed the demo's steps, docs/performance.md); "
            "off: one environment step after generation. A colocated judge is always called once per step."
        ),
    )


class LossFnConfig(StrictModel):
    """The ``loss_fn`` section: clipped importance-ratio policy gradient with a KL penalty."""

    reference_policy_kl_penalty: float = Field(
        0.01, ge=0.0, description="Weight of the k3 KL estimate to the frozen reference; 0 drops it."
    )
    ratio_clip_min: float = Field(0.2, ge=0.0, lt=1.0, description="Ratio clipped below at 1 - this.")
    ratio_clip_max: float = Field(0.2, ge=0.0, description="Ratio clipped above at 1 + this.")
    token_level_loss: bool = Field(
        True, description="Average over all response tokens of the batch (else per sequence, then over sequences)."
    )


class TokenizerConfig(StrictModel):
    """``policy.tokenizer``: which tokenizer the policy uses."""

    name: str | None = Field(None, description="Tokenizer path or id; null means policy.model_name.")


class GenerationConfig(StrictModel):
    """``policy.generation``: how the policy samples responses (transformers ``generate``)."""

    backend: Literal["hf", "vllm"] = Field(
        "hf", description="hf: transformers generate (the built-in driver); vllm: only with --engine nemo_rl."
    )
    temperature: float = Field(1.0, gt=0.0, description="Sampling temperature (GRPO needs sampling).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: int | None = Field(None, ge=1, description="Keep the k most likely tokens; null keeps all.")
    max_new_tokens: int = Field(64, ge=1, description="Longest response, in tokens.")
    stop_strings: list[str] | None = Field(None, description="Stop a response at any of these strings.")


class AdamWKwargs(StrictModel):
    """``policy.optimizer.kwargs``: the arguments of ``torch.optim.AdamW``."""

    lr: float = Field(5.0e-6, gt=0.0, description="Learning rate.")
    weight_decay: float = Field(0.01, ge=0.0, description="Decoupled weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam betas.")
    eps: float = Field(1e-8, gt=0.0, description="Adam epsilon.")
    foreach: bool | None = Field(None, description="torch's foreach implementation; null lets torch pick.")
    fused: bool | None = Field(None, description="torch's fused implementation; null lets torch pick.")


class OptimizerConfig(StrictModel):
    """``policy.optimizer``: the optimizer, in NeMo-RL's ``name`` + ``kwargs`` form."""

    name: Literal["torch.optim.AdamW"] = Field("torch.optim.AdamW", description="Only AdamW is supported.")
    kwargs: AdamWKwargs = Field(default_factory=AdamWKwargs)


class PolicyConfig(StrictModel):
    """The ``policy`` section: the trained model, its batches and its optimizer."""

    model_name: str = Field(
        ..., min_length=1, description="Checkpoint path or hub id; tiny://policy builds a tiny model."
    )
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    train_global_batch_size: int = Field(
        16, ge=1, description="Samples per optimizer step; a step's samples split into these."
    )
    train_micro_batch_size: int = Field(4, ge=1, description="Samples per forward/backward (bounds memory).")
    generation_batch_size: int = Field(32, ge=1, description="Prompts per generate call.")
    logprob_batch_size: int = Field(8, ge=1, description="Samples per no-grad log-prob pass.")
    max_total_sequence_length: int = Field(
        512, ge=8, description="Prompt + response tokens at most; longer prompts are dropped at load."
    )
    precision: Literal["float32", "bfloat16"] = Field(
        "bfloat16",
        description="Compute dtype; bfloat16 runs under autocast with float32 master weights and optimizer state.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto: a GPU when the policy actor is given one, else CPU."
    )
    cpu_threads: int | None = Field(
        None, ge=1, description="Torch CPU threads of the policy; null keeps the default (a Ray actor: its CPUs)."
    )
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="Clip the global grad norm; null disables.")

    @property
    def tokenizer_name(self) -> str:
        """The tokenizer to load: ``tokenizer.name`` when set, else ``model_name``."""
        return self.tokenizer.name or self.model_name


class DataConfig(StrictModel):
    """The ``data`` section: where questions and reference answers come from."""

    dataset_name: str = Field(
        "arithmetic",
        description="arithmetic or digit_addition (built in, offline; digit_addition is the demo task with "
        "its own held-out questions) or a Hugging Face hub dataset name.",
    )
    train_data_path: str | None = Field(
        None, description="A local JSONL, JSON or Parquet file; when set, dataset_name is ignored."
    )
    val_data_path: str | None = Field(
        None, description="Validation file; null holds out val_fraction of the training data."
    )
    input_key: str = Field("question", min_length=1, description="Field holding the question.")
    output_key: str = Field("answer", min_length=1, description="Field holding the reference answer.")
    train_split: str = Field("train", description="Hub dataset split for training.")
    val_split: str | None = Field(None, description="Hub split for validation; null holds out a fraction.")
    val_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="Share held out when no validation set is given.")
    num_builtin_examples: int = Field(256, ge=2, description="Size of the built-in arithmetic dataset.")
    prompt: str = Field(
        "Solve the problem and finish with a line 'Answer: <number>'.\n\n{}",
        description="User message; {} is replaced by the question.",
    )
    prompt_file: str | None = Field(None, description="Read the prompt from this file instead ({} placeholder).")
    system_prompt: str | None = Field(None, description="Optional system message.")
    shuffle: bool = Field(True, description="Shuffle the training split each epoch.")


class EnvConfig(StrictModel):
    """The ``env`` section: the GenRM environment."""

    genrm: GenRMConfig


class ClusterConfig(StrictModel):
    """The ``cluster`` section: the resources of this one node."""

    gpus_per_node: int = Field(1, ge=0, description="GPUs Ray may use; 0 runs everything on CPU.")
    num_nodes: int = Field(1, ge=1, le=1, description="The built-in driver is single-node.")
    num_cpus: int | None = Field(None, ge=1, description="CPUs given to Ray; null lets Ray count them.")


class WandbConfig(StrictModel):
    """``logger.wandb``."""

    project: str = Field("nemo-genrm", description="wandb project.")
    name: str = Field("grpo-genrm", description="wandb run name.")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None, description="null follows WANDB_MODE (offline works with no network)."
    )


class TensorboardConfig(StrictModel):
    """``logger.tensorboard`` (no options yet; kept for NeMo-RL's layout)."""


class LoggerConfig(StrictModel):
    """The ``logger`` section: stdout, a metrics JSONL file, TensorBoard and wandb."""

    log_dir: str = Field(
        "logs/grpo_genrm",
        description="Each run's metrics.jsonl, config.json, plot, TensorBoard and wandb files go in a "
        "folder of its own here (exp_001, exp_002, ...: the name its checkpoint folder has too).",
    )
    wandb_enabled: bool = Field(False, description="Log to Weights & Biases.")
    tensorboard_enabled: bool = Field(True, description="Write TensorBoard event files.")
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    tensorboard: TensorboardConfig = Field(default_factory=TensorboardConfig)
    num_val_samples_to_print: int = Field(0, ge=0, description="Validation samples printed to the log.")
    progress_bar: bool = Field(True, description="A tqdm bar over the steps.")


class CheckpointingConfig(StrictModel):
    """The ``checkpointing`` section: saved state and resumption."""

    enabled: bool = Field(True, description="Save checkpoints.")
    checkpoint_dir: str = Field(
        "results/grpo_genrm",
        description="Each run's step_<N> and best folders go in a folder of its own here (exp_001, "
        "exp_002, ...), so a rerun never mixes with or resumes an earlier run unless asked.",
    )
    save_period: int = Field(10, ge=1, description="Save every this many steps (and at the last step).")
    keep_last: int | None = Field(3, ge=1, description="Keep the newest this many checkpoints; null keeps all.")
    resume: bool | str = Field(
        False,
        description="false: a new run in a new exp_<N> folder; true: continue the newest run in "
        "checkpoint_dir from its newest checkpoint (a new run when there is none); a path: continue "
        "that run folder.",
    )
    keep_best: bool = Field(
        True,
        description=(
            "Also keep the policy of the validation with the highest mean held-out reward (the "
            "judge's, never a checker's) in checkpoint_dir/best, replaced when a later validation "
            "beats it; the run's summary names it when the final step is not the best."
        ),
    )


class GRPOMasterConfig(StrictModel):
    """The whole ``grpo_*.yaml`` file."""

    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    loss_fn: LossFnConfig = Field(default_factory=LossFnConfig)
    policy: PolicyConfig
    data: DataConfig = Field(default_factory=DataConfig)
    env: EnvConfig
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    logger: LoggerConfig = Field(default_factory=LoggerConfig)
    checkpointing: CheckpointingConfig = Field(default_factory=CheckpointingConfig)

    @property
    def samples_per_step(self) -> int:
        """Responses generated (and trained on) per step."""
        return self.grpo.num_prompts_per_step * self.grpo.num_generations_per_prompt

    @model_validator(mode="after")
    def _check(self) -> GRPOMasterConfig:
        groups = group_size_problems(
            self.env.genrm.reward,
            per_prompt=self.grpo.num_generations_per_prompt,
            per_prompt_setting="grpo.num_generations_per_prompt",
        )
        report_problems(self, _batch_problems(self) + groups + _placement_problems(self) + _resume_problems(self))
        return self


def _resume_problems(cfg: GRPOMasterConfig) -> list[str]:
    resume = cfg.checkpointing.resume
    if resume is not False and not cfg.checkpointing.enabled:
        return [
            f"checkpointing.resume is {resume!r} but checkpointing.enabled is false: a run resumes "
            "from its checkpoints; set checkpointing.enabled=true or checkpointing.resume=false"
        ]
    if isinstance(resume, str) and not resume.strip():
        return ["checkpointing.resume is an empty path: give a run folder, true or false"]
    return []


def _batch_problems(cfg: GRPOMasterConfig) -> list[str]:
    problems = []
    n, pol = cfg.samples_per_step, cfg.policy
    if n % pol.train_global_batch_size:
        problems.append(
            f"policy.train_global_batch_size ({pol.train_global_batch_size}) must divide the samples "
            f"of a step (num_prompts_per_step x num_generations_per_prompt = {n})"
        )
    if pol.train_global_batch_size % pol.train_micro_batch_size:
        problems.append(
            f"policy.train_micro_batch_size ({pol.train_micro_batch_size}) must divide "
            f"policy.train_global_batch_size ({pol.train_global_batch_size})"
        )
    if cfg.grpo.use_leave_one_out_baseline and cfg.grpo.num_generations_per_prompt < 2:
        problems.append(
            "grpo.use_leave_one_out_baseline needs num_generations_per_prompt >= 2 (the baseline is "
            "the mean of the other responses)"
        )
    if pol.generation.max_new_tokens >= pol.max_total_sequence_length:
        problems.append(
            f"policy.generation.max_new_tokens ({pol.generation.max_new_tokens}) must be smaller "
            f"than policy.max_total_sequence_length ({pol.max_total_sequence_length})"
        )
    return problems


def _placement_problems(cfg: GRPOMasterConfig) -> list[str]:
    problems = []
    res = cfg.env.genrm.resources
    ranks = res.num_replicas * cfg.env.genrm.judge.tensor_parallel_size
    if res.placement == "colocated" and cfg.cluster.gpus_per_node == 0:
        problems.append(
            "env.genrm.resources.placement is 'colocated' but cluster.gpus_per_node is 0: on a "
            "CPU-only machine use placement: separate with gpus_per_replica: 0"
        )
    elif res.placement == "colocated" and ranks > cfg.cluster.gpus_per_node:
        problems.append(
            f"the colocated judge has {ranks} rank(s) (num_replicas x tensor parallel), one per policy "
            f"GPU, but cluster.gpus_per_node is {cfg.cluster.gpus_per_node}: raise gpus_per_node or "
            "lower env.genrm.resources.num_replicas / the judge's tensor_parallel_size"
        )
    if res.placement == "separate" and cfg.env.genrm.judge.backend != "http":
        needed = res.num_replicas * res.gpus_per_replica + (1 if cfg.cluster.gpus_per_node else 0)
        if needed > cfg.cluster.gpus_per_node and res.gpus_per_replica > 0:
            problems.append(
                f"the judge needs {res.num_replicas * res.gpus_per_replica} GPU(s) of its own and the "
                f"policy 1, but cluster.gpus_per_node is {cfg.cluster.gpus_per_node}: raise "
                "gpus_per_node, lower env.genrm.resources.gpus_per_replica/num_replicas, or colocate"
            )
    return problems


def load_grpo_config(path: str | Path, overrides: Iterable[str] = ()) -> GRPOMasterConfig:
    """Load, override and validate a GRPO YAML file in one call.

    Args:
        path: The YAML file (``defaults:`` inheritance is followed).
        overrides: Hydra-style ``key=value`` strings.

    Returns:
        The validated config.

    Raises:
        ConfigError: The file cannot be read, an override is invalid, or any value is wrong
            (every problem listed).
    """
    raw = load_config(path, overrides, schema=GRPOMasterConfig)
    return validate(GRPOMasterConfig, to_container(raw))
