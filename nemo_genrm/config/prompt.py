"""The ``prompt`` and ``verdict`` sections: what the judge is shown, and how its reply is read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from nemo_genrm.config.base import StrictModel
from nemo_genrm.config.loading import report_problems
from nemo_genrm.errors import ConfigError
from nemo_genrm.prompts import load_template, template_labels_from_config
from nemo_genrm.verdicts import VerdictParser

BUILTIN_TEMPLATES = ("consistency", "consistency_compact", "pairwise", "rating")


class AnswerConfig(StrictModel):
    """How the final answer is found in the policy's response, and what of it the judge is shown.

    Every final-answer statement counts (boxes, and lines that open with the marker); more
    distinct final values than the reference holds are a hedge (reason hedged, reward 0). The
    judge is shown the final statement with its context: its paragraph and what follows it.
    """

    marker: str | None = Field(
        "Answer:",
        description=(
            "A line that opens with this label (after Markdown decoration, and words such as "
            "Final) states a final answer; inside a line it is prose. null disables."
        ),
    )
    boxed: bool = Field(True, description="Each \\boxed{...} (\\fbox, \\framebox) states a final answer too.")
    tail_chars: int = Field(
        300,
        ge=0,
        description=(
            "A response that states no final answer is shown whole when it fits max_chars, else "
            "its last this many characters; 0: only the marker or a box states an answer, and a response with neither "
            "is not judged (reason no_answer)."
        ),
    )
    max_chars: int = Field(
        1000,
        ge=1,
        description=(
            "The most characters the judge is shown; a longer window keeps the final answer's "
            "paragraph and the response's end around an elision mark ([...]), never refused."
        ),
    )


class ResponseConfig(StrictModel):
    """How the environment shows a whole response in the reward modes that judge it (pairwise_group, rubric)."""

    max_chars: int = Field(
        4000,
        ge=1,
        description=(
            "pairwise_group and rubric show the whole response; a longer one keeps its first and "
            "last max_chars/2 characters around an elision mark ([...])."
        ),
    )


class PromptConfig(StrictModel):
    """Which judge prompt to render and how the candidate answer is prepared."""

    template: str = Field(
        "consistency",
        description="consistency | consistency_compact (few tokens, for small judges) | pairwise | rating, or a path to a YAML template file.",
    )
    preset: Literal["rewardbench"] | None = Field(
        None,
        description=(
            "rewardbench: take the prompts from the installed rewardbench package, send its request "
            "parameters and read replies its way (whole reply, <think> blocks included). Without "
            "it verdicts are read after the last </think>."
        ),
    )
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    response: ResponseConfig = Field(default_factory=ResponseConfig)
    neutralise: bool = Field(
        True,
        description=(
            "Normalise answers (NFKC, no zero-width or bidi characters) and defuse verdict lines, "
            "role turns, instructions and chat tokens in them; the nonce fence is always there."
        ),
    )
    min_answer_tokens: int = Field(
        64,
        ge=0,
        description=(
            "At start-up the template is rendered with question, reference and answer empty; if "
            "the judge's prompt budget (judge.max_model_len minus the reply's tokens) leaves fewer tokens than this "
            "for them, the config is refused (every sample would be too_long). 0: only the "
            "fixed part must fit."
        ),
    )
    fence_seed: int | None = Field(
        None,
        description=(
            "Seeds the key of the fence nonces (each a keyed hash of the prompt's fields), so a "
            "run's prompts are reproducible; null: a random key per process."
        ),
    )


class VerdictConfig(StrictModel):
    """How the judge's output becomes a verdict."""

    parser: Literal["strict", "lenient", "choice", "rating"] = Field(
        "strict", description="strict | lenient | choice ([[A]]/[[B]]) | rating (an integer)."
    )
    positive: str = Field("1", min_length=1, description="Label meaning the answers agree.")
    negative: str = Field("0", min_length=1, description="Label meaning they disagree.")
    on_parse_failure: Literal["zero", "mask"] = Field(
        "zero",
        description="zero: reward 0 counted in the mean; mask: reward 0 but reported apart.",
    )
    synonyms: dict[str, list[str]] = Field(
        default_factory=dict,
        description="lenient parser: label -> extra words, e.g. {'1': [yes, correct]}.",
    )
    choice_markers: list[str] = Field(
        default_factory=lambda: ["[[A]]", "[[B]]"], description="choice parser: markers for A and B."
    )
    rating_min: int = Field(1, description="rating parser: lowest valid rating.")
    rating_max: int = Field(10, description="rating parser: highest valid rating.")

    @model_validator(mode="after")
    def _check(self) -> VerdictConfig:
        # The parser's own rules, run here: a config that validates always builds its parser,
        # and the rules are written once (in nemo_genrm.verdicts, which the parser also runs).
        try:
            VerdictParser.from_config(self)
        except ConfigError as err:
            report_problems(self, [_section_relative(p) for p in err.problems])
        return self


def _section_relative(problem: str) -> str:
    """A parser problem ("verdict.x: ...", "verdict: ...") as one of the verdict section's."""
    return problem.removeprefix("verdict: ").removeprefix("verdict.")


def template_problems(prompt: PromptConfig, verdict: VerdictConfig, fields: tuple[str, ...]) -> list[str]:
    """Load a custom template file now, so a missing file or unknown field fails at validation.

    Args:
        prompt: The prompt section (its ``template``).
        verdict: The verdict section (the labels the template may write).
        fields: The fields the caller fills in the template.

    Returns:
        The problems found; none for a built-in template.
    """
    if builtin_template(prompt.template) is not None:
        return []
    try:
        load_template(prompt.template, provided_fields=fields, labels=template_labels_from_config(verdict))
    except ConfigError as err:
        return list(err.problems)
    return []


def mode_template_problems(
    spec: str, builtin: str, fields: tuple[str, ...], verdict: VerdictConfig, key: str
) -> list[str]:
    """Load a reward mode's custom template file now (see :func:`template_problems`).

    Args:
        spec: The mode's ``template`` setting.
        builtin: The mode's own built-in template name (nothing to check).
        fields: The fields the mode fills.
        verdict: The verdict section (the labels the template may write).
        key: The setting's config key, named in the problems.

    Returns:
        The problems found.
    """
    if spec == builtin:
        return []
    try:
        load_template(spec, provided_fields=fields, labels=template_labels_from_config(verdict), key=key)
    except ConfigError as err:
        return list(err.problems)
    return []


def builtin_template(template: str) -> str | None:
    """The built-in template name, or None for a custom template path."""
    return template if template in BUILTIN_TEMPLATES else None
