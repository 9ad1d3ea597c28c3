"""The default run's demo: a learned tiny judge, a briefly supervised tiny policy, and the report.

- :mod:`nemo_genrm.demo.task`: the judge's synthetic training cases over the digit-addition task
  (its questions, held-out split and exact-match checker are
  :mod:`nemo_genrm.tasks.digit_addition`'s);
- :mod:`nemo_genrm.demo.judge`: trains a tiny causal LM to answer the package's consistency prompt;
- :mod:`nemo_genrm.demo.policy`: a short supervised start for the policy;
- :mod:`nemo_genrm.demo.models`: both built on first use and cached (``tiny://demo-judge``,
  ``tiny://demo-policy``);
- :mod:`nemo_genrm.demo.report`: the reward-hacking check and the run's closing lines;
- :mod:`nemo_genrm.demo.rewardbench`: the judge's RewardBench-style evaluation on synthetic pairs.

The demo sits on top of the GRPO driver (:mod:`nemo_genrm.grpo`), which imports nothing from it:
the task and its checker are :mod:`nemo_genrm.tasks.digit_addition`'s (``data.dataset_name:
digit_addition``, ``val/exact_match``), the plot of every run is the driver's own
(:mod:`nemo_genrm.grpo.plot`), and the models reach the driver as ``tiny://demo-judge`` and
``tiny://demo-policy`` through the entry points the package's ``pyproject.toml`` declares
(:data:`nemo_genrm.grpo.models.TINY_MODELS_GROUP`).
"""
