"""The default run's demo: a learned tiny judge, a briefly supervised tiny policy, and the report.

- :mod:`nemo_genrm.demo.task`: single-digit additions, the held-out split, the exact-match checker
  and the judge's synthetic training cases;
- :mod:`nemo_genrm.demo.judge`: trains a tiny causal LM to answer the package's consistency prompt;
- :mod:`nemo_genrm.demo.policy`: a short supervised start for the policy;
- :mod:`nemo_genrm.demo.models`: both built on first use and cached (``tiny://demo-judge``,
  ``tiny://demo-policy``);
- :mod:`nemo_genrm.demo.report`: the plot of reward and exact match, and the reward-hacking check;
- :mod:`nemo_genrm.demo.rewardbench`: the judge's RewardBench-style evaluation on synthetic pairs.

The GRPO driver (:mod:`nemo_genrm.grpo`) offers the task as ``data.dataset_name: digit_addition``,
the models as ``tiny://demo-judge``/``tiny://demo-policy``, the checker as ``val/exact_match`` and
the plot after every run, so the demo sits below the driver and imports nothing from it.
"""
