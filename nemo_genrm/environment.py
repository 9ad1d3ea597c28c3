"""The environment's public module path: ``nemo_genrm.environment.GenRMEnvironment``.

This is the actor class path NeMo-RL registers (:data:`nemo_genrm.integrations.nemo_rl.ACTOR_FQN`)
and users may name in their YAML or launchers; the code lives in :mod:`nemo_genrm.env.environment`.
"""

from __future__ import annotations

from nemo_genrm.env.environment import MAX_CONCURRENCY, GenRMEnvironment, GenRMEnvironmentImpl

__all__ = ["MAX_CONCURRENCY", "GenRMEnvironment", "GenRMEnvironmentImpl"]
