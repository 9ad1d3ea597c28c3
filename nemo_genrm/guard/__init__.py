"""Defences of judged text: Unicode folding for checks, chat-token families, multilingual vocabularies.

Threat: the policy writes the text the judge reads and is optimised against the judge's verdict,
so it will find any text that dictates a verdict. These modules give the checks of
:mod:`nemo_genrm.injection` the form in which such text is looked for; docs/security.md says what
is covered and what is not.
"""
