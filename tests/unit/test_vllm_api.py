"""The vLLM engine's use of vLLM, without a GPU.

The worker runs against a recording stand-in for ``vllm`` (``LLM``, ``SamplingParams``,
``TokensPrompt`` and output objects with a known next-token distribution). That checks here,
everywhere, that the engine sends the fitted token ids and reads label probabilities as the
transformers engine computes them. Every call, keyword and attribute read it recorded is then
checked against the installed vLLM's real signatures (``tests/unit/vllm_api_check.py``), so an
API change in vLLM fails this test. That second part needs vLLM importable: in this environment
(``uv sync --extra vllm``) or in another one named by ``NEMO_GENRM_VLLM_PYTHON`` (the path of a
Python interpreter that has vLLM); it is skipped, with that reason, when neither is there.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.judges.fitting import PromptFitter, label_token_ids
from nemo_genrm.judges.results import renormalise
from nemo_genrm.testing import cached_tiny_tokenizer

CHECKER = Path(__file__).with_name("vllm_api_check.py")
PROMPTS = [[{"role": "user", "content": f"Is 2 + {i} equal to {2 + i}? Reply 1 or 0."}] for i in range(3)]


class Recorder:
    """What the engine asked of vLLM: calls (target, positional count, keywords), attribute reads."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.attributes: set[tuple[str, str]] = set()

    def call(self, target: str, args: tuple, kwargs: dict) -> None:
        self.calls.append({"target": target, "args": len(args), "kwargs": sorted(kwargs)})

    def uses(self) -> dict:
        calls = {json.dumps(c, sort_keys=True) for c in self.calls}
        return {
            "calls": [json.loads(c) for c in sorted(calls)],
            "attributes": [{"cls": c, "attr": a} for c, a in sorted(self.attributes)],
        }


class Output:
    """A vLLM output object that records which of its attributes are read."""

    def __init__(self, recorder: Recorder, cls: str, **fields) -> None:
        object.__setattr__(self, "_meta", (recorder, cls, fields))

    def __getattr__(self, name: str):
        recorder, cls, fields = object.__getattribute__(self, "_meta")
        recorder.attributes.add((cls, name))
        if name not in fields:
            raise AttributeError(name)
        return fields[name]


def next_logprobs(sequence: list[int], vocab: int, favoured: list[int]) -> torch.Tensor:
    """The stand-in model: a fixed next-token log-softmax ``[V]`` that depends on the sequence."""
    logits = torch.sin(torch.arange(vocab, dtype=torch.float64) * 0.37 + len(sequence) + sum(sequence) % 7)
    logits[favoured] += 8.0  # the usual verdict tokens rank in the top-k
    return torch.log_softmax(logits, -1)


def fake_vllm(recorder: Recorder, tokenizer, favoured: list[int]):
    """Modules ``vllm`` and ``vllm.inputs`` whose objects record their use."""
    vocab = len(tokenizer)

    def logprob(value: float, token: int):
        return Output(recorder, "Logprob", logprob=value, decoded_token=tokenizer.decode([token]))

    class SamplingParams:
        def __init__(self, *args, **kwargs):
            recorder.call("SamplingParams", args, kwargs)
            self.kwargs = kwargs

    class LLM:
        def __init__(self, *args, **kwargs):
            recorder.call("LLM", args, kwargs)
            self.kwargs, self.sent, self.sent_params = kwargs, [], []

        def get_tokenizer(self, *args, **kwargs):
            recorder.call("LLM.get_tokenizer", args, kwargs)
            return tokenizer

        def generate(self, *args, **kwargs):
            recorder.call("LLM.generate", args, kwargs)
            prompts, params = args
            # One SamplingParams for every prompt, or one per prompt (as vLLM accepts both).
            per_prompt = params if isinstance(params, list) else [params] * len(prompts)
            self.sent_params.extend(p.kwargs for p in per_prompt)
            out = []
            for prompt, param in zip(prompts, per_prompt, strict=True):
                ids = list(prompt["prompt_token_ids"])
                self.sent.append(ids)
                out.append(self._result(ids, param.kwargs))
            return out

        def _result(self, ids: list[int], params: dict):
            lp = next_logprobs(ids, vocab, favoured)
            token = int(lp.argmax())
            top = None
            if params.get("logprobs"):
                values, indices = lp.topk(params["logprobs"])
                top = [{int(t): logprob(float(v), int(t)) for v, t in zip(values, indices, strict=True)}]
            prompt_lps = None
            if params.get("prompt_logprobs") is not None:
                prompt_lps = [None] + [
                    {ids[i]: logprob(float(next_logprobs(ids[:i], vocab, favoured)[ids[i]]), ids[i])}
                    for i in range(1, len(ids))
                ]
            completion = Output(
                recorder, "CompletionOutput", text=tokenizer.decode([token]), token_ids=[token], logprobs=top
            )
            return Output(recorder, "RequestOutput", outputs=[completion], prompt_logprobs=prompt_lps)

        def sleep(self, *args, **kwargs):
            recorder.call("LLM.sleep", args, kwargs)

        def wake_up(self, *args, **kwargs):
            recorder.call("LLM.wake_up", args, kwargs)

        def reset_prefix_cache(self, *args, **kwargs):
            recorder.call("LLM.reset_prefix_cache", args, kwargs)

    def tokens_prompt(*args, **kwargs):
        recorder.call("TokensPrompt", args, kwargs)
        return dict(kwargs)

    vllm = types.ModuleType("vllm")
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = tokens_prompt
    vllm.LLM, vllm.SamplingParams, vllm.inputs = LLM, SamplingParams, inputs
    return vllm, inputs


