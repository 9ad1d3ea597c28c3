"""The ``prompt.preset: rewardbench`` loader, against a synthetic ``rewardbench`` package.

The synthetic package uses the reference's variable names and layout (a system prompt bound to a
name and referenced from a dict, implicit string concatenation, an ``__init__`` that would fail
if imported) with made-up text, so the test checks that the source is read, never executed.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from nemo_genrm.config import ConfigError, RewardBenchConfig
from nemo_genrm.evals.reward_bench.data import RewardBenchExample
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator
from nemo_genrm.evals.reward_bench.preset import (
    load_rewardbench_preset,
    module_constant,
    reference_choice,
    reference_rating,
)
from nemo_genrm.judges.base import Generation
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

GENERATIVE = '''
import some_api_sdk_that_is_not_installed  # never imported by the loader

SYSTEM_PART = "Judge two replies. "
prompt_v2 = (
    "Pick the better reply. "
    "Say [[A]] or [[B]]."
)
MTBENCH_V2 = {
    "name": "pair-v2",
    "type": "pairwise",
    "system_prompt": SYSTEM_PART + prompt_v2,
    "prompt_template": "Q: {question}\\nA: {answer_a}\\nB: {answer_b}",
}
ratings_prompt = """Rate 1-10.
{prompt}
---
{completion}"""
computed = make_prompt()  # code, not a literal
'''


class _TextJudge(GenerateOnlyJudge):
    """An in-memory judge that answers every request with the same text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, batch):
        return [Generation(self.text) for _ in batch]


@pytest.fixture
def fake_rewardbench(tmp_path, monkeypatch) -> Path:
    """A `rewardbench` package on sys.path that raises if anything imports it."""
    package = tmp_path / "site" / "rewardbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "9.9.9"\nraise RuntimeError("imported!")\n')
    (package / "generative.py").write_text(textwrap.dedent(GENERATIVE))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "rewardbench", raising=False)
    return package


def test_pairwise_preset_read_from_source(fake_rewardbench: Path) -> None:
    preset = load_rewardbench_preset("pairwise")
    assert "rewardbench" not in sys.modules  # located, never imported
    # The version of the source read (its __init__, by ast), whatever rewardbench is installed.
    assert preset.version == "9.9.9"
    assert preset.source == str(fake_rewardbench / "generative.py")
    assert preset.template.name == "rewardbench:pair-v2"
    # The name-bound system prompt, the + and the implicit concatenation are all resolved.
    assert preset.template.system == "Judge two replies. Pick the better reply. Say [[A]] or [[B]]."
    messages = preset.template.render(question="q?", answer_a="one", answer_b="two")
    assert messages == [
        {"role": "system", "content": "Judge two replies. Pick the better reply. Say [[A]] or [[B]]."},
        {"role": "user", "content": "Q: q?\nA: one\nB: two"},
    ]
    digest = "sha256:" + hashlib.sha256((fake_rewardbench / "generative.py").read_bytes()).hexdigest()
    assert preset.describe() == {
        "preset": "rewardbench",
        "rewardbench_version": "9.9.9",
        "source": preset.source,
        "digest": digest,
    }


def test_rating_preset_is_a_single_user_message(fake_rewardbench: Path) -> None:
    preset = load_rewardbench_preset("rating")
    assert preset.template.system is None
    assert preset.template.render(prompt="p", completion="c") == [{"role": "user", "content": "Rate 1-10.\np\n---\nc"}]


def test_code_is_refused_not_run(fake_rewardbench: Path) -> None:
    with pytest.raises(ConfigError, match="unsupported expression"):
        module_constant(fake_rewardbench / "generative.py", "computed")
    with pytest.raises(ConfigError, match="defines no module-level 'missing'"):
        module_constant(fake_rewardbench / "generative.py", "missing")


def test_missing_package_says_how_to_install(tmp_path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rewardbench" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install --no-deps rewardbench"):
        load_rewardbench_preset("pairwise")


def test_wrong_fields_rejected(fake_rewardbench: Path) -> None:
    source = fake_rewardbench / "generative.py"
    source.write_text(source.read_text().replace("{answer_b}", "{answer_c}"))
    with pytest.raises(ConfigError, match="expected fields question, answer_a, answer_b"):
        load_rewardbench_preset("pairwise")


def test_reference_rule_for_both_markers() -> None:
    # The reference looks for [[A]] first: a reply with both markers counts as A.
    assert reference_choice("[[B]] no wait [[A]]") == "A"
    assert reference_choice("so [[B]]") == "B"
    assert reference_choice("neither") is None


def test_evaluator_uses_preset_prompt_and_records_version(fake_rewardbench: Path, tmp_path) -> None:
    cfg = RewardBenchConfig.model_validate(
        {"judge": {"model_name": "fake"}, "prompt": {"preset": "rewardbench"}, "output_dir": str(tmp_path / "o")}
    )
    example = RewardBenchExample(id=3, subset="hep-go", prompt="q?", chosen="good [[B]]", rejected="bad")
    evaluator = RewardBenchEvaluator(cfg)
    plan = evaluator.plan(example)
    (request,) = plan.requests
    a, b = ("good [[B]]", "bad") if plan.placement == "chosen_a" else ("bad", "good [[B]]")
    # Responses go in unchanged (no neutralising) as in the reference.
    assert request.messages[1]["content"] == f"Q: q?\nA: {a}\nB: {b}"
    outcome = evaluator.run([example], _TextJudge("both [[B]] and [[A]]"))
    assert outcome.summary["nemo_genrm"]["prompt"]["rewardbench_version"] == "9.9.9"
    assert outcome.summary["nemo_genrm"]["errors"] == 0  # the ambiguous reply resolved as the reference does: A
    assert outcome.scores.subsets["hep-go"].accuracy == (1.0 if a == "good [[B]]" else 0.0)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Good answer. 7", 7),
        ("so 10\n", 10),
        ("Rating: 3 of 10 ... final: 4", 4),
        ("I give it 7.", None),
        ("7/10 overall", None),
        ("score 11", None),
        ("score 0", None),
        ("x07", None),
        ("", None),
        (None, None),
    ],
)
def test_reference_rating_is_a_trailing_integer(reply: str | None, expected: int | None) -> None:
    assert reference_rating(reply) == expected


def test_rating_preset_uses_trailing_integer_rule(fake_rewardbench: Path, tmp_path) -> None:
    data = {
        "judge": {"model_name": "fake"},
        "prompt": {"preset": "rewardbench"},
        "protocol": "rating",
        "verdict": {"parser": "rating"},
        "output_dir": str(tmp_path / "o"),
    }
    evaluator = RewardBenchEvaluator(RewardBenchConfig.model_validate(data))
    example = RewardBenchExample(id=1, subset="hep-go", prompt="q?", chosen="good", rejected="bad")
    # The project's rating parser would read 8 here; the reference sees no trailing rating.
    outcome = evaluator.run([example], _TextJudge("8 points. Overall: fine."))
    assert outcome.scores.errors == 1
    record = outcome.summary["nemo_genrm"]
    assert record["errors"] == 1
