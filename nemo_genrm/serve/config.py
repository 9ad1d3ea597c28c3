"""The judge service's config: the ``judge:`` engine and the ``serve:`` section.

Read by :mod:`nemo_genrm.serve` (which starts the service) and by the Ray Serve application in
:mod:`nemo_genrm.serve.app`; see ``docs/serving.md``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from nemo_genrm.config import JudgeConfig, StrictModel
from nemo_genrm.config.labels import selector_problems
from nemo_genrm.config.loading import report_problems

__all__ = ["ServeConfig", "ServiceConfig", "deployment_name"]


class ServeConfig(StrictModel):
    """The ``serve:`` section: where the service listens and how it batches."""

    host: str = Field(
        "127.0.0.1",
        description="Address the HTTP proxy binds; 0.0.0.0 exposes it (then an API key is required).",
    )
    port: int = Field(8000, ge=1, le=65535, description="HTTP port clients connect to (the service's edge).")
    proxy_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=(
            "Port of Ray Serve's own HTTP proxy, on 127.0.0.1 of each proxy node, behind the edge "
            "on serve.port (its /-/ routes never leave the machine). null: a free port, chosen once per cluster."
        ),
    )
    header_timeout_s: float = Field(
        10.0, gt=0.0, description="Longest time a request's line and headers may take to arrive (else 408, closed)."
    )
    app_name: str = Field("genrm-judge", min_length=1, description="Ray Serve application name.")
    route_prefix: str = Field(
        "/",
        pattern=r"^/",
        description="URL prefix of this service; several judges can share one port.",
    )
    served_model_name: str | None = Field(
        None, description="Name clients send as `model`; defaults to judge.model_name."
    )
    num_replicas: int = Field(1, ge=1, description="Serve replicas, each with its own engine.")
    max_ongoing_requests: int = Field(
        64,
        ge=1,
        description="Requests one replica runs in its engine at once; taken only once a request's body is in and checked.",
    )
    max_open_requests: int = Field(
        1024,
        ge=1,
        description="Requests one replica holds open at once, bodies still arriving included (Ray Serve's limit).",
    )
    max_requests_per_key: int = Field(
        128,
        ge=1,
        description=(
            "Open requests each client (its API key and address) may always hold per replica; a client may "
            "hold more, up to max_open_requests shared among the clients holding requests. Past its share, 429."
        ),
    )
    max_batch_size: int = Field(32, ge=1, description="Requests merged into one engine call.")
    batch_wait_timeout_s: float = Field(0.01, ge=0.0, description="How long a batch waits to fill before it runs.")
    num_cpus_per_replica: float = Field(1.0, gt=0.0, description="CPUs reserved per replica.")
    num_gpus_per_replica: float = Field(
        0.0,
        ge=0.0,
        description="GPUs per replica (0 on CPU, or when the engine starts its own workers).",
    )
    startup_timeout_s: float = Field(600.0, gt=0.0, description="Longest wait for /health at start.")
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding the API key clients must send as a Bearer token.",
    )
    api_key_file: str | None = Field(None, description="File whose first line is the API key (instead of api_key_env).")
    require_api_key: bool | None = Field(
        None,
        description=(
            "null: a key is required when host is not a loopback address; true: always; "
            "false: never (an exposed service without authentication)."
        ),
    )
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="Largest request body; larger ones get 413.")
    body_timeout_s: float = Field(
        10.0, gt=0.0, description="Longest time a request body may take to arrive (else 408)."
    )
    max_json_depth: int = Field(32, ge=4, description="Deepest nesting of a request's JSON (else 400).")
    health_probe_interval_s: float = Field(
        10.0,
        gt=0.0,
        description="/health probes the engine with a one-line request when idle this long.",
    )
    proxy_location: Literal["EveryNode", "HeadOnly"] = Field(
        "EveryNode",
        description=(
            "Where Ray Serve runs its HTTP proxy (one port, serve.port, per node): EveryNode, so a "
            "load balancer can spread clients over the nodes and a lost node takes only its own "
            "proxy; HeadOnly, one proxy on the head node (one address to point trainers at)."
        ),
    )
    max_replicas_per_node: int | None = Field(
        None,
        ge=1,
        description="At most this many replicas on one node (1: every replica on a node of its own).",
    )
    node_labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Ray label selector each replica's node must match (nodes started with `ray start "
            "--labels genrm-role=judge`), e.g. {genrm-role: judge}."
        ),
    )
    custom_resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources each replica reserves (nodes started with `ray start --resources`).",
    )
    health_check_period_s: float = Field(
        10.0,
        gt=0.0,
        description=(
            "How often Ray Serve checks each replica; a replica that fails its check (or is lost "
            "with its node) is replaced, and /health reports degraded until it is back."
        ),
    )
    health_check_timeout_s: float = Field(
        30.0, gt=0.0, description="A replica's health check taking longer than this fails it."
    )
    engine_in_replica: bool | None = Field(
        None,
        description=(
            "Run the engine inside the replica process (dtensor with tensor_parallel_size 1 only; "
            "reserve its GPU with num_gpus_per_replica). false: the engine starts its own Ray "
            "workers (any backend). null: in the replica when possible."
        ),
    )


class ServiceConfig(StrictModel):
    """A judge service config: the engine and how it is served."""

    judge: JudgeConfig
    serve: ServeConfig = Field(default_factory=ServeConfig)

    @property
    def model_id(self) -> str:
        """The model name clients use."""
        return self.serve.served_model_name or self.judge.model_name

    @property
    def in_replica(self) -> bool:
        """Whether replicas run the engine in their own process (``engine_in_replica`` resolved)."""
        possible = self.judge.backend == "dtensor" and self.judge.tensor_parallel_size == 1
        return possible if self.serve.engine_in_replica is None else self.serve.engine_in_replica

    @property
    def api_key_required(self) -> bool:
        """Whether clients must send the API key (``require_api_key`` resolved)."""
        from nemo_genrm.serve.guard import is_loopback

        required = self.serve.require_api_key
        return not is_loopback(self.serve.host) if required is None else required

    @model_validator(mode="after")
    def _check(self) -> ServiceConfig:
        problems = []
        if self.serve.engine_in_replica and not (
            self.judge.backend == "dtensor" and self.judge.tensor_parallel_size == 1
        ):
            problems.append(
                "serve.engine_in_replica: true needs judge.backend dtensor with "
                f"tensor_parallel_size 1 (got {self.judge.backend}, tp "
                f"{self.judge.tensor_parallel_size}); set "
                "engine_in_replica: false or null so the engine starts its own workers"
            )
        problems += selector_problems(self.serve.node_labels, "serve.node_labels")
        problems += [
            f"serve.custom_resources.{name}: must be > 0 and not one of Ray's own resources (CPU, GPU: "
            "use num_cpus_per_replica / num_gpus_per_replica)"
            for name, amount in self.serve.custom_resources.items()
            if not amount > 0 or name in ("CPU", "GPU", "memory", "object_store_memory")
        ]
        has_key = bool(self.serve.api_key_env or self.serve.api_key_file)
        if self.serve.api_key_env and self.serve.api_key_file:
            problems.append("serve.api_key_env and serve.api_key_file are both set: keep one")
        if self.serve.max_ongoing_requests > self.serve.max_open_requests:
            problems.append(
                f"serve.max_ongoing_requests ({self.serve.max_ongoing_requests}) cannot exceed "
                f"serve.max_open_requests ({self.serve.max_open_requests}): a request is open before it runs"
            )
        if self.api_key_required and not has_key:
            problems.append(
                f"serve.host {self.serve.host!r} is reachable from other machines, so the service "
                "needs an API key: set serve.api_key_env (an environment variable holding it) or "
                "serve.api_key_file, or serve.require_api_key: false to serve without "
                "authentication"
                if self.serve.require_api_key is None
                else "serve.require_api_key is true: set serve.api_key_env or serve.api_key_file"
            )
        report_problems(self, problems)
        return self


def deployment_name(app_name: str) -> str:
    """The Ray Serve deployment of the service named ``serve.app_name``."""
    return f"{app_name}-judge"
