"""GenRMReward inside TRL's real GRPOTrainer: a tiny policy trains a few steps on CPU.

The call shapes alone are checked in test_dropin_core.py, without TRL.

Runs where TRL is installed (CI: the environment ci/dropins/ builds); skipped elsewhere.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

trl = pytest.importorskip("trl", reason="needs TRL (CI installs it in .venv-dropins from ci/dropins/requirements.txt)")

from dropins_support import GENRM_SECTION, RuleJudge  # noqa: E402

from nemo_genrm.guard.injection import is_content_free  # noqa: E402
from nemo_genrm.integrations.trl import GenRMReward  # noqa: E402
from nemo_genrm.testing import cached_tiny_model  # noqa: E402
from nemo_genrm.testing.integrity_judges import (  # noqa: E402
    StandInServer,
    dead_base_url,
    has_criterion_met,
    more_letters_wins,
    more_working_wins,
    multi_token_reply,
)
from nemo_genrm.testing.tagged_value_judges import RuleJudge as ModeJudge  # noqa: E402

pytestmark = pytest.mark.dropins


class Recording(GenRMReward):
    """GenRMReward that keeps what TRL passed and what it returned."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list, list, list]] = []
        self.seconds: list[float] = []

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        import time

        start = time.monotonic()
        out = await super().__call__(prompts, completions, completion_ids, **kwargs)
        self.seconds.append(time.monotonic() - start)
        self.calls.append((list(prompts), list(completions), out))
        return out


def _args(tmp_path, **overrides):
    from trl import GRPOConfig

    settings = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=3,
        per_device_train_batch_size=16,  # every question, 4 completions each, every step
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
        bf16=False,
        dataloader_num_workers=0,
    )
    return GRPOConfig(**{**settings, **overrides})


# The tiny tokenizer's ChatML template, reading a content that is a list of parts as its text
# parts (as the chat templates of vision-language models do).
PARTS_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}{{- part['text'] -}}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def _text_of(content) -> str:
    return content if isinstance(content, str) else "\n".join(part["text"] for part in content)


