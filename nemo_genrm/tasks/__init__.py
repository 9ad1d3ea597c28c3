"""Built-in tasks with a checker of their own, below the GRPO driver and the demo that both use them.

- :mod:`nemo_genrm.tasks.digit_addition`: single-digit additions, their fixed held-out split and
  the exact-match checker. The driver offers them as ``data.dataset_name: digit_addition`` and
  measures ``val/exact_match`` with the checker; the demo trains its judge and policy on them.
"""