def _config(tokenizer_path, **vllm_opts):
    from nemo_genrm.config import JudgeConfig

    return JudgeConfig.model_validate(
        {
            "backend": "vllm",
            "model_name": str(tokenizer_path),
            "precision": "float32",
            "max_model_len": 128,
            "sampling": {"max_new_tokens": 8},
            "vllm": {"gpu_memory_utilization": 0.2, **vllm_opts},
        }
    )


@pytest.fixture(scope="module")
def recorded(tiny_cache_dir):
    """Drive every path of the worker against the stand-in; returns what it checked and used."""
    from transformers import AutoTokenizer

    from nemo_genrm.judges.vllm import VllmJudgeWorker

    path = cached_tiny_tokenizer()
    tokenizer = AutoTokenizer.from_pretrained(path)
    favoured = [ids[0] for ids in label_token_ids(tokenizer, ["1", "0"])]
    recorder = Recorder()
    vllm, inputs = fake_vllm(recorder, tokenizer, favoured)
    patch = pytest.MonkeyPatch()
    patch.setitem(sys.modules, "vllm", vllm)
    patch.setitem(sys.modules, "vllm.inputs", inputs)
    # The Ray executor path writes vLLM's placement variables: restore them afterwards.
    patch.setenv("VLLM_RAY_BUNDLE_INDICES", "")
    patch.setenv("VLLM_RAY_PER_WORKER_GPUS", "")
    try:  # the workers keep the stand-in's objects: the real modules come back at once
        worker = VllmJudgeWorker(_config(path), enable_sleep_mode=True)
        VllmJudgeWorker(_config(path, tensor_parallel_size=2))  # multiprocessing executor
        VllmJudgeWorker(_config(path, tensor_parallel_size=2), bundle_indices=(0, 1), per_worker_gpus=0.5)
    finally:
        patch.undo()
    return worker, tokenizer, favoured, recorder


def test_generate_sends_the_fitted_token_ids(recorded):
    worker, tokenizer, _, _ = recorded
    candidate = "a long derivation that goes on and on " * 30
    request = JudgeRequest(
        messages=({"role": "user", "content": f"Candidate: {candidate}\nReply 1 or 0."},), shrinkable=candidate
    )
    fitted = PromptFitter.for_judge(worker.config).fit([request, PROMPTS[0]])
    assert fitted[0].truncated  # shortened to fit max_model_len
    worker.llm.sent.clear()
    outs = worker.generate_fitted(fitted)
    assert worker.llm.sent == [list(f.token_ids) for f in fitted]  # exactly what was fitted
    assert all(text and n == 1 for text, n in outs)


def test_each_vote_is_its_own_sampling_params_with_seed_plus_vote(recorded):
    """votes: k copies of a prompt, one SamplingParams each, seeded seed + vote (not one shared)."""
    import dataclasses

    worker, _, _, _ = recorded
    sampled = worker.config.model_copy(
        update={"sampling": worker.config.sampling.model_copy(update={"temperature": 0.8, "seed": 40})}
    )
    fitted = PromptFitter.for_judge(sampled).fit([PROMPTS[0]])[0]
    votes = [dataclasses.replace(fitted, vote=v) for v in range(3)]
    greedy_config, worker.config = worker.config, sampled
    try:
        worker.llm.sent_params.clear()
        worker.generate_fitted(votes)
        assert [p["seed"] for p in worker.llm.sent_params] == [40, 41, 42]
        worker.config = greedy_config
        worker.llm.sent_params.clear()
        worker.generate_fitted(votes)
        assert [p["seed"] for p in worker.llm.sent_params] == [None, None, None]  # greedy: no seed
    finally:
        worker.config = greedy_config


