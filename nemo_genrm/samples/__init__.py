"""One sample on its way through the reward: read in, judged by a mode, settled, counted.

Below both the reward modes (:mod:`nemo_genrm.modes`) and the environment
(:mod:`nemo_genrm.env`), which use these alike:

- :mod:`~nemo_genrm.samples.inputs`: a message log and its metadata read into a
  ``PreparedSample`` (the answer cut out, the question, the reference) or a reason, never an
  exception;
- :mod:`~nemo_genrm.samples.types`: the reasons, the per-sample ``SampleResult``, the
  ``GenRMInfo`` logged per sample, and NeMo-RL's ``EnvironmentReturn``/``EnvironmentInterface``
  (or stand-ins with the same fields);
- :mod:`~nemo_genrm.samples.metrics`: the ``genrm/*`` counters and metrics of a step.
"""
