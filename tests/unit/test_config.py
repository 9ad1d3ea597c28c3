"""Configuration: NeMo-RL-style loading, overrides, and one-pass validation errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from nemo_genrm.config import (
    ConfigError,
    GenRMConfig,
    JudgeConfig,
    RewardBenchConfig,
    VerdictConfig,
    load_config,
    to_container,
    validate,
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def cfg_dir(tmp_path: Path) -> Path:
    _write(
        tmp_path / "base" / "grand.yaml",
        """
        a: {x: 1, y: 2}
        name: grand
        """,
    )
    _write(
        tmp_path / "base" / "parent.yaml",
        """
        defaults: grand.yaml          # relative to this file, not to the child
        a: {y: 20}
        b: [1, 2]
        """,
    )
    _write(
        tmp_path / "other.yaml",
        """
        a: {z: 3}
        name: other
        """,
    )
    _write(
        tmp_path / "child.yaml",
        """
        defaults:
          - base/parent.yaml
          - other.yaml
        a: {x: 100}
        derived: ${a.x}
        """,
    )
    return tmp_path


def test_defaults_inheritance_later_wins(cfg_dir: Path) -> None:
    cfg = to_container(load_config(cfg_dir / "child.yaml"))
    # grand gives x=1,y=2; parent sets y=20; other adds z=3 and name; the child sets x=100 last.
    assert cfg["a"] == {"x": 100, "y": 20, "z": 3}
    assert cfg["name"] == "other"  # the later default wins over the earlier one
    assert cfg["b"] == [1, 2]
    assert cfg["derived"] == 100  # interpolation resolved after the merge
    assert "defaults" not in cfg


def test_override_marker_replaces_a_mapping(tmp_path: Path) -> None:
    _write(tmp_path / "p.yaml", "sec: {keep: 1, drop: 2}\n")
    _write(tmp_path / "c.yaml", "defaults: p.yaml\nsec: {_override_: true, keep: 5}\n")
    assert to_container(load_config(tmp_path / "c.yaml"))["sec"] == {"keep": 5}


@pytest.mark.parametrize(
    "override, path, expected",
    [
        ("a.x=7", ("a", "x"), 7),  # change an existing key
        ("+a.new=hello", ("a", "new"), "hello"),  # '+' adds a key
        ("++a.y=9", ("a", "y"), 9),  # '++' replaces an existing key
        ("++a.w=[1,2]", ("a", "w"), [1, 2]),  # '++' adds a missing key, values are parsed
        ("name=null", ("name",), None),  # null clears a value
    ],
)
def test_overrides(cfg_dir: Path, override: str, path: tuple[str, ...], expected: object) -> None:
    cfg = to_container(load_config(cfg_dir / "child.yaml", [override]))
    node = cfg
    for part in path:
        node = node[part]
    assert node == expected


def test_delete_override(cfg_dir: Path) -> None:
    cfg = to_container(load_config(cfg_dir / "child.yaml", ["~b"]))
    assert "b" not in cfg


def test_interpolation_follows_overrides(cfg_dir: Path) -> None:
    cfg = to_container(load_config(cfg_dir / "child.yaml", ["a.x=5"]))
    assert cfg["derived"] == 5


def test_unknown_override_key_names_key_and_suggestion(cfg_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(cfg_dir / "child.yaml", ["a.xx=1", "nmae=3", "a.x=1"])
    message = str(info.value)
    # Both bad overrides are reported in one error; the good one is not.
    assert len(info.value.problems) == 2
    assert "'a.xx' does not exist" in message and "+a.xx=1" in message
    assert "did you mean 'name'" in message


def test_malformed_override_is_reported(cfg_dir: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be parsed"):
        load_config(cfg_dir / "child.yaml", ["a.x=[1"])


def test_missing_file_and_cycle(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    _write(tmp_path / "a.yaml", "defaults: b.yaml\n")
    _write(tmp_path / "b.yaml", "defaults: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.yaml")


def test_defaults_fill_every_section() -> None:
    cfg = validate(GenRMConfig, {"judge": {"model_name": "/ckpt"}})
    assert cfg.judge.backend == "dtensor"
    assert cfg.judge.sampling.temperature == 0.0
    assert cfg.judge.batching.max_tokens_per_batch == 32768
    assert cfg.judge.vllm.enable_prefix_caching is True
    assert cfg.prompt.answer.marker == "Answer:"
    assert cfg.verdict.on_parse_failure == "zero"
    assert cfg.reward.dedup is True
    assert cfg.resources.placement == "separate"
    assert cfg.fault_tolerance.max_restarts == 3
    assert cfg.judge.tokenizer_name == "/ckpt"


def test_all_structural_problems_reported_at_once() -> None:
    bad = {
        "judge": {"model_name": "m", "backend": "vlm", "sampling": {"temprature": 1.0}},
        "resources": {"gpu_fraction": 2.0},
        "rewrd": {},
    }
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, bad, prefix="env.genrm")
    problems = info.value.problems
    assert len(problems) == 4, problems
    text = str(info.value)
    assert "4 configuration problems" in text
    # the wrong literal names the choices and the value seen
    assert "env.genrm.judge.backend" in text and "'vlm'" in text and "'vllm'" in text
    # an unknown key gets its path and the closest valid name
    assert "env.genrm.judge.sampling.temprature: unknown key (did you mean 'temperature'?)" in text
    assert "env.genrm.rewrd: unknown key (did you mean 'reward'" in text
    # a bound names the value seen
    assert "env.genrm.resources.gpu_fraction" in text and "(got 2.0)" in text


def test_cross_field_problems_reported_together() -> None:
    bad = {
        "judge": {"model_name": "m", "dtensor": {"tensor_parallel_size": 2}},
        "reward": {"kind": "probability"},
        "verdict": {"parser": "choice"},
        "resources": {"gpus_per_replica": 3},
    }
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, bad, prefix="env.genrm")
    text = str(info.value)
    assert len(info.value.problems) == 3
    assert "verdict_from: logprobs" in text
    assert "strict or lenient" in text
    assert "not a multiple of the tensor parallel size (2)" in text


@pytest.mark.parametrize(
    "judge, fragment",
    [
        ({"backend": "http"}, "http.base_url is required"),  # http needs a server
        ({"max_model_len": 16, "sampling": {"max_new_tokens": 16}}, "must be smaller than"),
        ({"model_name": ""}, "model_name"),  # empty name
    ],
)
def test_judge_checks(judge: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        validate(JudgeConfig, {"model_name": "m", **judge})


@pytest.mark.parametrize(
    "verdict, fragment",
    [
        ({"positive": "1", "negative": "1"}, "labels are both '1'"),
        ({"choice_markers": ["[[A]]"]}, "need two non-empty strings"),
        ({"rating_min": 5, "rating_max": 5}, "must be below"),
        ({"synonyms": {"yes": ["y"]}}, "is not a label"),
        # the parser's rules hold for every parser: markers that overlap fail here, not later
        ({"parser": "lenient", "choice_markers": ["A", "AB"]}, "'A' and 'AB' overlap"),
        ({"positive": " 1"}, "without surrounding whitespace"),
    ],
)
def test_verdict_checks(verdict: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "verdict": verdict})


def test_colocated_vllm_fraction_check() -> None:
    bad = {
        "judge": {"model_name": "m", "backend": "vllm", "vllm": {"gpu_memory_utilization": 0.5}},
        "resources": {"placement": "colocated", "gpu_fraction": 0.3},
    }
    with pytest.raises(ConfigError, match="exceeds resources.gpu_fraction"):
        validate(GenRMConfig, bad)


def test_reward_bench_protocol_must_match_parser() -> None:
    ok = validate(RewardBenchConfig, {"judge": {"model_name": "m"}})
    assert ok.protocol == "pairwise" and ok.verdict.parser == "choice"
    with pytest.raises(ConfigError, match="needs verdict.parser: rating"):
        validate(RewardBenchConfig, {"judge": {"model_name": "m"}, "protocol": "rating"})


def test_missing_required_key() -> None:
    with pytest.raises(ConfigError, match="env.genrm.judge: required but missing"):
        validate(GenRMConfig, {}, prefix="env.genrm")


def test_validate_accepts_model_and_dictconfig(cfg_dir: Path) -> None:
    model = validate(GenRMConfig, {"judge": {"model_name": "m"}})
    assert validate(GenRMConfig, model) is model
    _write(cfg_dir / "g.yaml", "judge: {model_name: m, max_model_len: 123}\n")
    assert validate(GenRMConfig, load_config(cfg_dir / "g.yaml")).judge.max_model_len == 123


def test_rating_logprobs_needs_single_digit_labels() -> None:
    base = {
        "judge": {"model_name": "m", "verdict_from": "logprobs"},
        "protocol": "rating",
        "prompt": {"template": "rating"},
    }
    with pytest.raises(ConfigError, match="use judge.verdict_from: text, or a rating range within one digit"):
        validate(RewardBenchConfig, {**base, "verdict": {"parser": "rating"}})
    one_digit = validate(RewardBenchConfig, {**base, "verdict": {"parser": "rating", "rating_max": 9}})
    assert one_digit.verdict.rating_max == 9
    text = {**base, "judge": {"model_name": "m"}, "verdict": {"parser": "rating"}}
    assert validate(RewardBenchConfig, text).verdict.rating_max == 10


def test_both_orders_with_rating_rejected() -> None:
    data = {"judge": {"model_name": "m"}, "protocol": "rating", "verdict": {"parser": "rating"}, "both_orders": True}
    with pytest.raises(ConfigError, match="both_orders: true applies to protocol: pairwise only"):
        validate(RewardBenchConfig, data)


def test_tail_chars_zero_is_valid() -> None:
    cfg = validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"answer": {"tail_chars": 0}}})
    assert cfg.prompt.answer.tail_chars == 0
    with pytest.raises(ConfigError, match="tail_chars"):
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"answer": {"tail_chars": -1}}})


@pytest.mark.parametrize(
    "verdict, fragment",
    [
        ({"positive": "Yes", "negative": "yes"}, "labels are both 'Yes'"),
        ({"positive": "Yes", "negative": "YES"}, "labels are both 'Yes'"),
        ({"synonyms": {"1": ["Correct"], "0": ["correct "]}}, "would mean both"),
        ({"positive": "yes", "negative": "no", "synonyms": {"yes": ["NO"]}}, "would mean both"),
    ],
)
def test_labels_and_synonyms_compared_ignoring_case(verdict: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "verdict": {"parser": "lenient", **verdict}})


def test_environment_rejects_rewardbench_preset() -> None:
    with pytest.raises(ConfigError, match="prompt.preset 'rewardbench' is for RewardBench evaluation only"):
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"preset": "rewardbench"}})


def test_custom_template_checked_at_validation(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="does not exist") as info:
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(missing)}})
    assert str(missing) in str(info.value)
    bad = _write(tmp_path / "bad.yaml", "user: 'Q {question} R {reference} C {candidate} X {mystery}'\n")
    with pytest.raises(ConfigError, match="unknown field.*mystery"):
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(bad)}})
    good = _write(tmp_path / "good.yaml", "user: 'Q {question} R {reference} C {candidate}'\n")
    assert validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(good)}})
    pair = _write(tmp_path / "pair.yaml", "user: '{question} A {response_a} B {response_b}'\n")
    assert validate(RewardBenchConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(pair)}})
    with pytest.raises(ConfigError, match="unknown field"):
        validate(RewardBenchConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(good)}})
    with pytest.raises(ConfigError, match="does not exist"):
        validate(RewardBenchConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(missing)}})


def test_field_and_cross_field_problems_reported_in_one_pass() -> None:
    # Three problems at three depths: a bound (a field), a judge check (http needs a URL) and an
    # environment check (probability rewards need logprobs). Each check runs although the
    # others' sections are invalid, so one run lists all three.
    bad = {
        "judge": {"model_name": "m", "backend": "http", "sampling": {"temperature": -1}},
        "reward": {"kind": "probability"},
    }
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, bad, prefix="env.genrm")
    assert info.value.problems == [
        "env.genrm.judge.sampling.temperature: Input should be greater than or equal to 0 (got -1)",
        "env.genrm.judge: http.base_url is required when backend is 'http' (e.g. http://localhost:8000/v1)",
        "env.genrm: reward.kind 'probability' needs judge.verdict_from: logprobs (the probability of the "
        "positive label comes from one forward pass)",
    ]


def test_cross_field_checks_run_with_a_required_key_missing() -> None:
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, {"judge": {"backend": "http"}, "verdict": {"parser": "choice"}}, prefix="env.genrm")
    assert len(info.value.problems) == 3, info.value.problems
    assert info.value.problems[0] == "env.genrm.judge.model_name: required but missing; add it to the config"
    assert "env.genrm.judge: http.base_url is required" in info.value.problems[1]
    assert "needs strict or lenient" in info.value.problems[2]


def test_a_check_on_a_field_set_aside_is_not_reported() -> None:
    # max_model_len is invalid: the check comparing it with max_new_tokens would judge the
    # default that stands in for it, so only the field's own problem is reported.
    with pytest.raises(ConfigError) as info:
        validate(JudgeConfig, {"model_name": "m", "max_model_len": 8, "sampling": {"max_new_tokens": 9000}})
    assert len(info.value.problems) == 1 and "max_model_len" in info.value.problems[0]


def test_cross_field_checks_inside_lists_are_located() -> None:
    bad = {
        "judges": [{"model_name": "a", "sampling": {"top_p": 0}}, {"model_name": "b", "backend": "http"}],
        "votes": 0,
    }
    with pytest.raises(ConfigError) as info:
        validate(RewardBenchConfig, bad)
    problems = info.value.problems
    assert any(p.startswith("judges.0.sampling.top_p:") for p in problems), problems
    assert any(p.startswith("votes:") for p in problems), problems
    assert any(p.startswith("judges.1: http.base_url is required") for p in problems), problems


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"judge": {"model_name": "m", "sampling": {"max_new_tokens": True}}}, "judge.sampling.max_new_tokens"),
        ({"judge": {"model_name": "m", "max_model_len": False}}, "judge.max_model_len"),
        ({"judge": {"model_name": "m"}, "resources": {"num_replicas": True}}, "resources.num_replicas"),
        ({"judge": {"model_name": "m", "sampling": {"temperature": True}}}, "judge.sampling.temperature"),
    ],
)
def test_a_boolean_is_not_a_number(section: dict, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, section)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(f"{path}: must be a")  # an integer / a number
    assert "got the boolean" in info.value.problems[0]


def test_booleans_stay_booleans_and_numbers_numbers() -> None:
    cfg = validate(
        GenRMConfig, {"judge": {"model_name": "m", "vllm": {"enable_sleep_mode": True}}, "reward": {"dedup": False}}
    )
    assert cfg.judge.vllm.enable_sleep_mode is True and cfg.reward.dedup is False
    assert validate(JudgeConfig, {"model_name": "m", "sampling": {"temperature": 1}}).sampling.temperature == 1.0
    with pytest.raises(ValidationError, match="got the boolean"):
        JudgeConfig(model_name="m").sampling.max_new_tokens = True  # assignment is validated too


# ------------------------------------------------------------------ overrides and the schema
@pytest.fixture
def judge_yaml(tmp_path: Path) -> Path:
    """A RewardBench YAML that spells out neither judge.http nor judge.vllm."""
    return _write(tmp_path / "rb.yaml", "judge: {model_name: m, sampling: {max_new_tokens: 8}}\n")


def test_override_sets_a_schema_key_the_yaml_does_not_spell_out(judge_yaml: Path) -> None:
    overrides = ["judge.backend=http", "judge.http.base_url=http://127.0.0.1:9/v1", "judge.http.max_retries=0"]
    cfg = validate(RewardBenchConfig, load_config(judge_yaml, overrides, schema=RewardBenchConfig))
    assert cfg.judge.http.base_url == "http://127.0.0.1:9/v1" and cfg.judge.http.max_retries == 0
    # the schema's defaults are not written into the config: the section knows what was set
    assert cfg.judge.sampling.model_fields_set == {"max_new_tokens"}
    assert cfg.judge.http.model_fields_set == {"base_url", "max_retries"}


def test_without_the_schema_an_absent_key_needs_plus(judge_yaml: Path) -> None:
    with pytest.raises(ConfigError, match=r"write '\+judge.http.base_url=http://h/v1'"):
        load_config(judge_yaml, ["judge.http.base_url=http://h/v1"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # a typo in a section the schema defines: the closest keys, and no '+' advice
        ("judge.htp.base_url=x", "'judge.htp' does not exist (did you mean 'http'?); valid keys: backend,"),
        (
            "judge.sampling.temprature=1",
            "(did you mean 'temperature'?); valid keys: max_new_tokens, reasoning, seed, temperature, top_p",
        ),
        # a free-form section: its keys are the user's, so '+' adds one
        ("judge.vllm.extra_kwargs.enforce_eager=true", "write '+judge.vllm.extra_kwargs.enforce_eager=true' to add it"),
    ],
)
def test_override_of_a_key_no_one_defines_is_refused(judge_yaml: Path, override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(judge_yaml, [override], schema=RewardBenchConfig)
    assert len(info.value.problems) == 1
    assert message in info.value.problems[0]


def test_plus_forms_keep_nemo_rl_meaning_with_a_schema(judge_yaml: Path) -> None:
    added = [
        "+judge.vllm.extra_kwargs.enforce_eager=true",
        "+judge.http.timeout_s=5",
        "++judge.sampling.max_new_tokens=4",
    ]
    cfg = validate(RewardBenchConfig, load_config(judge_yaml, added, schema=RewardBenchConfig))
    assert cfg.judge.vllm.extra_kwargs == {"enforce_eager": True}
    assert cfg.judge.http.timeout_s == 5.0 and cfg.judge.sampling.max_new_tokens == 4
    with pytest.raises(ConfigError, match="already at 'judge.sampling.max_new_tokens'"):
        load_config(judge_yaml, ["+judge.sampling.max_new_tokens=4"], schema=RewardBenchConfig)


def test_entry_point_loaders_know_their_schema(tmp_path: Path) -> None:
    from nemo_genrm.grpo.config import load_grpo_config
    from nemo_genrm.serve import load_service_config

    grpo = Path(__file__).resolve().parents[2] / "examples" / "configs" / "grpo_genrm_tiny.yaml"
    cfg = load_grpo_config(grpo, ["env.genrm.judge.vllm.gpu_memory_utilization=0.2"])
    assert cfg.env.genrm.judge.vllm.gpu_memory_utilization == 0.2
    serve = _write(tmp_path / "s.yaml", "judge: {model_name: m}\n")
    assert load_service_config(serve, ["serve.port=8123"]).serve.port == 8123


def test_nemo_rl_engine_overrides_know_the_genrm_section_only(tmp_path: Path) -> None:
    from nemo_genrm.grpo.nemo_rl_engine import _OVERRIDE_SCHEMA

    path = _write(tmp_path / "nr.yaml", "grpo: {max_num_steps: 3}\nenv: {genrm: {judge: {model_name: m}}}\n")
    cfg = to_container(
        load_config(path, ["env.genrm.judge.http.timeout_s=5", "+grpo.extra=1"], schema=_OVERRIDE_SCHEMA)
    )
    assert cfg["env"]["genrm"]["judge"]["http"] == {"timeout_s": 5} and cfg["grpo"]["extra"] == 1
    with pytest.raises(ConfigError, match=r"write '\+grpo.extra=1'"):  # NeMo-RL's own sections: as NeMo-RL
        load_config(path, ["grpo.extra=1"], schema=_OVERRIDE_SCHEMA)


def test_pairwise_groups_are_refused_under_nemo_rls_async_grpo_and_must_fit_the_step_deadline(tmp_path: Path) -> None:
    from nemo_genrm.grpo.nemo_rl_engine import prepare_nemo_rl_inputs

    genrm = "{judge: {model_name: m, backend: http, http: {base_url: 'http://x/v1'}}, reward: {mode: pairwise_group}}"
    path = _write(tmp_path / "nr.yaml", f"grpo: {{async_grpo: {{enabled: true}}}}\nenv: {{genrm: {genrm}}}\n")
    with pytest.raises(ConfigError, match=r"asynchronous rollout path \(grpo\.async_grpo\.enabled\)"):
        prepare_nemo_rl_inputs(path, [])
    # Sync GRPO with an asynchronous vLLM engine takes NeMo-RL's per-sample rollout path too.
    engine = "policy: {generation: {backend: vllm, vllm_cfg: {async_engine: true}}}"
    path = _write(
        tmp_path / "nr2.yaml", f"grpo: {{async_grpo: {{enabled: false}}}}\n{engine}\nenv: {{genrm: {genrm}}}\n"
    )
    with pytest.raises(ConfigError, match=r"policy\.generation\.vllm_cfg\.async_engine"):
        prepare_nemo_rl_inputs(path, [])
    # A group's wait counts against its step's deadline.
    with pytest.raises(
        ConfigError, match=r"group_wait_ms \(700000\) must be shorter than fault_tolerance.step_timeout_s"
    ):
        validate(
            GenRMConfig,
            {
                "judge": {"model_name": "m"},
                "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 8, "group_wait_ms": 700_000}},
            },
        )


@pytest.mark.nemo_rl
def test_overrides_read_as_nemo_rl_reads_them(cfg_dir: Path) -> None:
    # Same file, same overrides: NeMo-RL's own parser gives the same config (keys the file has;
    # the schema only widens what key=value may set).
    from nemo_rl.utils.config import parse_hydra_overrides

    overrides = ["a.x=7", "+a.new=hello", "++a.y=9", "++a.w=[1,2]", "~b", "name=null"]
    ours = to_container(load_config(cfg_dir / "child.yaml", overrides))
    theirs = to_container(parse_hydra_overrides(load_config(cfg_dir / "child.yaml"), overrides))
    assert ours == theirs
    assert ours["a"] == {"x": 7, "y": 9, "z": 3, "new": "hello", "w": [1, 2]} and ours["derived"] == 7


# ------------------------------------------- problems that used to come one at a time
def test_a_synonym_conflict_is_reported_beside_the_other_verdict_problems():
    with pytest.raises(ConfigError) as info:
        validate(
            VerdictConfig,
            {"parser": "lenient", "rating_min": 5, "rating_max": 1, "synonyms": {"1": ["yes"], "0": ["yes"]}},
        )
    text = str(info.value)
    assert "rating_min (5) must be below" in text and "'yes' would mean both" in text


def test_every_bad_placeholder_and_unknown_field_of_a_template_at_once(tmp_path):
    template = tmp_path / "judge.txt"
    template.write_text("{0} then {x!r} then {unknown} and {candidate}")
    with pytest.raises(ConfigError) as info:
        validate(GenRMConfig, {"judge": {"model_name": "m"}, "prompt": {"template": str(template)}})
    text = str(info.value)
    assert "{0} is not a plain" in text and "{x!r} is not a plain" in text and "unknown field(s) unknown" in text


def test_a_bad_override_does_not_hide_the_configs_other_problems(tmp_path):
    from nemo_genrm.serve import load_service_config

    path = tmp_path / "service.yaml"
    path.write_text("judge:\n  model_name: m\n  max_model_len: -5\n")
    with pytest.raises(ConfigError) as info:
        load_service_config(str(path), ["serve.nope=1", "serve.port=8001"])
    assert len(info.value.problems) == 2
    assert "'serve.nope' does not exist" in info.value.problems[0]
    assert "judge.max_model_len" in info.value.problems[1]
