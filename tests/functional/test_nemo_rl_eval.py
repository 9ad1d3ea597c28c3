"""NeMo-RL's evaluation entry point (``examples/run_eval.py``) scoring with the GenRM environment.

Its eval loop calls ``env.step.remote(message_logs, extra_env_info, True)`` (the third argument
is NeMo-RL's ``return_extracted_answer``) and reads ``answers`` for ``cons@k``. The script's
``main`` runs as a user runs it, with ``register()`` added before it as docs/nemo_rl.md says; only
what needs a GPU is replaced: NeMo-RL's GPU cluster, and its vLLM generation by a scripted policy
whose responses are known. The judge is a real tiny transformers model. Needs NeMo-RL.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from nemo_rl_support import genrm_cfg

pytestmark = pytest.mark.nemo_rl

# Per problem: the policy's response. The tiny judge says "agrees" (1) to every prompt it gets,
# and the value verifier beside it (reward.verifier: both, the default) vetoes 41 against 42:
# 42 -> 1, 41 -> 0; an empty response has no answer and never reaches it (reward 0).
RESPONSES = {"(#0)": "6 times 7 is \\boxed{42}", "(#1)": "", "(#2)": "It is \\boxed{41}"}


def _nemo_rl_file(relative: str) -> Path:
    return Path(importlib.util.find_spec("nemo_rl").origin).parents[1] / relative


def _run_eval_module():
    spec = importlib.util.spec_from_file_location("nemo_rl_run_eval", _nemo_rl_file("examples/run_eval.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _respond(prompt: str) -> str:
    return next(text for marker, text in RESPONSES.items() if marker in prompt)


def test_run_eval_main_scores_with_the_genrm_env(ray_cluster, tiny_cache_dir, tmp_path, monkeypatch, capsys):
    from nemo_rl.evals import eval as nemo_eval

    from nemo_genrm.integrations.nemo_rl import register
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_tokenizer
    from nemo_genrm.testing.scripted_generation import ScriptedGeneration

    problems = tmp_path / "problems.json"
    problems.write_text(
        "\n".join(json.dumps({"problem": f"What is 6 times 7? {m}", "answer": "42"}) for m in RESPONSES)
    )
    config = tmp_path / "eval_genrm.yaml"
    config.write_text(
        json.dumps(
            {  # JSON is YAML: NeMo-RL's eval.yaml with the GenRM env on top
                "defaults": str(_nemo_rl_file("examples/configs/evals/eval.yaml")),
                "eval": {"metric": "cons@k", "k_value": 1, "save_path": str(tmp_path / "out")},
                "generation": {"model_name": str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir))},
                "data": {
                    "dataset_name": str(problems),
                    "problem_key": "problem",
                    "solution_key": "answer",
                    "file_format": "json",
                    "split": "train",
                    "env_name": "genrm",
                },
                "env": {"genrm": genrm_cfg(str(cached_tiny_judge("1", cache_dir=tiny_cache_dir)))},
            }
        )
    )
    run_eval = _run_eval_module()
    generation = ScriptedGeneration(None, _respond)
    monkeypatch.setattr(run_eval, "init_ray", lambda: None)  # the session's Ray cluster is up
    monkeypatch.setattr(nemo_eval, "RayVirtualCluster", lambda **_kwargs: None)  # asks for GPUs
    monkeypatch.setattr(nemo_eval, "VllmGeneration", lambda cluster, config: generation)
    monkeypatch.setattr(sys, "argv", ["run_eval.py", "--config", str(config)])

    register()  # the line docs/nemo_rl.md adds to a copy of run_eval.py
    run_eval.main()

    assert generation.generate_calls == 1  # every prompt in one batch (num_prompts_per_step: -1)
    saved = json.loads((tmp_path / "out" / "evaluation_data.json").read_text())["evaluation_data"]
    assert [s["reward"] for s in saved] == [1.0, 0.0, 0.0]
    # cons@1 reads the env's answers: with none, NeMo-RL's eval_cons_k fails on len(None).
    assert "score=0.3333 (1.0/3)" in capsys.readouterr().out
