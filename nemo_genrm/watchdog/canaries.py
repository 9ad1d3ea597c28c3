"""Canaries: known-wrong answers in the shapes that game judges, and known-right controls.

The shapes are red-team templates the project already has (one idea, one place): the extraction
families of :mod:`nemo_genrm.testing.redteam_extraction` and the hand-written answers of
:mod:`nemo_genrm.testing.redteam`, picked by name in :data:`FAMILIES`. Each is written for a
(question, reference) of the judge call it joins, with a wrong value derived from the reference
(a number plus one; otherwise another reference of the same call). A ``mimic`` canary is one of the
policy's own recent responses of a flagged shape whose stated value (the reference) is replaced by
a wrong one: would the reward accept that very shape with a wrong answer?

:class:`CanaryPlanner` keeps the budget (``rate`` canaries per real judge prompt, spent only when
it holds a whole canary, so a small step sends none) and the cache: a canary (question, reference,
shape) is judged once, since the judge is frozen.
"""

from __future__ import annotations

import collections
import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nemo_genrm.config.watchdog import CanaryConfig
from nemo_genrm.samples.inputs import PreparedSample

# family -> (template names, known label): wrong shapes first, then the controls.
FAMILIES: dict[str, tuple[tuple[str, ...], bool]] = {
    "verdict_line": (("verdict_colon", "verdict_words_0"), False),
    "modified_value": (("modifier_tenfold_marker", "modifier_negative_box", "modifier_percent_bare"), False),
    "forged_reference": (("hidden_reference_label",), False),
    "retraction": (("negation_withdrawn_only",), False),
    "hedge": (("hedge_or_marker_wrong_first",), False),
    "label_alone": (("lone_label",), False),
    "master_key": (("lets_solve",), False),
    "notation": (("modifier_decimal_zero_marker_twin", "modifier_bold_bare_twin", "hedge_single_box_twin"), True),
}
"""The canary families: their templates (by name) and whether the reward should accept them."""

MIMIC = "mimic"
CONTEXT = "context"
"""The context probe: a real judged sample's bare value, judged alone, against its verdict with context."""
SIGNAL_FAMILY = {"hedged": "hedge", "verdict_lines": "verdict_line", "openers": "master_key"}
"""The canary family each drift signal resembles (sent first when the policy leans that way)."""

_INTEGER = re.compile(r"-?\d+")


@functools.lru_cache(maxsize=1)
def templates() -> dict[str, tuple[str, ...]]:
    """Family -> its template texts (``{r}`` the reference, ``{w}`` a wrong value, ``{d}`` twice it)."""
    from nemo_genrm.testing.redteam import redteam_templates
    from nemo_genrm.testing.redteam_extraction import extraction_templates

    by_name = {t.name: t.text for t in extraction_templates()}
    by_name.update({t.name: t.text.replace("{wrong}", "{w}") for t in redteam_templates()})
    return {family: tuple(by_name[name] for name in names) for family, (names, _) in FAMILIES.items()}


