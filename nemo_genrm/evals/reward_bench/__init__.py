"""RewardBench and RewardBench 2, scored as allenai/reward-bench scores them.

Modules, in the order a run uses them:

- :mod:`.data`: examples from the hub or a local file, checked and filtered.
- :mod:`.preset`: ``prompt.preset: rewardbench``, the prompts of an installed ``rewardbench``.
- :mod:`.judge_requests`: the judge requests of one example (placement, rendering, long prompts).
- :mod:`.evaluator`: :class:`~.evaluator.RewardBenchEvaluator`, judging and scoring a run.
- :mod:`.v2`: RewardBench 2 (``protocol: best_of_4``), on the same evaluator.
- :mod:`.scores` and :mod:`.v2_scores`: pure scoring, per example, subset and section.
- :mod:`.store` and :mod:`.results`: the output directory and the results files.
- :mod:`.compare`: a run against reference numbers.
- :mod:`.run`: the entry point's building blocks (start judges, run from a config, compare).
- :mod:`.synthetic`: a small dataset in RewardBench's schema for tests and CPU smoke runs.

The public names are re-exported by :mod:`nemo_genrm.evals`.
"""
