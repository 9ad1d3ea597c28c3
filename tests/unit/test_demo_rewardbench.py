"""The demo judge's RewardBench-style pairs: the judge sees exactly the environment's prompt."""

from __future__ import annotations

from nemo_genrm.config import PromptConfig, RewardBenchConfig, VerdictConfig
from nemo_genrm.demo.judge import DEMO_TEMPLATE
from nemo_genrm.demo.rewardbench import DEMO_SUBSET, RATING_NONCE, demo_pairwise_examples, demo_rating_config
from nemo_genrm.demo.task import exact_match
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator
from nemo_genrm.prompts import PromptBuilder, load_template, template_labels_from_config


def _question_and_reference(prompt: str) -> tuple[str, str]:
    user = load_template(DEMO_TEMPLATE, labels=template_labels_from_config(VerdictConfig())).user
    joiner = user[user.index("{question}") + len("{question}") : user.index("{reference}")]
    question, reference = prompt.split(joiner)
    return question, reference


def test_rating_requests_are_the_environments_consistency_prompts(tmp_path) -> None:
    cfg = RewardBenchConfig.model_validate(demo_rating_config(tmp_path / "judge", tmp_path / "out"))
    evaluator = RewardBenchEvaluator(cfg)
    builder = PromptBuilder(PromptConfig(template=DEMO_TEMPLATE), VerdictConfig())
    examples = demo_pairwise_examples(150, seed=3)
    assert [e.id for e in examples] == list(range(150))
    for example in examples:
        question, reference = _question_and_reference(example.prompt)
        plan = evaluator.builder.plan(example)
        assert len(plan.requests) == 2  # rating: chosen, then rejected
        for request, response in zip(plan.requests, (example.chosen, example.rejected), strict=True):
            want = builder.build(
                question=question, reference=reference, candidate=response, nonce=RATING_NONCE
            ).messages
            assert list(request.messages) == list(want), example


def test_pairs_hold_a_right_and_a_wrong_answer() -> None:
    examples = demo_pairwise_examples(200, seed=4)
    assert {e.subset for e in examples} == {DEMO_SUBSET}
    builder = PromptBuilder(PromptConfig(template=DEMO_TEMPLATE), VerdictConfig())
    for example in examples:
        assert builder.extract(example.chosen).text == example.chosen  # already cut out
        assert example.chosen != example.rejected
    # Bare answers are among them, so the checker agrees on those: right chosen, wrong rejected.
    bare = [e for e in examples if e.chosen.isdigit() and e.rejected.isdigit()]
    assert len(bare) >= 20
    assert all(exact_match(e.chosen, _question_and_reference(e.prompt)[1]) for e in bare)
    assert not any(exact_match(e.rejected, _question_and_reference(e.prompt)[1]) for e in bare)
