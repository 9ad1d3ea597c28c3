"""The GenRM environment and its parts.

- :mod:`~nemo_genrm.env.environment`: ``GenRMEnvironmentImpl`` (the logic) and the Ray actor
  ``GenRMEnvironment`` (also importable as ``nemo_genrm.GenRMEnvironment``, and registered into
  NeMo-RL under its public path ``nemo_genrm.environment.GenRMEnvironment``);
- :mod:`~nemo_genrm.env.inputs`: reading one sample (message log + metadata) into a
  ``PreparedSample`` or a reason;
- :mod:`~nemo_genrm.env.coalesce`: concurrent ``step`` calls joined into one judge call;
- :mod:`~nemo_genrm.env.types`: NeMo-RL's ``EnvironmentReturn``/``EnvironmentInterface`` (or
  stand-ins), the reasons, and the per-sample ``SampleResult``;
- :mod:`~nemo_genrm.env.metrics`: the ``genrm/*`` counters and metrics;
- :mod:`~nemo_genrm.env.startup`: starting the judges on their resources, where they run;
- :mod:`~nemo_genrm.env.support`: judge counters, fatal errors, tokenizer specials, worker facts.

Importing this package imports none of them (``import nemo_genrm`` stays light).
"""
