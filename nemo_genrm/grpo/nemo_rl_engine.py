"""``--engine nemo_rl``: train with NeMo-RL's GRPO, rewarded by the GenRM environment.

The YAML is a NeMo-RL GRPO config plus ``env.genrm``. It may inherit NeMo-RL's own configs by
name (``defaults: grpo_math_1B.yaml``): a ``defaults:`` entry not found next to the YAML is read
from the installed NeMo-RL checkout's ``examples/configs``, so the shipped
``examples/configs/grpo_genrm_nemo_rl.yaml`` runs from this project's checkout as it does from
NeMo-RL's. The questions come from one of two places, never both:

- NeMo-RL's ``data.train`` (and ``data.validation``, ``data.default``): NeMo-RL's own
  ``setup_response_data`` loads them and creates the environments their ``env_name`` names, as
  ``run_grpo.py`` does. Prompt files NeMo-RL's configs name relative to its checkout are found
  there.
- This package's ``data`` keys (``dataset_name: arithmetic``, ``train_data_path``, ``input_key``,
  ...), with ``data.train: null``: the samples carry ``question`` and ``ground_truth`` as
  ``extra_env_info``.

A YAML that sets both is refused. The run follows NeMo-RL's ``examples/run_grpo.py`` step by
step: its OmegaConf resolvers, its ``MasterConfig``, the environments created with the data and
waited for (a judge that cannot start stops the run before NeMo-RL's ``setup``), ``setup`` read
by name, the trainer ``run_grpo.py`` would pick, and the environments shut down at the end.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from nemo_genrm.config import ConfigError, GenRMConfig, load_config, to_container, validate
from nemo_genrm.env.intake import check_pairwise_rollouts
from nemo_genrm.env.launch import COLOCATED_UNDER_NEMO_RL
from nemo_genrm.grpo.config import DataConfig
from nemo_genrm.grpo.data import QAExample, load_splits
from nemo_genrm.grpo.models import resolve_model_name
from nemo_genrm.grpo.nemo_rl_data import (
    TASK_NAME,
    as_nemo_rl_train,
    build_datasets,
    describe_train,
    find_nemo_rl_prompt_files,
    nemo_rl_root,
    uses_nemo_rl_data,
)

logger = logging.getLogger(__name__)

__all__ = ["TASK_NAME", "NemoRLInputs", "prepare_nemo_rl_inputs", "resolve_tiny_names", "run_with_nemo_rl"]

# Keys only the built-in driver reads; NeMo-RL does not know them.
_DRIVER_ONLY = {
    "policy": ("device", "cpu_threads"),
    "logger": ("progress_bar",),
    "checkpointing": ("keep_last", "resume", "keep_best"),
    "cluster": ("num_cpus",),
}
_MISSING_NEMO_RL = (
    "--engine nemo_rl needs NeMo-RL (the 'nemo_rl' package), which is not importable here. Run "
    "inside a NeMo-RL environment with nemo-genrm installed into it, or drop --engine nemo_rl to "
    "use this package's own GRPO driver."
)


def require_nemo_rl() -> None:
    """Raise a :class:`ConfigError` saying what to do when NeMo-RL is not importable."""
    if importlib.util.find_spec("nemo_rl") is None:
        raise ConfigError([_MISSING_NEMO_RL], source="--engine")


@dataclass
class NemoRLInputs:
    """What NeMo-RL's ``setup``/``grpo_train`` need, built from our YAML.

    Attributes:
        config: The NeMo-RL master config (plain dict).
        genrm: The validated ``env.genrm`` section (``tiny://`` names resolved).
        data: Our ``data`` keys (where questions come from, the prompt).
        train: Training examples (empty when NeMo-RL's ``data.train`` gives the data).
        val: Validation examples (likewise).
        nemo_rl_data: NeMo-RL's ``data.train`` names the data (its ``setup_response_data`` loads it).
    """

    config: dict[str, Any]
    genrm: GenRMConfig
    data: DataConfig
    train: list[QAExample]
    val: list[QAExample]
    nemo_rl_data: bool = False


def _register_nemo_rl_resolvers() -> None:
    """NeMo-RL's OmegaConf resolvers (``mul``, ``div``, ...), which its YAMLs interpolate with."""
    try:
        from nemo_rl.utils.config import register_omegaconf_resolvers
    except ImportError:  # no NeMo-RL: its YAMLs cannot be complete anyway (reported below)
        return
    register_omegaconf_resolvers()


def resolve_tiny_names(value: Any) -> Any:
    """Every ``tiny://`` string in a (resolved) config replaced by its built model's folder.

    Interpolated copies (``policy.tokenizer.name: ${policy.model_name}``) are plain strings once
    resolved, so every string is visited, not only the known model keys.
    """
    if isinstance(value, dict):
        return {k: resolve_tiny_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_tiny_names(v) for v in value]
    if isinstance(value, str) and value.startswith("tiny://"):
        return resolve_model_name(value)
    return value


def _free_form(name: str, **sections: Any) -> type[BaseModel]:
    return create_model(name, __config__=ConfigDict(extra="allow"), **sections)


# What overrides know of a NeMo-RL config: env.genrm is this package's schema (so any key it
# defines is set with key=value); the rest is NeMo-RL's, free-form here (new keys need '+').
_OVERRIDE_SCHEMA = _free_form("NemoRLConfigKeys", env=(_free_form("NemoRLEnvKeys", genrm=(GenRMConfig, ...)), ...))


def check_rollouts_fit_mode(genrm: GenRMConfig, raw: dict[str, Any]) -> None:
    """Refuse ``pairwise_group`` where NeMo-RL calls the environment once per sample (async GRPO,
    or a generation backend that streams, sync GRPO included):
    :func:`nemo_genrm.env.intake.check_pairwise_rollouts`.

    Raises:
        ConfigError: ``pairwise_group`` with ``grpo.async_grpo.enabled`` or
            ``policy.generation.vllm_cfg.async_engine`` (or another streaming backend).
    """
    policy = raw.get("policy") if isinstance(raw.get("policy"), dict) else {}
    check_pairwise_rollouts(genrm, policy.get("generation"), raw.get("grpo"))


def _load_yaml(config_path: str | Path, overrides: list[str]) -> dict[str, Any]:
    """The YAML with its ``defaults:`` (also looked for in the installed NeMo-RL's configs)."""
    root = nemo_rl_root()
    configs = root / "examples" / "configs" if root is not None else None
    try:
        search = [configs] if configs is not None else []
        return to_container(load_config(config_path, overrides, schema=_OVERRIDE_SCHEMA, search=search))
    except ConfigError as err:
        if configs is None or configs.is_dir() or not any("defaults" in p for p in err.problems):
            raise
        hint = (
            f"the installed NeMo-RL ({root}) has no examples/configs: install NeMo-RL from its checkout "
            "(docs/nemo_rl.md, step 1) or give `defaults:` the base config's full path"
        )
        raise ConfigError([*err.problems, hint], source=err.source) from None


def check_placement_fits_nemo_rl(genrm: GenRMConfig) -> None:
    """Refuse ``placement: colocated``: NeMo-RL's GRPO leaves no GPU share for a judge to join.

    Raises:
        ConfigError: ``env.genrm.resources.placement`` is ``colocated`` (with what to use instead).
    """
    if genrm.resources.placement == "colocated":
        raise ConfigError([f"env.genrm.resources.placement is 'colocated': {COLOCATED_UNDER_NEMO_RL}"])


def prepare_nemo_rl_inputs(config_path: str | Path, overrides: list[str]) -> NemoRLInputs:
    """Load the YAML, validate ``env.genrm``, pick where the questions come from and shape
    NeMo-RL's config (this package's data is read here; NeMo-RL's is loaded by NeMo-RL).

    Raises:
        ConfigError: ``env.genrm`` is invalid or colocated, the YAML is not a full NeMo-RL GRPO
            config, or it names training data both NeMo-RL's way and this package's.
    """
    _register_nemo_rl_resolvers()
    raw = _load_yaml(config_path, overrides)
    genrm_raw = copy.deepcopy(raw.get("env", {}).get("genrm"))
    if genrm_raw is None:
        raise ConfigError(["env.genrm: required; add the GenRM environment section"])
    genrm = validate(GenRMConfig, genrm_raw, prefix="env.genrm")
    check_rollouts_fit_mode(genrm, raw)
    check_placement_fits_nemo_rl(genrm)
    missing = [s for s in ("grpo", "loss_fn", "policy", "cluster", "logger", "checkpointing") if s not in raw]
    if "policy" in raw and not ({"dtensor_cfg", "megatron_cfg"} & set(raw["policy"])):
        missing.append("policy.dtensor_cfg")
    if missing:
        raise ConfigError(
            [
                f"--engine nemo_rl needs a complete NeMo-RL GRPO config; missing: {', '.join(missing)}. "
                "Start the YAML with `defaults: grpo_math_1B.yaml` (read from the installed NeMo-RL's "
                "examples/configs) and keep env.genrm and the data keys on top"
            ],
            source=str(config_path),
        )
    # Every config problem is reported before a tiny:// judge is built (minutes, on first use).
    if genrm.judge.backend != "http":
        genrm.judge.model_name = resolve_model_name(genrm.judge.model_name)
    nemo_rl_data = uses_nemo_rl_data(raw.get("data") or {}, str(config_path))
    data_cfg = DataConfig.model_validate({k: v for k, v in raw.get("data", {}).items() if k in DataConfig.model_fields})
    splits = None if nemo_rl_data else load_splits(data_cfg, int(raw["grpo"].get("seed", 42)))
    config = copy.deepcopy(raw)
    for section, keys in _DRIVER_ONLY.items():
        for key in keys:
            config.get(section, {}).pop(key, None)
    config = resolve_tiny_names(config)
    config["env"]["genrm"] = genrm.model_dump()
    # NeMo-RL keeps its own data keys; ours were read above (shuffle means the same in both).
    ours = set(DataConfig.model_fields) - {"shuffle"}
    config["data"] = {k: v for k, v in config.get("data", {}).items() if k not in ours}
    config["data"].setdefault("shuffle", data_cfg.shuffle)
    config["data"].setdefault("max_input_seq_length", config["policy"].get("max_total_sequence_length"))
    if not nemo_rl_data:
        config["data"]["train"] = as_nemo_rl_train(data_cfg)
    else:
        find_nemo_rl_prompt_files(config["data"])
        source = describe_train(config["data"]["train"])
        logger.info("--engine nemo_rl: training data from NeMo-RL's data.train (%s)", source)
    train, val = (splits.train, splits.val) if splits else ([], [])
    return NemoRLInputs(config=config, genrm=genrm, data=data_cfg, train=train, val=val, nemo_rl_data=nemo_rl_data)


def datasets_for(inputs: NemoRLInputs, tokenizer: Any) -> tuple[Any, Any]:
    """NeMo-RL datasets (train, validation or ``None``) of the questions ``inputs`` read."""
    return build_datasets(
        inputs.data, inputs.train, inputs.val, inputs.config["data"]["max_input_seq_length"], tokenizer
    )


def run_with_nemo_rl(config_path: str | Path, overrides: list[str]) -> None:
    """Train with NeMo-RL's GRPO and the GenRM environment.

    Args:
        config_path: A NeMo-RL GRPO YAML with ``env.genrm`` (see the module docstring).
        overrides: Hydra-style overrides.

    Raises:
        ConfigError: NeMo-RL is not installed, or the config is invalid.
    """
    require_nemo_rl()
    run_nemo_rl_grpo(prepare_nemo_rl_inputs(config_path, overrides))


# ------------------------------------------------------------------- run_grpo.py, step by step
SETUP_RESULTS = (
    "policy",
    "policy_generation",
    "nemo_gym",
    "cluster",
    "dataloader",
    "val_dataloader",
    "loss_fn",
    "logger",
    "checkpointer",
    "grpo_save_state",
    "master_config",
    "teacher_worker_groups",
    "alias_to_group_alias",
)
"""The names of NeMo-RL ``setup``'s results, in its documented order (commit 7ea279a)."""


def setup_results(values: tuple[Any, ...]) -> dict[str, Any]:
    """NeMo-RL ``setup``'s results by name.

    Raises:
        RuntimeError: ``setup`` returned another number of values (a NeMo-RL this engine does
            not know; reading them by position would hand ``grpo_train`` the wrong objects).
    """
    if len(values) != len(SETUP_RESULTS):
        raise RuntimeError(
            f"NeMo-RL's grpo.setup returned {len(values)} values; this engine reads the "
            f"{len(SETUP_RESULTS)} of NeMo-RL 7ea279a ({', '.join(SETUP_RESULTS)})"
        )
    return dict(zip(SETUP_RESULTS, values, strict=True))


def _async_problems(master: Any) -> list[str]:
    """What async GRPO refuses, as ``run_grpo.py`` checks it (all reported at once)."""
    grpo = master.grpo
    problems = [
        f"grpo.{name}.enabled is not supported with async GRPO"
        for name in ("reward_scaling", "reward_shaping")
        if getattr(grpo, name).enabled
    ]
    if grpo.use_dynamic_sampling:
        problems.insert(0, "grpo.use_dynamic_sampling is not supported with async GRPO")
    if master.data.get("use_multiple_dataloader"):
        problems.append("data.use_multiple_dataloader is not supported with async GRPO")
    return problems


def _policy_factory(master: Any) -> Any:
    """``run_grpo.py``'s policy factory: the data-plane policy when ``data_plane.enabled``."""
    dp_cfg = master.data_plane or {}
    if not dp_cfg.get("enabled", False):
        return None
    from nemo_rl.models.policy.tq_policy import TQPolicy

    return lambda **kwargs: TQPolicy(**kwargs, dp_cfg=dp_cfg)


def _stage(stages: list[str], name: str) -> None:
    stages.append(name)
    logger.info("--engine nemo_rl: %s", name)


def run_nemo_rl_grpo(inputs: NemoRLInputs) -> None:
    """``examples/run_grpo.py`` of NeMo-RL with our datasets and the GenRM environment.

    An exception leaving here carries a note naming the step it stopped in (``config``,
    ``ray``, ``tokenizer``, ``data``, ``setup``, ``environment``, ``train``).

    Raises:
        ConfigError: Async GRPO with a feature it refuses.
    """
    stages: list[str] = []
    try:
        _run(inputs, stages)
    except BaseException as exc:
        exc.add_note(f"--engine nemo_rl stopped in step {stages[-1] if stages else 'start'!r}")
        raise


def _run(inputs: NemoRLInputs, stages: list[str]) -> None:
    import ray
    from nemo_rl.algorithms.grpo import MasterConfig, setup, shutdown_environments
    from nemo_rl.algorithms.utils import get_tokenizer
    from nemo_rl.distributed.virtual_cluster import init_ray
    from nemo_rl.models.generation import configure_generation_config
    from nemo_rl.utils.logger import get_next_experiment_dir

    from nemo_genrm.integrations.nemo_rl import register

    _stage(stages, "config")
    register(TASK_NAME)
    master = MasterConfig(**inputs.config)
    master.logger["log_dir"] = get_next_experiment_dir(master.logger["log_dir"])
    _stage(stages, "ray")
    if not ray.is_initialized():  # a launcher (or test) that started Ray keeps its cluster
        init_ray()
    _stage(stages, "tokenizer")
    tokenizer = get_tokenizer(master.policy["tokenizer"])
    megatron_cfg = master.policy.get("megatron_cfg") or {}
    master.policy["generation"] = configure_generation_config(
        master.policy["generation"],
        tokenizer,
        has_refit_draft_weights=bool((master.policy.get("draft") or {}).get("enabled", False)),
        trains_mtp=bool(megatron_cfg.get("mtp_num_layers")),
    )
    _stage(stages, "data")
    task_to_env: dict[str, Any] = {}
    val_task_to_env: dict[str, Any] = {}
    try:
        train, val, task_to_env, val_task_to_env = _data_and_envs(inputs, master, tokenizer)
        _stage(stages, "environment")
        # Waits for the judge: one that cannot start stops the run here, before NeMo-RL's setup.
        _wait_for_genrm([task_to_env, val_task_to_env], master.env["genrm"])
        _stage(stages, "setup")
        results = setup_results(setup(master, tokenizer, train, val, policy_factory=_policy_factory(master)))
        try:
            _stage(stages, "train")
            _train(results, tokenizer, task_to_env, val_task_to_env)  # register(): train logs carry genrm/*
        finally:
            try:
                results["policy_generation"].shutdown()
            except Exception:  # as run_grpo.py: a failed shutdown is reported, not raised
                logger.exception("shutting down NeMo-RL's generation failed")
    finally:
        shutdown_environments(task_to_env, val_task_to_env)


def _data_and_envs(inputs: NemoRLInputs, master: Any, tokenizer: Any) -> tuple[Any, Any, dict, dict]:
    """The datasets, and the environments of training and validation, as ``run_grpo.py`` has them.

    NeMo-RL's ``data.train``: NeMo-RL's ``setup_response_data`` (which creates the environments
    its ``env_name`` entries name, through the registry). This package's data keys: their
    datasets and one GenRM environment for every sample.
    """
    if inputs.nemo_rl_data:
        from nemo_rl.data.utils import setup_response_data

        return setup_response_data(tokenizer, master.data, master.env)
    from nemo_genrm.env.environment import GenRMEnvironment
    from nemo_genrm.ray_runtime import actor_options

    train, val = datasets_for(inputs, tokenizer)
    env = GenRMEnvironment.options(**actor_options(num_cpus=0)).remote(master.env["genrm"])
    return train, val, {TASK_NAME: env}, {TASK_NAME: env}


def _wait_for_genrm(envs: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    """Wait until every GenRM environment's judge is up; raise the first one's start-up error."""
    from nemo_genrm.env.launch import wait_ready
    from nemo_genrm.integrations.nemo_rl_metrics import genrm_envs

    timeout_s = GenRMConfig.model_validate(cfg).fault_tolerance.startup_timeout_s
    handles: list[Any] = []
    for mapping in envs:
        handles.extend(h for h in genrm_envs(mapping) if all(h is not seen for seen in handles))
    for handle in handles:
        wait_ready(handle, timeout_s)


def _train(
    results: dict[str, Any], tokenizer: Any, task_to_env: dict[str, Any], val_task_to_env: dict[str, Any]
) -> None:
    """The trainer ``run_grpo.py`` picks: async, data-plane sync, or the legacy sync one."""
    master = results["master_config"]
    common = dict(
        policy=results["policy"],
        policy_generation=results["policy_generation"],
        dataloader=results["dataloader"],
        val_dataloader=results["val_dataloader"],
        tokenizer=tokenizer,
        loss_fn=results["loss_fn"],
        task_to_env=task_to_env,
        val_task_to_env=val_task_to_env,
        logger=results["logger"],
        checkpointer=results["checkpointer"],
    )
    if master.grpo.async_grpo.enabled:
        problems = _async_problems(master)
        if problems:
            raise ConfigError(problems, source="--engine nemo_rl")
        from nemo_rl.algorithms.grpo import async_grpo_train

        async_grpo_train(
            **common,
            grpo_save_state=results["grpo_save_state"],
            master_config=master,
            max_trajectory_age_steps=master.grpo.async_grpo.max_trajectory_age_steps,
            teacher_worker_groups=results["teacher_worker_groups"],
            alias_to_group_alias=results["alias_to_group_alias"],
        )
        return
    if (master.data_plane or {}).get("enabled", False):
        from nemo_rl.algorithms.grpo_sync import grpo_train_sync as trainer
    else:
        from nemo_rl.algorithms.grpo import grpo_train as trainer
    with results["checkpointer"]:  # flushes background checkpoint finalisation on exit
        trainer(
            *common.values(),
            results["grpo_save_state"],
            master,
        )