def test_grpo_trainer_trains_with_the_judge_reward(tmp_path, tiny_cache_dir):
    """TRL's GRPOTrainer awaits the reward, turns judge failures into NaN and keeps training.

    The dataset's prompts hold OpenAI-style content parts (a chat dataset's shape), which TRL
    passes on as they are: the judge must be shown their text, or no RIGHT question scores 1.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    model_path = cached_tiny_model(cache_dir=tiny_cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.chat_template = PARTS_TEMPLATE
    judge = RuleJudge()
    # One canary a judge call (rate 1.0, at most one), so TRL's logs show the watchdog's counts.
    canaries = {"reward": {"watchdog": {"canaries": {"rate": 1.0, "max_per_call": 1}}}}
    reward = Recording({**GENRM_SECTION, **canaries}, judge=judge)
    questions = ["Say RIGHT.", "Say anything.", "CONFUSE the judge.", "Count the a's."]
    data = Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "user", "content": [{"type": "text", "text": "Task:"}, {"type": "text", "text": q}]}
                ],
                "ground_truth": "4",
            }
            for q in questions
        ]
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=3,
        per_device_train_batch_size=16,  # every question, 4 completions each, every step
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
        bf16=False,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=str(model_path), reward_funcs=[reward], args=args, train_dataset=data, processing_class=tokenizer
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    assert trainer.state.global_step == 3
    samples = [
        (_text_of(prompt[-1]["content"]), completion[-1]["content"], out)
        for prompts, completions, outs in reward.calls
        for prompt, completion, out in zip(prompts, completions, outs, strict=True)
    ]
    assert len(reward.calls) == 3 and len(samples) == 48
    # The rule the stand-in judge follows, seen from TRL's side: RIGHT in the question gives 1,
    # CONFUSE makes the judge fail (None, NaN in TRL), an empty answer is not judged (0.0).
    for question, completion, out in samples:
        if not completion.strip():
            assert out == 0.0
        elif "CONFUSE" in question:
            assert out is None
        elif "RIGHT" in question:
            assert out == 1.0
        else:
            assert out in (0.0, 1.0)
    assert any(out is None for _, _, out in samples), "the CONFUSE prompt makes the judge fail"
    assert any(out == 1.0 for question, _, out in samples if "RIGHT" in question)
    assert any("Task:\nSay RIGHT." in prompt for prompt in judge.prompts)  # the parts' text, as vLLM joins it
    logged = [entry for entry in trainer.state.log_history if "rewards/genrm/mean" in entry]
    assert logged and all(not math.isnan(entry["rewards/genrm/mean"]) for entry in logged)
    assert any("genrm/num_samples" in entry for entry in trainer.state.log_history)
    # The watchdog's metrics through TRL's log_metric, one judge call a step: its 16 responses read,
    # one canary judged (a step's real prompts buy at least one), drawn in canaries.FAMILIES order
    # for a question of the step (reference 4, wrong value 5). Whatever the rule says of it, the
    # value verifier (reward.verifier: both) vetoes 5, 40 and "My answer: 5": no false accept.
    steps = [entry for entry in trainer.state.log_history if "genrm/canary/sent" in entry]
    assert len(steps) == 3 and all(entry["genrm/judge_prompts"] >= 1 for entry in steps)
    for entry, family in zip(steps, ("verdict_line", "modified_value", "forged_reference"), strict=True):
        assert entry["genrm/watchdog/responses"] == 16.0
        assert (entry["genrm/canary/sent"], entry["genrm/canary/judge_prompts"]) == (1.0, 1.0)
        assert entry[f"genrm/canary/sent/{family}"] == 1.0 and entry["genrm/canary/false_accept"] == 0.0
        assert entry["genrm/watchdog/alarms"] == 0.0
    assert sum(1 for prompt in judge.prompts if "Verdict: 1" in prompt) == 1  # the canary reached it
    changed = any(not p.detach().equal(before[n]) for n, p in trainer.model.named_parameters())
    assert changed, "three GRPO steps with reward variance must move the policy"


def _judgeable(text: str) -> bool:
    return bool(text.strip()) and not is_content_free(text.strip())


def _expected_pairwise(completions: list[str], size: int) -> list[float | None]:
    """more_letters_wins("e") by hand over each group of ``size`` consecutive completions."""
    out: list[float | None] = []
    for start in range(0, len(completions), size):
        group = [c.strip() for c in completions[start : start + size]]
        judged = [i for i, c in enumerate(group) if _judgeable(c)]
        for i, text in enumerate(group):
            if i not in judged:
                out.append(0.0)  # no answer: a real 0, not masked
            elif len(judged) == 1:
                out.append(None)  # nothing to compare with: masked, None for TRL
            else:
                others = [group[j].count("e") for j in judged if j != i]
                mine = text.count("e")
                out.append(sum(1.0 if mine > o else 0.5 if mine == o else 0.0 for o in others) / len(others))
    return out


def test_pairwise_and_rubric_modes_through_grpo_trainer(tmp_path, tiny_cache_dir):
    """No reference column: pairwise ranks each prompt's completions, rubric reads the dataset column."""
    from datasets import Dataset
    from trl import GRPOTrainer

    pairwise_section = {**GENRM_SECTION, "reward": {"mode": "pairwise_group"}}
    rubric_section = {**GENRM_SECTION, "reward": {"mode": "rubric"}}
    pairwise = Recording(pairwise_section, judge=ModeJudge(more_letters_wins("e")), name="pairwise")
    rubric = Recording(rubric_section, judge=ModeJudge(has_criterion_met), name="rubric")
    items = [{"criterion": "has:e", "weight": 2}, {"criterion": "has:a", "weight": 1}]
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"Write about topic {k}."}], "rubric": items} for k in range(4)]
    )
    # One-token completions drawn from four tokens, two of them punctuation: a completion is
    # often content-free (no answer), and a group with one answered completion is masked.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(cached_tiny_model(cache_dir=tiny_cache_dir))
    allowed = {tokenizer.convert_tokens_to_ids(t) for t in (".", ",", "e", "a")}
    suppress = [i for i in range(len(tokenizer)) if i not in allowed]
    args = _args(
        tmp_path,
        max_steps=3,
        max_completion_length=1,
        temperature=8.0,
        learning_rate=1e-6,
        generation_kwargs={"suppress_tokens": suppress},
    )
    trainer = GRPOTrainer(
        model=str(cached_tiny_model(cache_dir=tiny_cache_dir)),
        reward_funcs=[pairwise, rubric],
        args=args,
        train_dataset=data,
    )
    trainer.train()
    assert len(pairwise.calls) == len(rubric.calls) == 3
    masked = 0
    for (_, completions, out), (_, same, shares) in zip(pairwise.calls, rubric.calls, strict=True):
        texts = [c[-1]["content"] for c in completions]
        assert [c[-1]["content"] for c in same] == texts
        expected = _expected_pairwise(texts, 4)
        assert out == pytest.approx(expected), texts
        masked += expected.count(None)
        hand = [(2 * ("e" in t.strip()) + ("a" in t.strip())) / 3 if _judgeable(t) else 0.0 for t in texts]
        assert shares == pytest.approx(hand), texts
    assert masked >= 1, "a completion alone among content-free ones is masked: None for TRL"
    logged = [entry for entry in trainer.state.log_history if "rewards/pairwise/mean" in entry]
    assert logged and all(not math.isnan(entry["rewards/pairwise/mean"]) for entry in logged)


