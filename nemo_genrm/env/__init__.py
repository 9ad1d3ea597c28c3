"""The GenRM environment and its parts.

- :mod:`~nemo_genrm.env.environment`: ``GenRMEnvironmentImpl`` (the logic) and the Ray actor
  ``GenRMEnvironment`` (also importable as ``nemo_genrm.GenRMEnvironment``, and registered into
  NeMo-RL under its public path ``nemo_genrm.environment.GenRMEnvironment``);
- :mod:`~nemo_genrm.env.launch`: ``GenRMEnvironment.start`` and the config checks in the driver;
  the start-up error the actor keeps and raises from its first call;
- :mod:`~nemo_genrm.env.coalesce`: concurrent ``step`` calls joined into one judge call;
- :mod:`~nemo_genrm.env.gather`: GRPO groups gathered by key across calls (``pairwise_group``
  with ``group_size``), whole or masked; :mod:`~nemo_genrm.env.intake` routes a call through
  both;
- :mod:`~nemo_genrm.env.startup`: starting the judges on their resources, putting a colocated
  one to sleep, where they run;
- :mod:`~nemo_genrm.env.answer_room`: the room a judge's context leaves for the answer, checked
  at start-up and watched at run time;
- :mod:`~nemo_genrm.env.special_tokens`: the judges' special tokens, defused inside answers.

What a sample is on its way (its prepared input, its result, the step's counters) is
:mod:`nemo_genrm.samples`, below both this package and the reward modes it dispatches to.

Importing this package imports none of them (``import nemo_genrm`` stays light).
"""