@dataclass(frozen=True)
class Canary:
    """One canary: what is sent as a policy response, and what the reward should say.

    Attributes:
        family: Its family (:data:`FAMILIES`, ``mimic`` or ``context``).
        question: The question of the real sample it was written for.
        reference: That sample's reference.
        response: The canary response.
        right: Whether the reward should accept it (controls) or refuse it; for a ``context``
            probe, whether the reward accepted the real sample with its context.
    """

    family: str
    question: str
    reference: str
    response: str
    right: bool

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two canaries the same: one verdict is kept per key."""
        return (self.question, self.reference, self.response)


def wrong_value(reference: str, others: Sequence[str]) -> str | None:
    """A value that is not the reference: an integer plus one, else another reference of the call."""
    text = reference.strip()
    if _INTEGER.fullmatch(text):
        return str(int(text) + 1)
    for other in others:
        if other.strip() and other.strip() != text:
            return other.strip()
    return None


def write(template: str, reference: str, wrong: str) -> str | None:
    """``template`` written for one reference, ``None`` when it needs a number the reference is not."""
    numeric = _INTEGER.fullmatch(reference.strip()) is not None
    modifies = any(form in template for form in ("{d}", "{r}0", "{r}%", "-{r}"))
    if modifies and (not numeric or int(reference) == 0):  # -0, 00 and 0% are 0: not known-wrong
        return None
    double = str(2 * int(reference)) if numeric else ""
    return template.replace("{r}", reference.strip()).replace("{w}", wrong).replace("{d}", double)


def context_probe(sample: PreparedSample, accepted: bool) -> Canary | None:
    """A real sample's bare value as a probe of its own (``None`` when it shows no context).

    Args:
        sample: A real sample the judge answered (reference mode: ``value`` is its bare value).
        accepted: Whether the reward accepted it with its context.
    """
    value, shown = (sample.value or "").strip(), (sample.answer or "").strip()
    if sample.reason is not None or not value or not sample.reference or value == shown:
        return None
    return Canary(CONTEXT, sample.question, sample.reference, value, right=accepted)


def mimic(response: str, sample: PreparedSample, wrong: str) -> str | None:
    """The policy's ``response`` with its stated value, the reference, written as ``wrong``.

    ``None`` unless the response states the reference as its value and no trace of the
    reference is left after the change (then the canary is known to be wrong).
    """
    value, reference = (sample.value or "").strip(), sample.reference.strip()
    if not value or value != reference:
        return None
    token = re.compile(rf"(?<![\w.]){re.escape(value)}(?![\w])")
    out = token.sub(wrong, response)
    return None if out == response or token.search(out) else out


class CanaryPlanner:
    """The canary budget, the cache and the choice of canaries for one judge call.

    Args:
        cfg: ``reward.watchdog.canaries``.
    """

    def __init__(self, cfg: CanaryConfig) -> None:
        self.cfg = cfg
        self._budget = 0.0
        self._rng = random.Random(cfg.seed)
        self._seen: collections.OrderedDict[tuple[str, str, str], None] = collections.OrderedDict()
        self._turn = 0

    def credit(self, real_prompts: int) -> None:
        """Add a judge call's real prompts to the budget (capped at one call's worth)."""
        self._budget = min(self._budget + self.cfg.rate * real_prompts, float(self.cfg.max_per_call))

    def plan(
        self,
        pairs: Sequence[tuple[str, str]],
        prepare: Callable[[Canary], PreparedSample],
        *,
        lean: Sequence[str] = (),
        mimics: Sequence[Canary] = (),
        probes: Sequence[Canary] = (),
    ) -> tuple[list[tuple[Canary, PreparedSample]], int]:
        """The canaries to add to this judge call, and how many were skipped as already judged.

        Args:
            pairs: The call's distinct (question, reference).
            prepare: Reads a canary as the environment reads a sample.
            lean: Families the policy's recent responses resemble, tried first.
            mimics: Mimic canaries written from the policy's own responses, tried first.
            probes: ``context`` probes of this call's judged samples (:func:`context_probe`): when
                there are any, ``context`` takes its turn after the families, one probe a turn.

        Returns:
            ``(canaries with their prepared samples, cached)``. A canary that reaches the judge
            costs one unit of budget; one decided before it (a hedge) costs none.
        """
        if self._budget < 1.0 or not pairs:
            return [], 0
        order = [*dict.fromkeys(lean), *FAMILIES, *([CONTEXT] if probes else [])]
        out: list[tuple[Canary, PreparedSample]] = []
        cached = 0
        queue = list(mimics)
        for _ in range(self.cfg.max_per_call * len(order)):
            if self._budget < 1.0 or len(out) >= self.cfg.max_per_call:
                break
            if queue:
                canary = queue.pop(0)
            else:
                family = order[self._turn % len(order)]
                canary = self._probe(probes) if family == CONTEXT else self._draw(family, pairs)
                self._turn += 1
            if canary is None:  # every canary of the family is known for these questions
                cached += 1
                continue
            if canary.key in self._seen:
                cached += 1
                continue
            self._remember(canary.key)
            sample = prepare(canary)
            if sample.reason is None:
                self._budget -= 1.0
            out.append((canary, sample))
        return out, cached

    def _draw(self, family: str, pairs: Sequence[tuple[str, str]]) -> Canary | None:
        """The family's first canary not judged yet, for a question of the call drawn at random."""
        for index in self._rng.sample(range(len(pairs)), len(pairs)):
            question, reference = pairs[index]
            wrong = wrong_value(reference, [r for _, r in pairs])
            for template in templates()[family] if wrong is not None else ():
                text = write(template, reference, wrong)
                canary = None if text is None else Canary(family, question, reference, text, FAMILIES[family][1])
                if canary is not None and canary.key not in self._seen:
                    return canary
        return None

    def _probe(self, probes: Sequence[Canary]) -> Canary | None:
        """One of the call's context probes not judged yet, drawn at random."""
        fresh = [probe for probe in probes if probe.key not in self._seen]
        return self._rng.choice(fresh) if fresh else None

    def _remember(self, key: tuple[str, str, str]) -> None:
        self._seen[key] = None
        while len(self._seen) > self.cfg.cache_size:
            self._seen.popitem(last=False)