def test_a_dead_judge_service_stops_training_and_bad_modes_are_refused(tmp_path, tiny_cache_dir):
    from datasets import Dataset
    from trl import GRPOTrainer

    from nemo_genrm.config import ConfigError
    from nemo_genrm.errors import JudgeUnavailableError

    section = {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": dead_base_url(), "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "fault_tolerance": {"unavailable_grace_s": 0},
    }
    reward = GenRMReward(section)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "2+2?"}], "ground_truth": "4"}] * 4)
    trainer = GRPOTrainer(
        model=str(cached_tiny_model(cache_dir=tiny_cache_dir)),
        reward_funcs=[reward],
        args=_args(tmp_path),
        train_dataset=data,
    )
    with pytest.raises(JudgeUnavailableError):
        trainer.train()
    assert trainer.state.global_step == 0
    reward.close()

    def rule(body):
        return multi_token_reply(more_working_wins(StandInServer.user_text(body)))

    with StandInServer(rule) as server:
        judge = {
            "backend": "http",
            "model_name": "judge",
            "verdict_from": "logprobs",
            "http": {"base_url": server.base_url},
        }
        with pytest.raises(ConfigError, match="judge.tokenizer"):
            GenRMReward({"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": {"mode": "pairwise_group"}})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_pairwise_groups_split_between_processes_are_ranked_whole(tmp_path, tiny_cache_dir):
    """Two processes (torchrun, gloo on CPU): each gets 2 of a prompt's 4 completions per step.

    TRL calls every process's reward function at the same step with that process's slice; the
    expected reward of each completion is its win rate among all 4 of its group, by hand. Only
    process 0 builds a judge.
    """
    model = str(cached_tiny_model(cache_dir=tiny_cache_dir))
    script = Path(__file__).with_name("trl_two_processes.py")
    with StandInServer(lambda body: more_letters_wins("e")(StandInServer.user_text(body))) as server:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(_free_port()),
            str(script),
            str(tmp_path),
            server.base_url,
            model,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["built"] for r in ranks] == [1, 0]  # only process 0 judges, so only it builds a judge
    assert len(ranks[0]["calls"]) == len(ranks[1]["calls"]) == 2
    for first, second in zip(ranks[0]["calls"], ranks[1]["calls"], strict=True):
        assert len(set(first["prompts"] + second["prompts"])) == 1, "one prompt's group, split in two"
        expected = _expected_pairwise(first["completions"] + second["completions"], 4)
        assert first["rewards"] + second["rewards"] == pytest.approx(expected), (first, second)


