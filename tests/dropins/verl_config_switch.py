"""A verl custom reward function for the tests: nemo_genrm's ``compute_score`` with the genrm
config each row names.

verl binds one ``reward_kwargs`` per RewardLoopWorker when the worker starts, and starting
workers is most of a multi-worker test's time on a small machine; so one set of workers serves
several configs: ``extra_info["genrm_test_config"]`` names one of ``reward_kwargs["configs"]``.
Every argument verl passes reaches ``compute_score`` unchanged.
"""

from __future__ import annotations

from typing import Any

from nemo_genrm.integrations import verl as verl_dropin


async def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, *, configs: Any, **kwargs: Any
) -> dict[str, Any]:
    config = configs[extra_info["genrm_test_config"]]
    return await verl_dropin.compute_score(
        data_source, solution_str, ground_truth, extra_info, genrm_config=config, **kwargs
    )
