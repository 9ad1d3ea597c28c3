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
