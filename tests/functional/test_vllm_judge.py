"""The vLLM judge engine on fixed-verdict tiny judges (needs a CUDA GPU and vLLM; skipped otherwise).

The tiny judges are built offline (head size 32, as vLLM requires); their verdicts live in the
weights, so vLLM must reproduce them exactly: the text through ``generate`` and the matching
label through ``score`` (top-k logprobs for one-token labels, teacher-forced prompt logprobs for
longer ones), before and after a sleep/wake cycle.
"""

from __future__ import annotations

import pytest

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges import JudgeRequest, Placement, ReplicaPlacement, create_judge
from nemo_genrm.testing import cached_tiny_judge

PROMPTS = [[{"role": "user", "content": f"Question {i}: is 2 + {i} equal to {2 + i}? Reply 1 or 0."}] for i in range(4)]


def _config(path, **vllm) -> dict:
    return {
        "backend": "vllm",
        "model_name": str(path),
        "precision": "float32",
        "max_model_len": 256,
        "sampling": {"max_new_tokens": 8},
        "vllm": {"gpu_memory_utilization": 0.2, "extra_kwargs": {"enforce_eager": True}, **vllm},
    }


@pytest.fixture(scope="module")
def judge_one(ray_cluster, tiny_cache_dir):
    placement = Placement((ReplicaPlacement(num_gpus=0.25, num_cpus=1.0),))  # colocated: sleep mode on
    judge = create_judge(_config(cached_tiny_judge("1")), placement)
    yield judge
    judge.shutdown()


@pytest.mark.gpu
@pytest.mark.vllm
def test_fixed_verdict_text_and_labels(judge_one):
    assert [g.text for g in judge_one.generate(PROMPTS)] == ["1"] * 4
    for scores in judge_one.score(PROMPTS, ["1", "0"]):
        assert scores.error is None and scores.probs["1"] > 0.99


@pytest.mark.gpu
@pytest.mark.vllm
@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("[[A]]", ["[[A]]", "[[B]]"], "[[A]]"),
        ("Judgement: 1", ["Judgement: 1", "Judgement: 0"], "Judgement: 1"),  # prompt logprobs path
    ],
)
def test_other_fixed_verdicts(ray_cluster, tiny_cache_dir, text, labels, expected):
    placement = Placement((ReplicaPlacement(num_gpus=0.25, num_cpus=1.0),))
    with create_judge(_config(cached_tiny_judge(text)), placement) as judge:
        assert [g.text for g in judge.generate(PROMPTS)] == [text] * 4
        assert all(s.probs[expected] > 0.99 for s in judge.score(PROMPTS, labels))


@pytest.mark.gpu
@pytest.mark.vllm
def test_sleep_and_wake_keep_outputs(judge_one):
    before = (judge_one.generate(PROMPTS), judge_one.score(PROMPTS, ["1", "0"]))
    judge_one.sleep()
    assert judge_one.stats().extra["asleep"]
    judge_one.wake()
    after = (judge_one.generate(PROMPTS), judge_one.score(PROMPTS, ["1", "0"]))
    assert [g.text for g in after[0]] == [g.text for g in before[0]]
    for a, b in zip(after[1], before[1], strict=True):
        assert a.probs == pytest.approx(b.probs, abs=1e-6)


@pytest.mark.gpu
@pytest.mark.vllm
def test_prompt_shortening_and_top_logprobs(judge_one):
    candidate = "a long derivation that goes on and on " * 40
    request = JudgeRequest(
        messages=({"role": "user", "content": f"Candidate: {candidate}\nReply 1 or 0."},),
        shrinkable=candidate,
    )
    gen = judge_one.generate([request])[0]
    assert gen.truncated and gen.text == "1" and gen.prompt_tokens <= 256 - 8
    top = judge_one.top_logprobs(PROMPTS[:1], 3)[0]
    assert max(top, key=top.get) == "1"


# ------------------------------------------------------------- no GPU needed (run everywhere)
def test_gpu_share_is_checked_before_anything_starts():
    from nemo_genrm.config import ConfigError

    placement = Placement((ReplicaPlacement(num_gpus=0.1, num_cpus=1.0),))  # share 0.1 < 0.2
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        create_judge(_config("/nonexistent/judge"), placement)


def test_worker_says_how_to_install_vllm_when_missing():
    import importlib.util

    from nemo_genrm.judges.vllm import VllmJudgeWorker

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed")
    with pytest.raises(ImportError, match="nemo-genrm\\[vllm\\]"):
        VllmJudgeWorker(JudgeConfig.model_validate(_config("/nonexistent/judge")))
