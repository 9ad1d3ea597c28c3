"""The value-level verifier beside the judge (``reward.verifier``): does the answer state the
reference's value?

Built on math-verify (:mod:`~nemo_genrm.verifier.decide`), after the answer and the reference are
written as plain values (:mod:`~nemo_genrm.verifier.notation`: signs, percents, decimals,
fractions, powers, scale words, other scripts' digits and number words read as values, never as
strings). It decides ``equal``, ``different`` or ``undecided``; it never rejects what it cannot
read. How its decisions combine with the judge's is reference mode's
(:mod:`nemo_genrm.modes.reference`).
"""

from nemo_genrm.verifier.decide import UNDECIDED_WHYS, Check, Decision, ValueVerifier
from nemo_genrm.verifier.notation import as_latex

__all__ = ["UNDECIDED_WHYS", "Check", "Decision", "ValueVerifier", "as_latex"]
