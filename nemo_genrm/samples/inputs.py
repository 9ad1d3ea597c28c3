"""Reading one environment sample: the response, the question and the reference, defensively.

Nothing here raises on bad data: a malformed sample becomes a :class:`PreparedSample` with the
reason it cannot be judged (see :data:`nemo_genrm.samples.types.REASONS`).
"""

from __future__ import annotations

import logging
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from nemo_genrm.guard.injection import is_content_free
from nemo_genrm.judges.fitting import shorten
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.samples.types import (
    BAD_GROUND_TRUTH,
    BAD_INPUT,
    CONTENT_NOT_TEXT,
    HEDGED,
    METADATA_NOT_DICT,
    MISSING_GROUND_TRUTH,
    NO_ANSWER,
    NO_ASSISTANT_MESSAGE,
    NO_TEXT_PART,
    NOT_MESSAGES,
    SampleResult,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedSample:
    """One sample, ready to be judged or already decided.

    Attributes:
        reason: Why the sample is not sent to the judge (``None`` when it is).
        question: The question shown to the judge.
        reference: The reference answer.
        answer: What the judge is shown of the response, before neutralisation: the final
            answer with its context (reference mode, :func:`nemo_genrm.prompts.extract_answer`),
            or the whole response shortened to ``prompt.response.max_chars`` (modes that judge
            the response); ``None`` when there is none.
        value: The bare final answer the response states (reference mode), for value-level
            checks beside the judge; ``None`` when there is none or the mode judges the whole
            response. ``answer`` may show it with the words around it; ``value`` is the value alone.
        words_after: Whether the response says more than punctuation after its final statement
            (:attr:`~nemo_genrm.prompts.ExtractedAnswer.words_after`): a value verifier reading
            ``value`` alone has not read all that the judge would weigh.
        why: For a ``bad_input``, what was wrong (:data:`~nemo_genrm.samples.types.BAD_INPUT_WHYS`).
    """

    reason: str | None
    question: str = ""
    reference: str = ""
    answer: str | None = None
    value: str | None = None
    words_after: bool = False
    why: str | None = None

    def result(self) -> SampleResult:
        """The result of a sample decided here, without the judge: its reason and its detail."""
        if self.reason is None:
            raise ValueError("the sample is to be judged: it has no result of its own")
        return SampleResult(self.reason, why=self.why)

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two samples the same judgement: (question, reference, answer)."""
        return (self.question, self.reference, self.answer or "")


def clean_text(text: str) -> str:
    """Replace lone surrogates (not encodable as UTF-8) so tokenizers and Ray accept the text."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


# Chat templates whose user turn can be cut out of a rendered prompt. Each pattern captures the
# content of one user turn; the last match is the question. Named for the families that use them.
_USER_TURNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # ChatML (Qwen, many others): <|im_start|>user\n...<|im_end|>
    ("chatml", re.compile(r"<\|im_start\|>user\s*\n(.*?)(?:<\|im_end\|>|\Z)", re.DOTALL)),
    # Llama 3: <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|>
    (
        "llama3",
        re.compile(r"<\|start_header_id\|>user<\|end_header_id\|>\s*(.*?)(?:<\|eot_id\|>|\Z)", re.DOTALL),
    ),
    # Gemma: <start_of_turn>user\n...<end_of_turn>
    ("gemma", re.compile(r"<start_of_turn>user\s*\n(.*?)(?:<end_of_turn>|\Z)", re.DOTALL)),
    # Phi-3 style: <|user|>\n...<|end|>
    ("phi3", re.compile(r"<\|user\|>\s*\n?(.*?)(?:<\|end\|>|\Z)", re.DOTALL)),
    # Llama 2 / Mistral: [INST] ... [/INST]
    ("inst", re.compile(r"\[INST\](.*?)\[/INST\]", re.DOTALL)),
)


