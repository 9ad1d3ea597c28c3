"""A start-up failure kept by the actor body and raised typed from its calls; a tokenizer that
cannot load named by its setting. No Ray cluster: the actor body is a plain class."""

from __future__ import annotations

import pytest

from nemo_genrm.env.launch import keep_start_error
from nemo_genrm.errors import ConfigError, JudgeStartupError
from nemo_genrm.judges.fitting import load_tokenizer


class _Body:
    def __init__(self, fail: Exception | None):
        if fail is not None:
            raise fail
        self.closed = False

    def step(self, x: int) -> int:
        return x + 1

    def astep(self, x: int):  # a plain method returning an awaitable, as the environment's
        async def run() -> int:
            return x + 2

        return run()

    def shutdown(self) -> None:
        self.closed = True


Body = keep_start_error(type("Body", (_Body,), {}))


def test_a_started_body_runs_as_before():
    import asyncio

    body = Body(None)
    assert body.ready() is True and body.step(1) == 2 and asyncio.run(body.astep(1)) == 3
    body.shutdown()
    assert body.closed


@pytest.mark.parametrize(
    "error", [ConfigError(["judge.model_name: nothing there"]), JudgeStartupError(["rank 0: no GPU"])]
)
def test_a_failed_start_is_kept_and_raised_from_every_call_without_its_frames(error):
    body = Body(error)  # the constructor returns: a Ray actor does not die (and abort) here
    for call in (body.ready, lambda: body.step(1), lambda: body.astep(1)):
        with pytest.raises(type(error)) as raised:
            call()
        assert raised.value is error and raised.value.__cause__ is None and raised.value.__context__ is None
    assert body.shutdown() is None  # nothing was started: NeMo-RL's teardown may call it


def test_an_unexpected_start_failure_keeps_where_it_happened():
    body = Body(KeyError("boom"))
    with pytest.raises(KeyError) as raised:
        body.step(1)
    assert any(frame.name == "__init__" for frame in raised.traceback)


def test_a_tokenizer_folder_that_does_not_exist_names_the_setting(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_tokenizer(str(tmp_path / "my-judge"), setting="judge.model_name")
    assert raised.value.problems == [
        f"judge.model_name: no tokenizer could be loaded from '{tmp_path / 'my-judge'}': there is no such "
        "folder; give the judge checkpoint's folder or a model id on the hub"
    ]


def test_a_folder_without_a_tokenizer_names_the_setting(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a folder, but no tokenizer in it
    with pytest.raises(ConfigError) as raised:
        load_tokenizer(str(tmp_path))
    (line,) = raised.value.problems
    assert line.startswith(f"judge.tokenizer: no tokenizer could be loaded from '{tmp_path}': ")
    assert "give the judge checkpoint's folder" in line and "\n" not in line


def test_the_service_asks_the_cluster_for_its_replicas_gpus_before_starting_them(monkeypatch):
    import ray

    from nemo_genrm.serve.service import check_replica_gpus, load_service_config

    cfg = load_service_config(
        "examples/configs/serve_judge_tiny.yaml", ["serve.num_replicas=2", "serve.num_gpus_per_replica=1"]
    )
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 8.0, "GPU": 1.0})
    with pytest.raises(ConfigError) as raised:
        check_replica_gpus(cfg)
    assert raised.value.problems == [
        "the service's replicas need 2 GPUs (serve.num_replicas 2 x num_gpus_per_replica 1) but the Ray cluster "
        "has 1: lower serve.num_replicas or serve.num_gpus_per_replica, or add GPUs"
    ]
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 8.0, "GPU": 2.0})
    check_replica_gpus(cfg)  # enough: nothing raised
