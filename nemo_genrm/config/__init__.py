"""Typed configuration for every section of nemo-genrm.

Each section is a pydantic model with its defaults on the fields and unknown keys rejected, so a
typo fails at start-up instead of being silently ignored. :func:`validate` turns pydantic's
errors into one :class:`ConfigError` that lists every problem (its dotted path, the value seen
and how to fix it), and :func:`load_config` reads YAML with NeMo-RL's conventions (``defaults:``
inheritance and Hydra-style ``key=value`` overrides).

The sections live in :mod:`.base` (:class:`StrictModel`), :mod:`.judge`, :mod:`.prompt` (prompt
and verdict), :mod:`.genrm` (the environment) and :mod:`.reward_bench`; every public name is
importable from here.
"""

from nemo_genrm.config.base import StrictModel
from nemo_genrm.config.genrm import (
    CoalesceConfig,
    FaultToleranceConfig,
    GenRMConfig,
    PairwiseGroupConfig,
    ResourcesConfig,
    RewardConfig,
    RubricConfig,
)
from nemo_genrm.config.judge import (
    BatchingConfig,
    DTensorConfig,
    HttpConfig,
    JudgeConfig,
    ReasoningConfig,
    SamplingConfig,
    VllmConfig,
)
from nemo_genrm.config.loading import load_config, to_container, validate
from nemo_genrm.config.prompt import AnswerConfig, PromptConfig, ResponseConfig, VerdictConfig
from nemo_genrm.config.reward_bench import REFERENCE_MAX_NEW_TOKENS, RewardBenchConfig, RewardBenchDataConfig
from nemo_genrm.errors import ConfigError

__all__ = [
    "AnswerConfig",
    "BatchingConfig",
    "CoalesceConfig",
    "ConfigError",
    "DTensorConfig",
    "FaultToleranceConfig",
    "GenRMConfig",
    "HttpConfig",
    "JudgeConfig",
    "PairwiseGroupConfig",
    "PromptConfig",
    "REFERENCE_MAX_NEW_TOKENS",
    "ReasoningConfig",
    "ResourcesConfig",
    "ResponseConfig",
    "RewardBenchConfig",
    "RewardBenchDataConfig",
    "RewardConfig",
    "RubricConfig",
    "SamplingConfig",
    "StrictModel",
    "VerdictConfig",
    "VllmConfig",
    "load_config",
    "to_container",
    "validate",
]