def strip_chat_scaffolding(text: str) -> str:
    """The last user turn's content when ``text`` is a chat-templated prompt, else ``text``.

    NeMo-RL's math processors store the policy's rendered prompt (system turn, role headers,
    generation prompt) as the user message; the judge should see only what the user wrote.
    Text in no known template (ChatML, Llama 3, Gemma, Phi-3, ``[INST]``) is returned as is.

    Args:
        text: A user message's content.

    Returns:
        The user's words without the template's tokens, stripped of surrounding whitespace.
    """
    for _name, pattern in _USER_TURNS:
        turns = pattern.findall(text)
        if turns:
            # A Llama-2 system block sits inside the first [INST]: drop it too.
            return re.sub(r"<<SYS>>.*?<</SYS>>", "", turns[-1], flags=re.DOTALL).strip()
    return text


def message_logs(batch: Any) -> list[Any]:
    """The batch of message logs as a list, one entry per sample.

    Args:
        batch: A list (or any iterable but a string or mapping) of message logs, or ``None``
            for an empty batch.

    Returns:
        The entries, unchanged (a malformed entry is bad data, decided per sample later).

    Raises:
        TypeError: ``batch`` is a string, bytes or a mapping (iterating it would turn each
            character or key into a sample), or not iterable at all: a bug in the caller.
    """
    if batch is None:
        return []
    if isinstance(batch, (str, bytes, bytearray, Mapping)) or not isinstance(batch, Iterable):
        raise TypeError(f"message_log_batch must be a list with one message log per sample, got {type(batch).__name__}")
    return list(batch)


def metadata_list(metadata: Any, size: int) -> list[Any]:
    """The per-sample metadata as a list of ``size`` entries.

    Args:
        metadata: A list (or tuple) with one entry per sample, or ``None`` for no metadata.
        size: The batch size.

    Returns:
        The entries (``None`` for each sample when ``metadata`` is ``None``).

    Raises:
        TypeError: ``metadata`` is neither ``None`` nor a list.
        ValueError: ``metadata`` is a sequence of another length: the rewards could not be
            matched to the samples, which is a bug in the caller rather than bad data.
    """
    if metadata is None:
        return [None] * size
    if isinstance(metadata, (Mapping, str, bytes)) or not isinstance(metadata, Sequence):
        raise TypeError(f"metadata must be a list with one entry per sample, got {type(metadata).__name__}")
    if len(metadata) != size:
        raise ValueError(f"metadata has {len(metadata)} entries for {size} samples: pass one entry per sample")
    return list(metadata)


TEXT_PARTS: Mapping[str, str] = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}
"""Content part types that hold text, and the field that holds it: Chat Completions' ``text``, the
Responses API's ``input_text`` and ``output_text``, and a refusal's words (OpenAI's ``refusal``
part: what the model said, judged like any other reply)."""


def content_text(content: Any) -> tuple[str | None, str | None]:
    """The text of a message's content: a string, or a list of OpenAI-style content parts.

    Content parts (``[{"type": "text", "text": ...}, {"type": "image_url", ...}]``, what vLLM,
    OpenAI clients and chat datasets produce) are read as their text parts (:data:`TEXT_PARTS`)
    joined by newlines, as vLLM renders them for a text-only model. Parts of other types
    (images, audio, files) are left out: the judge reads text.
    Every reader of messages in the package (the environment, the drop-ins, the judge service)
    reads content here.

    Args:
        content: A message's ``content``: a string, or a list (or tuple, or 1-d NumPy array, as
            Parquet gives) of parts, each a dict with a string ``type``.

    Returns:
        ``(text, None)``, or ``(None, why)`` when the content holds no text to read:
        ``content_not_text`` (neither a string nor a list of parts, or a part that is not a dict
        with a string ``type``, or a text part whose text field is not a string) or
        ``no_text_part`` (parts, none of them text; an empty list too).
    """
    if isinstance(content, str):
        return content, None
    if type(content).__module__ == "numpy" and getattr(content, "ndim", None) == 1:
        content = content.tolist()
    if not isinstance(content, (list, tuple)):
        return None, CONTENT_NOT_TEXT
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(kind, str):
            return None, CONTENT_NOT_TEXT
        if kind in TEXT_PARTS:
            # A dataset's other part types often carry "text": None (Arrow fills a struct's
            # missing fields); a text part must hold text.
            text = part.get(TEXT_PARTS[kind])
            if not isinstance(text, str):
                return None, CONTENT_NOT_TEXT
            texts.append(text)
    if not texts:
        return None, NO_TEXT_PART
    return "\n".join(texts), None


