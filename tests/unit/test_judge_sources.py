"""What the driver checks of the judges before the environment's actor exists (``preflight``):
judge folders and the judge's engine, every problem at once. No Ray cluster is needed for these
(``preflight`` checks the layout only when Ray is connected)."""

from __future__ import annotations

import importlib.util

import pytest

from nemo_genrm.config import GenRMConfig, validate
from nemo_genrm.env.launch import preflight
from nemo_genrm.env.startup import check_judge_sources
from nemo_genrm.errors import ConfigError


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_cache_dir):
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_tokenizer

    return {
        "judge": str(cached_tiny_judge("1", cache_dir=tiny_cache_dir)),
        "tokenizer": str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir)),  # no config.json
        "missing": str(tmp_path_factory.mktemp("gone") / "judge"),
    }


def _cfg(**judge) -> GenRMConfig:
    return validate(GenRMConfig, {"judge": judge, "resources": {"gpus_per_replica": 0}})


@pytest.mark.parametrize(
    ("judge", "expected"),
    [
        # A checkpoint folder: nothing to say.
        ({"model_name": "{judge}"}, []),
        # A hub id is the engine's to resolve (the tokenizer load checks it in preflight).
        ({"model_name": "Qwen/Qwen2.5-7B-Instruct", "tokenizer": "{tokenizer}"}, []),
        # A tokenizer's folder given as the model: loads as a tokenizer, fails as a model.
        ({"model_name": "{tokenizer}"}, ["judge.model_name: no model could be loaded", "has no config.json"]),
        # A missing model folder the tokenizer load would not see (judge.tokenizer is set).
        ({"model_name": "{missing}", "tokenizer": "{tokenizer}"}, ["judge.model_name", "there is no such folder"]),
        # Over HTTP the model name is the server's: not a folder.
        ({"backend": "http", "model_name": "{missing}", "http": {"base_url": "http://127.0.0.1:9/v1"}}, []),
    ],
)
def test_check_judge_sources(folders, judge, expected):
    judge = {k: v.format(**folders) if isinstance(v, str) else v for k, v in judge.items()}
    if not expected:
        check_judge_sources(_cfg(**judge))
        return
    with pytest.raises(ConfigError) as info:
        check_judge_sources(_cfg(**judge))
    for text in expected:
        assert text in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_is_named(folders):
    with pytest.raises(
        ConfigError, match=r"judge.backend is 'vllm', but vLLM is not installed for .*nemo-genrm\[vllm\]"
    ):
        check_judge_sources(_cfg(model_name=folders["judge"], backend="vllm"))


def test_preflight_reports_the_missing_folder_with_the_tokenizer_loads_words(folders, monkeypatch):
    # No Ray here: preflight connects only to check the layout, which this test leaves out.
    monkeypatch.setattr("nemo_genrm.env.launch.ensure_ray", lambda: False)
    with pytest.raises(ConfigError) as info:
        preflight(_cfg(model_name=folders["missing"], precision="float32"))
    assert info.value.problems == [
        f"judge.model_name: no tokenizer could be loaded from '{folders['missing']}': there is no such folder; "
        "give the judge checkpoint's folder or a model id on the hub"
    ]
