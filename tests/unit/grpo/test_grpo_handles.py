"""The driver's worker handles over in-process objects (the Ray side: tests/functional)."""

from __future__ import annotations

from types import SimpleNamespace

from nemo_genrm.grpo.handles import EnvHandle, PolicyHandle


class _Env:
    def __init__(self, metrics):
        self.calls = []
        self.metrics = metrics

    def step(self, message_logs, metadata):
        self.calls.append((message_logs, metadata))
        return SimpleNamespace(rewards=[1.0] * len(message_logs))

    def last_metrics(self):
        return self.metrics


class _BareEnv:
    """NeMo-RL's interface only: no ``last_metrics``."""

    def step(self, message_logs, metadata):
        return SimpleNamespace(rewards=[0.0] * len(message_logs))


def test_env_handle_calls_by_method_and_keeps_numeric_metrics():
    env = _Env({"genrm/mean_reward": 1, "genrm/note": "text", "genrm/rate": 0.5})
    handle = EnvHandle(env)
    assert handle.step([[{"role": "assistant", "content": "a"}]], [{"ground_truth": "a"}]).rewards == [1.0]
    assert env.calls == [([[{"role": "assistant", "content": "a"}]], [{"ground_truth": "a"}])]
    # Numbers only, as floats: what the loop logs.
    assert handle.last_metrics() == {"genrm/mean_reward": 1.0, "genrm/rate": 0.5}
    assert EnvHandle(_BareEnv()).last_metrics() == {}


def test_handles_wrap_once():
    policy = SimpleNamespace(generate=lambda prompts: [p.upper() for p in prompts])
    handle = PolicyHandle.of(policy)
    assert PolicyHandle.of(handle) is handle and handle.target is policy
    assert handle.generate(["a", "b"]) == ["A", "B"]


class _CountingEnv(_Env):
    """An environment with NeMo-RL's ``global_post_process_and_metrics``: metrics since the last ask."""

    def global_post_process_and_metrics(self, batch):
        calls, self.calls = self.calls, []
        return batch, {"env/steps": len(calls)}


def test_started_calls_and_the_metrics_of_every_step_since_the_last_ask():
    env = _CountingEnv({"genrm/mean_reward": 1})
    handle = EnvHandle(env)
    wait = handle.start_step([[{"role": "assistant", "content": "a"}]], [{}])  # in process: runs now
    assert len(env.calls) == 1 and wait().rewards == [1.0]
    handle.step([[{"role": "assistant", "content": "b"}]], [{}])
    assert handle.metrics_since_last() == {"env/steps": 2.0}  # both steps of a rollout
    assert handle.metrics_since_last() == {"env/steps": 0.0}
    # Without it, the last step's metrics.
    assert EnvHandle(_Env({"genrm/mean_reward": 1})).metrics_since_last() == {"genrm/mean_reward": 1.0}
    policy = PolicyHandle(SimpleNamespace(generate=lambda prompts: [p.upper() for p in prompts]))
    assert policy.start_generate(["a"])() == ["A"] and not policy.is_actor
