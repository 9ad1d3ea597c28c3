"""The NeMo-RL-style GenRM config the project ships, loaded by NeMo-RL's own config code."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from nemo_genrm.config import GenRMConfig, validate

pytestmark = pytest.mark.nemo_rl

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "examples" / "configs" / "grpo_genrm_nemo_rl.yaml"


def test_nemo_rl_load_config_reads_the_shipped_genrm_config(tmp_path):
    """Placed next to NeMo-RL's configs, as docs/nemo_rl.md says, it loads, resolves and
    validates as NeMo-RL's MasterConfig, and its env.genrm section as GenRMConfig."""
    from nemo_rl.algorithms.grpo import MasterConfig
    from nemo_rl.utils.config import load_config, parse_hydra_overrides, register_omegaconf_resolvers
    from omegaconf import OmegaConf

    nemo_rl_configs = Path(importlib.util.find_spec("nemo_rl").origin).parents[1] / "examples" / "configs"
    configs = shutil.copytree(nemo_rl_configs, tmp_path / "configs")
    shutil.copy(SHIPPED, configs / SHIPPED.name)
    register_omegaconf_resolvers()
    cfg = parse_hydra_overrides(load_config(configs / SHIPPED.name), ["grpo.max_num_steps=3"])
    master = MasterConfig(**OmegaConf.to_container(cfg, resolve=True))
    assert master.data["default"]["processor"] == "genrm_math_data_processor"
    assert master.data["default"]["env_name"] == "genrm"
    assert master.cluster["gpus_per_node"] == 7 and master.grpo.max_num_steps == 3
    genrm = validate(GenRMConfig, master.env["genrm"], prefix="env.genrm")
    assert genrm.judge.backend == "vllm" and genrm.resources.gpus_per_replica == 1