def _torchrun(script: str, *args: str, timeout: int) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        str(Path(__file__).with_name(script)),
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_a_failure_on_one_process_is_raised_on_every_process(tmp_path):
    """Two processes, no trainer: a rank that fails before the exchange makes every rank raise.

    Only process 0 builds a judge (it alone judges pairwise groups). A completion with no text to
    read is bad_input, a per-sample zero, on the rank that holds it. Completions one rank cannot
    list, or a column it cannot send, raise there as themselves and on the other rank as an error
    naming them, at once (a rank left waiting in the exchange would time out after 15 s, with
    another error); the next call finds both ranks in step again. A judge gone for good, which
    only process 0 asks, is raised on both.
    """
    with StandInServer(lambda body: more_letters_wins("e")(StandInServer.user_text(body))) as server:
        done = _torchrun("trl_rank_failures.py", str(tmp_path), server.base_url, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["built"] for r in ranks] == [2, 0]  # two rewards, their judges on process 0 alone
    expected = _expected_pairwise(["e", "eee", "ee", "eeee"], 4)
    good, unreadable, unlisted, unsendable, again, gone = zip(ranks[0]["calls"], ranks[1]["calls"], strict=True)
    for first, second in (good, again):
        assert first["rewards"] + second["rewards"] == pytest.approx(expected)
    # Rank 1's two completions are bad_input (0, not ranked); rank 0's e and eee are ranked alone.
    assert unreadable[0]["rewards"] + unreadable[1]["rewards"] == _expected_pairwise(["e", "eee"], 2) + [0.0, 0.0]
    assert unlisted[1]["error"] == "TypeError"
    assert unlisted[0]["error"] == "ProcessFailedError" and "process 1" in unlisted[0]["message"]
    assert "TypeError" in unlisted[0]["message"]
    assert unsendable[0]["error"] == "TypeError" and "pickle" in unsendable[0]["message"]
    assert unsendable[1]["error"] == "ProcessFailedError" and "process 0" in unsendable[1]["message"]
    assert [g["error"] for g in gone] == ["JudgeUnavailableError"] * 2  # found on process 0, raised on both


# ------------------------------------------------------- groups TRL lays out, masks that reach the loss
class AdvantageRecording:
    """Mixin for GRPOTrainer: keeps the advantages TRL computed for each batch (its loss's input)."""

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.recorded_advantages = getattr(self, "recorded_advantages", [])
        self.recorded_advantages.append(out["advantages"].tolist())
        return out


def _restricted(tokenizer, tokens: tuple[str, ...]) -> list[int]:
    allowed = {tokenizer.convert_tokens_to_ids(t) for t in tokens}
    return [i for i in range(len(tokenizer)) if i not in allowed]


def test_two_dataset_rows_with_one_prompt_are_two_groups_of_num_generations(tmp_path, tiny_cache_dir, caplog):
    """Two rows ask the same prompt; TRL lays out their 4 + 4 completions next to each other.

    Without group_size the runs are cut at TRL's num_generations (4): two groups, each ranked
    among its own four (one run of eight was one group). A group_size that differs from
    num_generations is warned about. With group_size 5 the run of eight is cut into 5 and 3: the
    call holds every completion there is, so the group of 3 is masked at once (before, it waited
    group_wait_ms, 30 s, for completions that never come).
    """
    import logging

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    model = str(cached_tiny_model(cache_dir=tiny_cache_dir))
    tokenizer = AutoTokenizer.from_pretrained(model)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "Write about topic 0."}]}] * 2)
    args = _args(
        tmp_path,
        max_steps=1,
        per_device_train_batch_size=8,
        max_completion_length=3,
        temperature=4.0,
        learning_rate=1e-6,
        generation_kwargs={"suppress_tokens": _restricted(tokenizer, ("e", "a", "."))},
    )
    for group_size, warned in ((None, None), (8, "groups of 8"), (5, "groups of 3, 5")):
        pairwise = {"mode": "pairwise_group", "pairwise_group": {"group_size": group_size}}
        reward = Recording({**GENRM_SECTION, "reward": pairwise}, judge=ModeJudge(more_letters_wins("e")), name="pw")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="nemo_genrm.integrations.trl"):
            GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data).train()
        ((prompts, completions, out),) = reward.calls
        texts = [c[-1]["content"] for c in completions]
        assert len({p[-1]["content"] for p in prompts}) == 1 and len(texts) == 8
        expected = _expected_pairwise(texts, group_size or 4)
        if group_size == 5:
            expected[5:] = [None] * 3  # a short group: every completion of it masked
        assert out == pytest.approx(expected), texts
        assert (
            ("num_generations" in caplog.text and warned in caplog.text)
            if warned
            else "num_generations" not in caplog.text
        )
        assert reward.seconds[0] < 20.0  # no group waits group_wait_ms (30 s)


