"""The one reader of local data files (nemo_genrm.files.rows), for GRPO data and RewardBench."""

from __future__ import annotations

import json

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.evals import RewardBenchDataError
from nemo_genrm.files.rows import read_hub_rows, read_rows

ROWS = [{"q": "1 + 1?", "a": "2"}, {"q": "2 + 2?", "a": "4"}]


def test_a_json_object_of_column_lists_is_rows(tmp_path):
    # {"q": [...], "a": [...]} is the same table as a list of row objects.
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"q": ["1 + 1?", "2 + 2?"], "a": ["2", "4"]}))
    assert read_rows(path) == ROWS


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        # A broken line is named by its number.
        ("d.jsonl", '{"q": 1}\n{"q": \n', "line 2 is not valid JSON"),
        # A line that is JSON but not an object is no row.
        ("d.jsonl", '{"q": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
        # Column lists must line up.
        ("d.json", '{"q": ["x", "y"], "a": ["z"]}', "column lists differ in length"),
        # A list must hold row objects.
        ("d.json", '[{"q": 1}, 2]', "one object per row"),
        # Neither rows nor columns.
        ("d.json", '"text"', "expected a list of row objects"),
    ],
)
def test_content_that_is_not_rows_is_refused(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        read_rows(path)


def test_each_caller_keeps_its_error_type_and_key(tmp_path):
    # Training data reports a ConfigError, RewardBench its own data error; both name the key.
    missing = tmp_path / "none.jsonl"
    with pytest.raises(ConfigError, match="data.train_data_path: data file .* not found"):
        read_rows(missing, setting="data.train_data_path")
    with pytest.raises(RewardBenchDataError, match="data.path: data file .* does not exist"):
        read_rows(missing, error=RewardBenchDataError)


def test_a_hub_failure_ends_with_the_callers_hint(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RewardBenchDataError, match=r"'org/x' split 'test': ConnectionError: no network; use a file"):
        read_hub_rows("org/x", "test", hint="use a file", error=RewardBenchDataError)
