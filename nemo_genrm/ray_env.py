"""The former path of :mod:`nemo_genrm.ray_runtime`, kept for code that imports it.

The module was renamed because "env" means the GenRM environment everywhere else in the package;
it holds Ray's runtime environments (``runtime_env``) and actor options. New code imports
:mod:`nemo_genrm.ray_runtime`.
"""

from nemo_genrm.ray_runtime import (
    actor_options,
    actor_runtime_env,
    ensure_ray,
    job_runtime_env,
    job_uses_uv_run,
    prepare_job_environment,
)

__all__ = [
    "actor_options",
    "actor_runtime_env",
    "ensure_ray",
    "job_runtime_env",
    "job_uses_uv_run",
    "prepare_job_environment",
]