def _hand_advantages(judge: list, other: list, size: int) -> list[float]:
    """TRL's GRPO advantages (sum_then_normalize, scale_rewards 'group'), written out by hand.

    A completion's reward is the sum of its functions' rewards, ``None`` counting 0; a completion
    with every reward ``None`` is left out of its group's mean and standard deviation (Bessel's
    correction: divided by count - 1) and gets advantage 0. Others: (r - mean) / (std + 1e-4).
    """
    out = []
    for start in range(0, len(judge), size):
        rows = list(zip(judge[start : start + size], other[start : start + size], strict=True))
        scored = [sum(v for v in row if v is not None) for row in rows if any(v is not None for v in row)]
        if not scored:  # the whole group unscorable: no baseline, every advantage 0
            out += [0.0] * len(rows)
            continue
        mean = sum(scored) / len(scored)
        std = (sum((r - mean) ** 2 for r in scored) / (len(scored) - 1)) ** 0.5 if len(scored) > 1 else float("nan")
        for row in rows:
            if all(v is None for v in row):
                out.append(0.0)
            elif std != std:  # one scored completion: no spread, TRL's NaN advantage becomes 0
                out.append(0.0)
            else:
                out.append((sum(v for v in row if v is not None) - mean) / (std + 1e-4))
    return out


def test_a_failed_judge_beside_another_reward_and_the_masked_combination(tmp_path, tiny_cache_dir):
    """TRL's GRPOTrainer with the judge and a second reward function; TRL's own advantages.

    The stand-in judge fails (no verdict) on completions with "aa" and otherwise says 1 when the
    completion has an "e". Beside a plain second function, a failed judge's ``None`` counts 0 in
    TRL's sum: the completion is trained as a wrong answer. Through ``judge.masking``, the second
    function is ``None`` there too: the completion leaves its group's baseline, advantage 0.
    """
    import re

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from nemo_genrm.testing.integrity_judges import shown_responses

    def rule(text: str) -> str:
        (shown,) = shown_responses(text)
        return "maybe" if "aa" in shown else "1" if "e" in shown else "0"

    def starts_with_e(prompts, completions, **kwargs):
        return [1.0 if re.match(r"\s*e", c[-1]["content"]) else 0.0 for c in completions]

    model = str(cached_tiny_model(cache_dir=tiny_cache_dir))
    tokenizer = AutoTokenizer.from_pretrained(model)
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"Topic {k}?"}], "ground_truth": "e"} for k in range(4)]
    )
    args = _args(
        tmp_path,
        max_steps=2,
        max_completion_length=3,
        temperature=4.0,
        learning_rate=1e-6,
        generation_kwargs={"suppress_tokens": _restricted(tokenizer, ("e", "a"))},
    )
    trainer_cls = type("Trainer", (AdvantageRecording, GRPOTrainer), {})
    failed = 0
    for masked in (False, True):
        judge = Recording(GENRM_SECTION, judge=ModeJudge(rule), name="judge")
        other = judge.masking(starts_with_e) if masked else starts_with_e
        trainer = trainer_cls(model=model, reward_funcs=[judge, other], args=args, train_dataset=data)
        trainer.train()
        for (_, completions, judged), advantages in zip(judge.calls, trainer.recorded_advantages, strict=True):
            texts = [c[-1]["content"] for c in completions]
            assert judged == [None if "aa" in t else 1.0 if "e" in t else 0.0 for t in texts], texts
            others = [
                None if masked and j is None else float(bool(re.match(r"\s*e", t)))
                for t, j in zip(texts, judged, strict=True)
            ]
            assert advantages == pytest.approx(_hand_advantages(judged, others, 4), abs=1e-4), texts
            failed += judged.count(None)
    assert failed >= 2, "some completions must make the judge fail for this test to say anything"
