"""The files a run reads and writes.

- :mod:`~nemo_genrm.files.rows`: rows of a JSONL, JSON or Parquet file, or of a hub dataset
  split: the one reader of training data and RewardBench data;
- :mod:`~nemo_genrm.files.atomic`: files a kill cannot leave half-written (checkpoint state,
  results, run config) and append-only JSON-lines logs read back past a torn last line.
"""
