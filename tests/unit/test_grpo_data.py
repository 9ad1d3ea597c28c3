"""GRPO data: built-in set, file formats, field names, splits, prompts, the sampler, tiny:// names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nemo_genrm.config import ConfigError
from nemo_genrm.files.rows import read_rows
from nemo_genrm.grpo.config import DataConfig, GRPOMasterConfig, load_grpo_config
from nemo_genrm.grpo.data import (
    PolicyPromptRenderer,
    Prompt,
    PromptSampler,
    QAExample,
    builtin_arithmetic,
    load_splits,
)
from nemo_genrm.grpo.models import is_tiny, resolve_model_name

RECORDS = [{"q": f"What is {i} + 1?", "a": str(i + 1), "extra": i} for i in range(10)]


class _Tokenizer:
    """Just enough tokenizer for PolicyPromptRenderer: a visible chat template and whitespace tokens."""

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text, add_special_tokens):
        return {"input_ids": text.split()}


def test_builtin_arithmetic_is_deterministic_distinct_and_correct():
    a, b = builtin_arithmetic(50, seed=3), builtin_arithmetic(50, seed=3)
    assert a == b and len({e.question for e in a}) == 50
    assert builtin_arithmetic(50, seed=4) != a
    for e in a:
        x, op, y = e.question.removeprefix("What is ").removesuffix("?").split()
        assert int(e.answer) == {"+": int(x) + int(y), "-": int(x) - int(y), "*": int(x) * int(y)}[op]
        assert int(e.answer) >= 0  # subtraction keeps the larger operand first


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_files_are_read_with_configurable_fields(tmp_path, suffix):
    path = tmp_path / f"data{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    elif suffix == ".json":
        path.write_text(json.dumps(RECORDS))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(RECORDS), path)
    assert read_rows(path) == RECORDS
    cfg = DataConfig(train_data_path=str(path), input_key="q", output_key="a", val_fraction=0.2)
    splits = load_splits(cfg, seed=0)
    assert len(splits.train) == 8 and len(splits.val) == 2
    got = {(e.question, e.answer) for e in splits.train + splits.val}
    assert got == {(r["q"], r["a"]) for r in RECORDS}  # nothing lost, nothing duplicated


def test_a_separate_validation_file_is_used_as_is(tmp_path):
    train, val = tmp_path / "t.jsonl", tmp_path / "v.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:7]))
    val.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[7:]))
    cfg = DataConfig(train_data_path=str(train), val_data_path=str(val), input_key="q", output_key="a")
    splits = load_splits(cfg, seed=0)
    assert [e.answer for e in splits.train] == [r["a"] for r in RECORDS[:7]]
    assert [e.answer for e in splits.val] == [r["a"] for r in RECORDS[7:]]


def test_missing_fields_and_files_say_what_to_set(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "x", "solution": "y"}) + "\n")
    with pytest.raises(ConfigError, match=r"data.input_key.*prompt, solution"):
        load_splits(DataConfig(train_data_path=str(path)), seed=0)
    with pytest.raises(ConfigError, match="not found"):
        load_splits(DataConfig(train_data_path=str(tmp_path / "nope.jsonl")), seed=0)
    bad = tmp_path / "d.csv"
    bad.write_text("a,b\n")
    with pytest.raises(ConfigError, match="jsonl, .json or .parquet"):
        read_rows(bad)


def test_rows_without_a_usable_question_or_answer_are_dropped_with_a_count(tmp_path, caplog):
    rows = [
        {"q": "What is 1 + 1?", "a": "2"},
        {"q": "What is 2 + 2?", "a": None},  # a null reference must never be judged as "None"
        {"q": "What is 3 + 3?"},  # a later row missing a key (only row 0 was checked before)
        {"q": "  ", "a": "4"},
        {"a": "5"},
        {"q": "What is 0 + 0?", "a": 0},  # a falsy but real answer is kept
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = DataConfig(train_data_path=str(path), input_key="q", output_key="a", val_fraction=0.0)
    with caplog.at_level("WARNING", logger="nemo_genrm.grpo.data"):
        splits = load_splits(cfg, seed=0)
    assert sorted((e.question, e.answer) for e in splits.train) == [("What is 0 + 0?", "0"), ("What is 1 + 1?", "2")]
    assert "dropped 4 of 6 rows" in caplog.text
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[1:5]))
    with pytest.raises(ConfigError, match="none of the 4 rows"):
        load_splits(cfg, seed=0)


def test_hub_dataset_failure_is_a_config_error(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ConfigError, match="could not load hub dataset 'org/name'"):
        load_splits(DataConfig(dataset_name="org/name"), seed=0)


def test_hub_dataset_records_are_mapped(monkeypatch):
    import datasets

    seen = {}

    def fake(name, split):
        seen[split] = name
        return RECORDS[:4] if split == "train" else RECORDS[4:6]

    monkeypatch.setattr(datasets, "load_dataset", fake)
    cfg = DataConfig(dataset_name="org/qa", input_key="q", output_key="a", val_split="test")
    splits = load_splits(cfg, seed=0)
    assert seen == {"train": "org/qa", "test": "org/qa"}
    assert [e.answer for e in splits.val] == ["5", "6"] and len(splits.train) == 4


def test_prompt_is_chat_templated_and_metadata_keeps_the_raw_question():
    cfg = DataConfig(prompt="Q: {}", system_prompt="Be brief.")
    prompt = PolicyPromptRenderer(cfg, _Tokenizer())(QAExample("What is 2 + 2?", "4"))
    assert prompt.text == "<system>Be brief.<user>Q: What is 2 + 2?<assistant>"
    assert prompt.metadata == {"question": "What is 2 + 2?", "ground_truth": "4"}


def test_prompt_file_and_placeholder_check(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("Think, then answer.\n{}")
    prompt = PolicyPromptRenderer(DataConfig(prompt_file=str(path)), _Tokenizer())(QAExample("q?", "a"))
    assert prompt.text == "<user>Think, then answer.\nq?<assistant>"
    with pytest.raises(ConfigError, match="must contain"):
        PolicyPromptRenderer(DataConfig(prompt="no placeholder"), _Tokenizer())


def test_long_prompts_are_dropped():
    builder = PolicyPromptRenderer(DataConfig(prompt="{}"), _Tokenizer())
    examples = [QAExample("one two", "x"), QAExample("one two three four five six", "y")]
    kept = builder.render_all(examples, max_prompt_tokens=3)
    assert [p.ground_truth for p in kept] == ["x"]


def test_nemo_rl_engine_drops_long_prompts_at_load_instead_of_masking(caplog):
    # --engine nemo_rl renders with the same builder: an over-long prompt never reaches NeMo-RL
    # (no 4-token stub with loss_multiplier 0), and the kept rows hold the full templated text.
    from nemo_genrm.grpo.nemo_rl_data import TASK_NAME, _rows

    builder = PolicyPromptRenderer(DataConfig(prompt="{}"), _Tokenizer())
    examples = [QAExample("one two", "x"), QAExample("one two three four five six", "y")]
    with caplog.at_level("WARNING", logger="nemo_genrm.grpo.data"):
        rows = _rows(examples, builder, 3)
    assert rows == [{"text": "<user>one two<assistant>", "question": "one two", "answer": "x", "task_name": TASK_NAME}]
    assert "Dropped 1 of 2 prompts" in caplog.text


def _prompts(n: int) -> list[Prompt]:
    return [Prompt(text=f"p{i}", question=f"q{i}", ground_truth=str(i)) for i in range(n)]


def test_sampler_covers_each_epoch_and_stops_after_the_last():
    sampler = PromptSampler(_prompts(6), seed=1, shuffle=True, max_epochs=2)
    first = sampler.next_batch(3) + sampler.next_batch(3)
    assert sorted(p.ground_truth for p in first) == [str(i) for i in range(6)]
    second = sampler.next_batch(6)
    assert sorted(p.ground_truth for p in second) == [str(i) for i in range(6)]
    assert [p.ground_truth for p in second] != [p.ground_truth for p in first]  # reshuffled
    assert sampler.next_batch(1) is None


def test_sampler_resumes_where_it_stopped():
    a = PromptSampler(_prompts(7), seed=0, shuffle=True, max_epochs=5)
    a.next_batch(4)
    a.next_batch(4)  # crosses into epoch 1
    b = PromptSampler(_prompts(7), seed=0, shuffle=True, max_epochs=5)
    b.load_state_dict(a.state_dict())
    assert [p.text for p in a.next_batch(9)] == [p.text for p in b.next_batch(9)]


def test_tiny_names():
    assert is_tiny("tiny://policy") and not is_tiny("Qwen/Qwen2.5-1.5B-Instruct") and not is_tiny(None)
    assert resolve_model_name("/some/path") == "/some/path"
    for bad, match in [
        ("tiny://nonsense", "unknown tiny model"),
        ("tiny://policy?depth=3", "unknown tiny model field 'depth'"),
        ("tiny://policy?seed=x", "needs an integer"),
        ("tiny://fixed", "fixed answer"),
    ]:
        with pytest.raises(ConfigError, match=match):
            resolve_model_name(bad)


def test_tiny_names_a_package_above_offers(monkeypatch, tmp_path):
    # The demo offers its models as entry points of the installed package; the driver never imports it.
    from nemo_genrm.demo.models import cached_demo_judge, cached_demo_policy
    from nemo_genrm.grpo import models

    assert models._builder("demo-judge") is cached_demo_judge
    assert models._builder("demo-policy") is cached_demo_policy
    # A kind registered at run time comes first (here: the demo's name, pointed at a folder).
    monkeypatch.setattr(models, "_REGISTERED", {})
    models.register_tiny_model("demo-judge", lambda: tmp_path)
    assert resolve_model_name("tiny://demo-judge") == str(tmp_path)
    with pytest.raises(ConfigError, match="takes no fields"):
        resolve_model_name("tiny://demo-judge?seed=1")
    with pytest.raises(ConfigError, match="tiny://demo-judge"):
        resolve_model_name("tiny://other")  # the registered kinds are listed
    with pytest.raises(ValueError, match="built in"):
        models.register_tiny_model("policy", lambda: tmp_path)


def test_tiny_names_build_cached_models(tiny_cache_dir):
    policy = resolve_model_name("tiny://policy")
    assert resolve_model_name("tiny://policy") == policy  # cached, same folder
    assert resolve_model_name("tiny://judge") != policy  # other weights
    assert resolve_model_name("tiny://random?seed=0") == policy
    assert policy.startswith(tiny_cache_dir)


# ------------------------------------------------------------------------------------ config
def _minimal(**over) -> dict:
    cfg = {
        "policy": {"model_name": "tiny://policy"},
        "env": {"genrm": {"judge": {"model_name": "tiny://judge"}, "resources": {"gpus_per_replica": 0}}},
        "cluster": {"gpus_per_node": 0},
    }
    for dotted, value in over.items():
        node = cfg
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return cfg


def test_config_defaults_follow_nemo_rl():
    cfg = GRPOMasterConfig.model_validate(_minimal())
    assert cfg.grpo.normalize_rewards and cfg.grpo.use_leave_one_out_baseline
    assert (cfg.loss_fn.ratio_clip_min, cfg.loss_fn.ratio_clip_max) == (0.2, 0.2)
    assert cfg.loss_fn.token_level_loss and cfg.policy.optimizer.name == "torch.optim.AdamW"


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"policy__train_global_batch_size": 5}, "must divide the samples"),
        ({"policy__train_micro_batch_size": 3}, "train_micro_batch_size"),
        ({"grpo__num_generations_per_prompt": 1}, "num_generations_per_prompt >= 2"),
        ({"env__genrm__resources": {"gpus_per_replica": 1}}, "cluster.gpus_per_node is 0"),
        ({"env__genrm__resources": {"placement": "colocated"}}, "placement: separate"),
        ({"policy__generation": {"max_new_tokens": 600}}, "max_total_sequence_length"),
        (
            {"cluster__gpus_per_node": 1, "env__genrm__resources": {"placement": "colocated", "num_replicas": 2}},
            "colocated judge has 2 rank",
        ),
        ({"cluster__gpus_per_node": 1, "env__genrm__resources": {"gpus_per_replica": 1}}, "judge needs 1 GPU"),
        ({"grpo__num_prompt_per_step": 4}, "did you mean 'num_prompts_per_step'"),
    ],
)
def test_config_problems_are_explained(over, match):
    from nemo_genrm.config import validate

    with pytest.raises(ConfigError, match=match):
        validate(GRPOMasterConfig, _minimal(**over))


def test_load_grpo_config_applies_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(_minimal(grpo__max_num_steps=10)))  # JSON is YAML
    # NeMo-RL's override grammar: existing keys are set, new ones need "+".
    cfg = load_grpo_config(path, ["grpo.max_num_steps=3", "+data.system_prompt=hi"])
    assert cfg.grpo.max_num_steps == 3 and cfg.data.system_prompt == "hi"
    with pytest.raises(ConfigError, match="does not exist"):
        load_grpo_config(path, ["grpo.max_steps=3"])


# ------------------------------------------------------------------------------------ logger
def test_metrics_logger_writes_jsonl_and_restarts_cleanly_on_resume(tmp_path):
    from nemo_genrm.grpo.config import LoggerConfig
    from nemo_genrm.grpo.logger import MetricsLogger

    cfg = LoggerConfig(log_dir=str(tmp_path), tensorboard_enabled=False)
    first = MetricsLogger(cfg, run_config={"grpo": {"seed": 1}})
    first.begin(0)
    for step in (1, 2, 3):
        first.log({"train/reward_mean": step / 10, "genrm/judge_latency_s": float("nan"), "note": "x"}, step)
    first.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records[0] == {"step": 1, "train/reward_mean": 0.1, "genrm/judge_latency_s": None}  # NaN -> null
    assert json.loads((tmp_path / "config.json").read_text()) == {"grpo": {"seed": 1}}
    # A run resumed from step 2 drops the record of step 3 (it is run again) and appends.
    again = MetricsLogger(cfg)
    again.begin(2)
    again.log({"train/reward_mean": 0.9}, 3)
    again.close()
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    # A fresh run starts an empty file.
    fresh = MetricsLogger(cfg)
    fresh.begin(0)
    assert (tmp_path / "metrics.jsonl").read_text() == ""


# ---------------------------------------------------------------------- loop: resume, metrics
class _FakePolicy:
    """Generates a fixed response per prompt and trains by doing nothing (records the batch)."""

    def __init__(self):
        self.batches = []

    def generate(self, prompts, seed=None):
        from nemo_genrm.grpo.policy import GeneratedSample

        return [GeneratedSample([1, 2], [3, 4], f"r{i}", truncated=False) for i in range(len(prompts))]

    def train(self, batch):
        self.batches.append(batch)
        return {"loss": 0.0}


class _MaskingEnv:
    """Rewards ``[1, 0, 0, 0]`` repeating; the sample after each 1 is a masked parse failure."""

    def step(self, message_log_batch, metadata):
        from types import SimpleNamespace

        from nemo_genrm.samples.types import SampleResult

        n = len(message_log_batch)
        rewards = [1.0 if i % 4 == 0 else 0.0 for i in range(n)]
        results = [
            SampleResult("parse_failure", masked=True)
            if i % 4 == 1
            else SampleResult("judged", rewards[i], int(rewards[i]))
            for i in range(n)
        ]
        meta = [{**m, "genrm": r.metadata()} for m, r in zip(metadata, results, strict=True)]
        return SimpleNamespace(rewards=torch.tensor(rewards), metadata=meta, answers=None)


def _trainer(tmp_path, **over):
    from nemo_genrm.grpo.checkpoint import Checkpointer
    from nemo_genrm.grpo.logger import MetricsLogger
    from nemo_genrm.grpo.loop import GRPOTrainer

    settings = dict(
        grpo__num_prompts_per_step=2,
        grpo__num_generations_per_prompt=4,
        grpo__max_num_steps=1,
        grpo__val_at_start=False,
        grpo__val_batch_size=4,
        policy__train_global_batch_size=8,
        policy__train_micro_batch_size=8,
        logger__log_dir=str(tmp_path / "logs"),
        logger__tensorboard_enabled=False,
        logger__progress_bar=False,
        checkpointing__checkpoint_dir=str(tmp_path / "ckpt"),
    )
    cfg = GRPOMasterConfig.model_validate(_minimal(**{**settings, **over}))
    prompts = [Prompt(f"<q{i}>", f"q{i}", str(i)) for i in range(8)]
    return GRPOTrainer(
        cfg, _FakePolicy(), _MaskingEnv(), prompts, prompts, MetricsLogger(cfg.logger), Checkpointer(cfg.checkpointing)
    )


def test_resume_false_refuses_a_checkpoint_dir_of_another_run(tmp_path):
    trainer = _trainer(tmp_path, checkpointing__resume=False)
    (tmp_path / "ckpt" / "tmp_step_9").mkdir(parents=True)  # an interrupted save is no checkpoint
    assert trainer._resume() == (0, None)
    (tmp_path / "ckpt" / "step_7").mkdir()
    (tmp_path / "ckpt" / "step_7" / "trainer_state.json").write_text("{}")
    match = r"already holds checkpoints of steps \[7\].*new checkpointing.checkpoint_dir"
    with pytest.raises(ConfigError, match=match):
        trainer.fit()
    trainer.metrics.close()


def test_reward_means_leave_out_masked_samples(tmp_path):
    trainer = _trainer(tmp_path, checkpointing__enabled=False)
    metrics = trainer.train_step(trainer.val_prompts[:2])
    # 8 samples: rewards [1, 0m, 0, 0] x 2 -> 2 masked; the 6 that count hold two 1s -> 1/3
    # (all 8 would give 1/4).
    assert metrics["train/reward_mean"] == pytest.approx(1 / 3)
    assert metrics["train/masked_samples"] == 2.0
    assert trainer.policy.batches[0].advantages[1] == 0.0  # a masked sample gets no advantage
    val = trainer.validate(step=1)
    assert val["val/reward_mean"] == pytest.approx(1 / 3) and val["val/masked_samples"] == 2.0
    assert val["val/num_samples"] == 8.0
    trainer.metrics.close()


class _SavingPolicy(_FakePolicy):
    """Writes the number of updates it has had into each checkpoint (its "weights")."""

    def save_checkpoint(self, path):
        (Path(path) / "updates.txt").write_text(str(len(self.batches)))

    def load_checkpoint(self, path):
        self.batches = [None] * int((Path(path) / "updates.txt").read_text())


def _scripted(trainer, rewards):
    """Validation returns the scripted held-out reward of each step (exact match: reward / 2)."""

    def validate(step):
        return {"val/reward_mean": rewards[step], "val/exact_match": rewards[step] / 2}

    trainer.validate = validate
    return trainer


def test_the_policy_of_the_best_held_out_reward_is_kept_and_reported(tmp_path):
    over = dict(grpo__val_at_start=True, grpo__val_period=1, checkpointing__save_period=10)
    trainer = _trainer(tmp_path, grpo__max_num_steps=4, **over)
    trainer.policy = _SavingPolicy()
    trainer._policy = type(trainer._policy).of(trainer.policy)
    # Step 1 is the best; step 3 only equals it (the earlier is kept); the final step 4 is lower.
    summary = _scripted(trainer, {0: 0.5, 1: 0.7, 2: 0.6, 3: 0.7, 4: 0.65}).fit()
    trainer.metrics.close()
    best = tmp_path / "ckpt" / "best"
    assert summary.best_step == 1 and not summary.final_is_best
    assert summary.best_checkpoint == str(best)
    assert (best / "updates.txt").read_text() == "1"  # the policy after one update, not the final one
    assert json.loads((best / "trainer_state.json").read_text()) == {
        "step": 1,
        "val_reward": 0.7,
        "val_exact_match": 0.35,
    }
    assert f"  best validation    step 1 (reward 0.700, exact match 0.350): {best}" in summary.lines()
    assert (tmp_path / "ckpt" / "step_4").is_dir() and not (tmp_path / "ckpt" / "step_best").exists()

    # A resumed run knows the best of the run it continues, and replaces it when beaten.
    resumed = _trainer(tmp_path, grpo__max_num_steps=6, checkpointing__resume=True, **over)
    resumed.policy = _SavingPolicy()
    resumed._policy = type(resumed._policy).of(resumed.policy)
    summary = _scripted(resumed, {5: 0.69, 6: 0.71}).fit()
    resumed.metrics.close()
    assert summary.best_step == 6 and summary.final_is_best
    assert (best / "updates.txt").read_text() == "6"
    assert not any("best validation" in line for line in summary.lines())


def test_a_fresh_run_removes_a_best_checkpoint_left_by_another(tmp_path):
    (tmp_path / "ckpt" / "best").mkdir(parents=True)
    trainer = _trainer(tmp_path, grpo__val_period=1, checkpointing__keep_best=False)
    trainer.policy = _SavingPolicy()
    trainer._policy = type(trainer._policy).of(trainer.policy)
    summary = _scripted(trainer, {1: 0.5}).fit()
    trainer.metrics.close()
    assert not (tmp_path / "ckpt" / "best").exists()
    assert summary.best_step == 1 and summary.best_checkpoint is None  # tracked, not saved
