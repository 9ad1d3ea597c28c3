"""Defences of the reward: what a judged answer must never do to the judge, and what never leaves.

Threat model in three lines (the full table, the tests and the figures: ``docs/security.md``):

1. The policy under training writes every answer the judge reads, and RL finds whatever the judge rewards.
2. So an answer will try to dictate its verdict: label lines, role turns, chat tokens, a closed fence, lookalikes.
3. And no credential (API key, ``user:key@`` in a URL) may leave the process in a log, error, config or file.

- :mod:`~nemo_genrm.guard.injection`: an answer normalised, defused and fenced with a keyed nonce
  before any judge reads it (used by :mod:`nemo_genrm.prompts`, the modes and the demo judge);
- :mod:`~nemo_genrm.guard.folding`: the folded form every check reads (NFKD, marks and
  default-ignorable characters dropped, TR39 lookalikes mapped to Latin);
- :mod:`~nemo_genrm.guard.patterns`: what judge-format text (labels, keys, tables, markup,
  role turns) looks like on folded text;
- :mod:`~nemo_genrm.guard.tokens`: the chat-template special-token shapes of every family, and how
  they are broken;
- :mod:`~nemo_genrm.guard.master_keys`: answers with no answer in them, which are not judged;
- :mod:`~nemo_genrm.guard.vocabulary`: verdict, role and opener words in many languages, with
  every language's yes and no from :mod:`~nemo_genrm.guard.yes_no` (generated from glibc), the
  labels and choices spelled out from :mod:`~nemo_genrm.guard.number_words` (generated from
  num2words) and the check marks and crosses Unicode names;
- :mod:`~nemo_genrm.guard.redact`: credentials masked before text leaves the process (the HTTP
  judge, config errors, the driver's run config).

The judge service's request guard (keys, body size and time, JSON limits, per-key caps) lives
with the service, in :mod:`nemo_genrm.serve.guard`: its attacker is a network client of one
deployable, not the policy; it sits beside the service's health state, which it also keeps; and
only the service uses it. This package holds what the reward path itself needs, so it sits below
the prompts and the configs that use it and imports nothing else from the package.
"""