def _last_assistant(log: Any) -> tuple[int, Mapping[str, Any]] | str:
    """Index and message of the last assistant message, or why there is none (a bad-input why)."""
    if not isinstance(log, Sequence) or isinstance(log, (str, bytes)):
        return NOT_MESSAGES
    if not all(isinstance(m, Mapping) for m in log):
        return NOT_MESSAGES
    for index in range(len(log) - 1, -1, -1):
        if log[index].get("role") == "assistant":
            return index, log[index]
    return NO_ASSISTANT_MESSAGE


def _question(log: Sequence[Mapping[str, Any]], before: int, meta: Mapping[str, Any]) -> str:
    """``metadata["question"]`` when given, else the last user message before the response.

    Either may be text or content parts (:func:`content_text`). A user message may hold the
    policy's whole chat-templated prompt (NeMo-RL's math processors put it there); its template
    scaffolding is stripped so the judge sees the user's words only.
    """
    given, _ = content_text(meta.get("question"))
    if given is not None and given.strip():
        return given
    for index in range(before - 1, -1, -1):
        message = log[index]
        text, _ = content_text(message.get("content")) if message.get("role") == "user" else (None, None)
        if text is not None:
            return strip_chat_scaffolding(text)
    return ""


def _reference(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(reference, reason): the ground truth as text, or why there is none (``missing_ground_truth``,
    or the bad-input why ``bad_ground_truth``)."""
    value = meta.get("ground_truth")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, MISSING_GROUND_TRUTH
    if isinstance(value, str):
        return value, None
    text = number_text(value)
    return (text, None) if text is not None else (None, BAD_GROUND_TRUTH)


# Integral binary floats below this are written as integers; above it a float is not exact at
# the units digit, so its own notation (e.g. 1e+20) says more.
_EXACT_INT_FLOAT = 2.0**53


def number_text(value: Any) -> str | None:
    """A numeric ground truth written the way a person would write it, or ``None``.

    Any number type is accepted: Python's, NumPy scalars and 0-d arrays (what pandas and Parquet
    give), ``Decimal``, ``Fraction`` and 0-d torch tensors. Integers are written in decimal; a
    binary float with an integral value as an integer (``3.0`` -> ``"3"``: pandas turns an
    integer column with a gap into floats, so the ``.0`` carries no meaning), any other float in
    its shortest form at its own precision (``numpy.float32(0.1)`` -> ``"0.1"``). A ``Decimal``
    keeps the digits it was written with (``"2.50"``), in positional notation; a ``Fraction`` is
    ``"3/4"`` (``"3"`` when whole).

    Args:
        value: The ground truth (not a string).

    Returns:
        The text, or ``None`` for what is not a finite real number: booleans (a flag is not an
        answer), NaN, infinities, complex numbers, tensors with more than one element, other
        types, and an integer (or a fraction's part) longer than Python writes as text
        (``sys.get_int_max_str_digits()``, 4300 digits by default).
    """
    value = _plain_scalar(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else None
    try:  # an integer past Python's digit limit for str() (4300 by default) cannot be written
        if isinstance(value, numbers.Integral):
            return str(int(value))
        if isinstance(value, Fraction):
            return str(value)
    except ValueError:
        return None
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            return None
        if number.is_integer() and abs(number) < _EXACT_INT_FLOAT:
            return str(int(number))
        # str of a NumPy float is its shortest round-trip form at its own width (float32 included).
        return str(value) if type(value).__module__ == "numpy" else repr(number)
    return None


def _plain_scalar(value: Any) -> Any:
    """A 0-d torch tensor or NumPy array as a NumPy or Python scalar; anything else unchanged."""
    module = type(value).__module__.split(".")[0]
    if module == "torch" and getattr(value, "ndim", None) == 0:
        tensor = value.detach().cpu()
        try:
            value = tensor.numpy()
        except TypeError:  # bfloat16 has no NumPy dtype: widen it to float32 exactly
            value = tensor.float().numpy()
        module = "numpy"
    if module == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "dtype"):
        kind = value.dtype.kind
        if kind not in "biuf":  # complex, dates, strings, objects: not a real number
            return None
        # A 0-d array becomes a NumPy scalar (a scalar stays itself); a NumPy bool a Python one.
        value = bool(value) if kind == "b" else value[()]
    return value


def prepare_sample(
    log: Any,
    meta: Any,
    builder: PromptBuilder,
    *,
    needs_reference: bool,
    response_chars: int | None = None,
) -> PreparedSample:
    """Read one sample: what to judge, or why it cannot be judged.

    Args:
        log: The sample's message list (dicts with ``role`` and ``content``).
        meta: Its metadata (a dict with ``ground_truth`` and optionally ``question``), or ``None``.
        builder: Extracts the answer from the response (a response offering more distinct final
            values than the reference holds is ``hedged``).
        needs_reference: Whether the template shows the reference (then it is required).
        response_chars: Set for the modes that judge the whole response: the judge is shown the
            response itself, shortened to this many characters around an elision mark, instead
            of the extracted answer. A response with no content is ``no_answer`` (its question
            is kept, so the sample still counts in its group).

    Returns:
        The prepared sample (``reason`` is ``None`` when it should be judged).
    """
    if meta is not None and not isinstance(meta, Mapping):
        return PreparedSample(BAD_INPUT, why=METADATA_NOT_DICT)
    meta = meta or {}
    found = _last_assistant(log)
    if isinstance(found, str):
        return PreparedSample(BAD_INPUT, why=found)
    index, message = found
    content, unreadable = content_text(message.get("content"))
    if content is None:
        # Its question is readable: in the modes that rank a group it still arrived in its group
        # (which would otherwise never fill), though it is not judged.
        question = clean_text(_question(log, index, meta)) if response_chars is not None else ""
        return PreparedSample(BAD_INPUT, question=question, why=unreadable)
    reference, problem = _reference(meta)
    if problem is not None and needs_reference:
        return _unreferenced(problem)
    if response_chars is not None:
        return _whole_response(content, clean_text(_question(log, index, meta)), reference, response_chars)
    extracted = builder.extract(content, reference=reference)
    if not extracted.ok:
        return PreparedSample(HEDGED if extracted.reason == HEDGED else NO_ANSWER)
    return PreparedSample(
        None,
        question=clean_text(_question(log, index, meta)),
        reference=clean_text(reference or ""),
        answer=clean_text(extracted.text),
        value=None if extracted.value is None else clean_text(extracted.value),
        words_after=extracted.words_after,
    )


def _unreferenced(problem: str) -> PreparedSample:
    """A sample without a usable reference: ``missing_ground_truth``, or ``bad_input`` with its why."""
    return PreparedSample(problem) if problem == MISSING_GROUND_TRUTH else PreparedSample(BAD_INPUT, why=problem)


def _whole_response(content: str, question: str, reference: str | None, max_chars: int) -> PreparedSample:
    """A sample whose judge is shown the whole response (pairwise and rubric modes)."""
    text = content.strip()
    if not text or is_content_free(text):
        return PreparedSample(NO_ANSWER, question=question)
    return PreparedSample(
        None, question=question, reference=clean_text(reference or ""), answer=clean_text(shorten(text, max_chars))
    )
