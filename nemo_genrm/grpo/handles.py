"""The driver's handles on its two workers, the policy and the environment.

The GRPO loop runs the same with in-process workers (the tests' rule-based environments, fake
policies) and with Ray actors (the driver). A handle decides which once, when it is made, and
offers the worker's methods by name: ``policy.generate(texts)``, ``env.step(logs, metadata)``;
an actor's call waits for its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import ray

from nemo_genrm.grpo.policy import GeneratedSample, TrainBatch
from nemo_genrm.samples.types import EnvironmentReturn

__all__ = ["EnvHandle", "PolicyHandle"]

_Handle = TypeVar("_Handle", bound="_WorkerHandle")


class _WorkerHandle:
    """A plain object or a Ray actor handle, called the same way."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._is_actor = isinstance(target, ray.actor.ActorHandle)

    @classmethod
    def of(cls: type[_Handle], target: Any) -> _Handle:
        """``target`` itself when it is already such a handle, else a handle on it."""
        return target if isinstance(target, cls) else cls(target)

    def _run(self, method: Callable[..., Any], *args: Any) -> Any:
        """Call a method of the target (an actor's method remotely, waiting for its result)."""
        return ray.get(method.remote(*args)) if self._is_actor else method(*args)  # type: ignore[attr-defined]

    def _start(self, method: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """Start a call; returns a function that waits for its result. An actor works on it
        meanwhile; an in-process target runs it now."""
        if self._is_actor:
            ref = method.remote(*args)  # type: ignore[attr-defined]
            return lambda: ray.get(ref)
        value = method(*args)
        return lambda: value

    @property
    def is_actor(self) -> bool:
        """Whether the target is a Ray actor (its calls run while the driver goes on)."""
        return self._is_actor


class PolicyHandle(_WorkerHandle):
    """The policy: a :class:`~nemo_genrm.grpo.policy.PolicyWorker` or its actor."""

    def generate(self, prompts: list[str], seed: int | None = None) -> list[GeneratedSample]:
        """Sample one response per prompt text (``seed``: from a generator of its own)."""
        if seed is None:
            return self._run(self.target.generate, prompts)
        return self._run(self.target.generate, prompts, seed)

    def start_generate(self, prompts: list[str]) -> Callable[[], list[GeneratedSample]]:
        """Start sampling one response per prompt text; returns a function that waits for them."""
        return self._start(self.target.generate, prompts)

    def train(self, batch: TrainBatch) -> dict[str, float]:
        """One policy update over ``batch``; its training metrics."""
        return self._run(self.target.train, batch)

    def save_checkpoint(self, path: str) -> None:
        """Write the policy's weights and optimizer state into ``path``."""
        self._run(self.target.save_checkpoint, path)

    def load_checkpoint(self, path: str) -> None:
        """Restore the policy from ``path``."""
        self._run(self.target.load_checkpoint, path)


class EnvHandle(_WorkerHandle):
    """The environment: anything with NeMo-RL's ``step`` (this package's, or a test's), or its actor."""

    def __init__(self, target: Any) -> None:
        super().__init__(target)
        try:
            self._last_metrics = target.last_metrics  # optional: NeMo-RL's interface has no such method
        except AttributeError:
            self._last_metrics = None
        self._since_last = getattr(target, "global_post_process_and_metrics", None)
        try:
            self._watchdog_stop = target.watchdog_stop  # this package's environment only
        except AttributeError:
            self._watchdog_stop = None

    def step(self, message_logs: Sequence[Any], metadata: Sequence[Any]) -> EnvironmentReturn:
        """Score a batch of conversations (NeMo-RL's ``step``)."""
        return self._run(self.target.step, message_logs, metadata)

    def start_step(self, message_logs: Sequence[Any], metadata: Sequence[Any]) -> Callable[[], EnvironmentReturn]:
        """Start scoring a batch; returns a function that waits for its :class:`EnvironmentReturn`."""
        return self._start(self.target.step, message_logs, metadata)

    def last_metrics(self) -> dict[str, float]:
        """The numeric metrics of the environment's last judge call; ``{}`` when it keeps none."""
        if self._last_metrics is None:
            return {}
        metrics = self._run(self._last_metrics)
        return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}

    def metrics_since_last(self) -> dict[str, float]:
        """The numeric metrics of every ``step`` since this was last asked (NeMo-RL's
        ``global_post_process_and_metrics``), so a rollout that called ``step`` several times is
        counted whole; :meth:`last_metrics` for an environment without it."""
        if self._since_last is None:
            return self.last_metrics()
        _, metrics = self._run(self._since_last, None)
        return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}

    def watchdog_stop(self) -> BaseException | None:
        """The environment's :class:`~nemo_genrm.errors.RewardHackingSuspected` once its watchdog
        fired under ``reward.watchdog.action: stop``; ``None`` before, or for an environment without one."""
        return None if self._watchdog_stop is None else self._run(self._watchdog_stop)