@pytest.mark.parametrize(
    "labels",
    [
        ["1", "0"],  # both in the top-k: read from one generated token's logprobs
        ["1", "0", "7"],  # "7" is not in the top-k: that row is scored from prompt logprobs
        ["Judgement: 1", "Judgement: 0"],  # several tokens: teacher-forced prompt logprobs
    ],
)
def test_scores_are_the_transformers_engine_values(recorded, labels):
    worker, tokenizer, favoured, _ = recorded
    fitted = PromptFitter.for_judge(worker.config).fit(PROMPTS)
    ours = worker.score_fitted(fitted, labels)
    for prompt, probs in zip(fitted, ours, strict=True):
        # As the transformers engine: sum of each label token's log-probability after the
        # prompt and the label's earlier tokens, renormalised over the labels.
        logps = {}
        for label, ids in zip(labels, label_token_ids(tokenizer, labels), strict=True):
            seq = list(prompt.token_ids)
            total = 0.0
            for tok in ids:
                total += float(next_logprobs(seq, len(tokenizer), favoured)[tok])
                seq.append(tok)
            logps[label] = total
        want = renormalise(logps)
        assert probs.keys() == want.keys()
        for label in labels:
            assert math.isclose(probs[label], want[label], rel_tol=0, abs_tol=1e-9)


def test_top_logprobs_sleep_and_wake(recorded):
    worker, _, _, _ = recorded
    fitted = PromptFitter.for_judge(worker.config).fit(PROMPTS[:1])
    top = worker.top_logprobs_fitted(fitted, 3)[0]
    assert len(top) == 3 and max(top, key=top.get) in {"1", "0"}
    worker.sleep()
    assert worker.asleep
    worker.score_fitted(fitted, ["1", "0"])  # wakes itself first
    assert not worker.asleep


def _real_check(*uses: dict) -> list[list[str]]:
    """Problems of each set of uses, found by the checker with vLLM imported (or skip).

    One subprocess checks every set: importing vLLM takes most of a minute.
    """
    if importlib.util.find_spec("vllm") is not None:
        sys.path.insert(0, str(CHECKER.parent))
        try:
            import vllm_api_check
        finally:
            sys.path.remove(str(CHECKER.parent))
        return [vllm_api_check.check(u) for u in uses]
    python = os.environ.get("NEMO_GENRM_VLLM_PYTHON")
    if not python:
        pytest.skip(
            "vLLM is not importable here: `uv sync --extra vllm`, or set NEMO_GENRM_VLLM_PYTHON "
            "to a Python interpreter that has vLLM"
        )
    if not Path(python).exists():
        pytest.fail(f"NEMO_GENRM_VLLM_PYTHON={python!r} does not exist")
    uses_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"vllm_uses_{os.getpid()}.json"
    uses_file.write_text(json.dumps(list(uses)))
    try:
        done = subprocess.run(
            [python, str(CHECKER), str(uses_file)], capture_output=True, text=True, timeout=900, check=False
        )
    finally:
        uses_file.unlink()
    if done.returncode != 0:
        pytest.fail(f"the vLLM API check could not run:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_vllm_name_the_engine_uses_matches_the_installed_vllm(recorded):
    # Run after the tests above, which exercised every path of the worker.
    _, _, _, recorder = recorded
    uses = recorder.uses()
    targets = {c["target"] for c in uses["calls"]}
    assert targets == {
        "LLM",
        "LLM.get_tokenizer",
        "LLM.generate",
        "LLM.sleep",
        "LLM.wake_up",
        "LLM.reset_prefix_cache",
        "SamplingParams",
        "TokensPrompt",
    }
    read = {(a["cls"], a["attr"]) for a in uses["attributes"]}
    assert {
        ("RequestOutput", "outputs"),
        ("RequestOutput", "prompt_logprobs"),
        ("CompletionOutput", "text"),
        ("CompletionOutput", "token_ids"),
        ("CompletionOutput", "logprobs"),
        ("Logprob", "logprob"),
        ("Logprob", "decoded_token"),
    } <= read
    # The checker itself sees a drift: a keyword vLLM does not have is reported.
    drifted = {
        "calls": [*uses["calls"], {"target": "SamplingParams", "args": 0, "kwargs": ["no_such_kw"]}],
        "attributes": uses["attributes"],
    }
    problems, drifted_problems = _real_check(uses, drifted)
    assert problems == []
    assert any("no_such_kw" in p for p in drifted_problems)
