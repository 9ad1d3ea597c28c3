"""Prompt fitting (candidate shortening) and token-budget batching, table-driven."""

from __future__ import annotations

import pytest

from nemo_genrm.config import PromptConfig, VerdictConfig
from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.judges.fitting import (
    ELISION_MARKER,
    PROMPT_TOO_LONG,
    PromptFitter,
    fit_prompt,
    plan_batches,
    render_ids,
    shorten,
)
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.testing import cached_tiny_tokenizer

INSTRUCTIONS = "Compare the candidate with the reference. Reply with 1 or 0."
CANDIDATE = "".join(f"step {i} adds the terms; " for i in range(120)) + "so the answer is 42."


@pytest.fixture(scope="module")
def tokenizer(tiny_cache_dir):
    return PromptFitter(str(cached_tiny_tokenizer()), 10).tokenizer


def _request(candidate: str = CANDIDATE, shrinkable: str | None = CANDIDATE) -> JudgeRequest:
    user = f"Question: what is 6 x 7?\nReference: 42\nCandidate: {candidate}\n{INSTRUCTIONS}"
    return JudgeRequest(
        messages=(
            {"role": "system", "content": "You are a strict judge."},
            {"role": "user", "content": user},
        ),
        shrinkable=shrinkable,
    )


# ---------------------------------------------------------------------------------- shorten
@pytest.mark.parametrize(
    "text, keep, expected",
    [
        ("abcdefgh", 8, "abcdefgh"),  # keeping everything changes nothing
        ("abcdefgh", 20, "abcdefgh"),  # keeping more than there is, too
        ("abcdefgh", 4, "ab" + ELISION_MARKER + "gh"),  # even: half head, half tail
        ("abcdefgh", 3, "ab" + ELISION_MARKER + "h"),  # odd: the head gets the extra character
        ("abcdefgh", 1, "a" + ELISION_MARKER),  # one character: head only
        ("abcdefgh", 0, ELISION_MARKER),  # nothing kept: only the marker
    ],
)
def test_shorten(text, keep, expected):
    assert shorten(text, keep) == expected


# ------------------------------------------------------------------------------- fit_prompt
def test_fit_prompt_keeps_a_prompt_that_fits(tokenizer):
    request = _request()
    full = render_ids(request.messages, tokenizer)
    fitted = fit_prompt(request, tokenizer, len(full))  # exactly at the limit: untouched
    assert fitted.error is None and not fitted.truncated
    assert list(fitted.token_ids) == full
    assert fitted.messages == tuple(dict(m) for m in request.messages)


@pytest.mark.parametrize("cut", [1, 50, 300])
def test_fit_prompt_shortens_only_the_candidate(tokenizer, cut):
    request = _request()
    full = len(render_ids(request.messages, tokenizer))
    budget = full - cut
    fitted = fit_prompt(request, tokenizer, budget)
    assert fitted.error is None and fitted.truncated
    assert len(fitted.token_ids) <= budget
    user = fitted.messages[-1]["content"]
    text = tokenizer.decode(list(fitted.token_ids))
    # The instructions, question, reference and system message all survive, and the ids are
    # the render of the shortened messages.
    assert INSTRUCTIONS in text and "Reference: 42" in text and "strict judge" in text
    assert list(fitted.token_ids) == render_ids(fitted.messages, tokenizer)
    # The candidate keeps its head and tail around the marker.
    kept = user.split("Candidate: ", 1)[1].rsplit("\n" + INSTRUCTIONS, 1)[0]
    head, tail = kept.split(ELISION_MARKER)
    assert CANDIDATE.startswith(head) and CANDIDATE.endswith(tail)
    # Largest cut that fits: one more character of the candidate would not fit.
    longer = (len(head) + len(tail)) + 1
    bigger = dict(fitted.messages[-1])
    bigger["content"] = bigger["content"].replace(kept, shorten(CANDIDATE, longer))
    assert len(render_ids((fitted.messages[0], bigger), tokenizer)) > budget


@pytest.mark.parametrize(
    "shrinkable, budget_delta, why",
    [
        (None, -1, "nothing may be cut"),
        ("not in the prompt", -1, "the shrinkable text is not in the last user message"),
        (CANDIDATE, "instructions_only", "even the fully elided candidate is too long"),
        ("1", -1, "a text as short as the marker is never cut (it is also in the instructions)"),
    ],
)
def test_fit_prompt_too_long(tokenizer, shrinkable, budget_delta, why):
    request = _request(shrinkable=shrinkable)
    full = len(render_ids(request.messages, tokenizer))
    budget = 20 if budget_delta == "instructions_only" else full + budget_delta
    fitted = fit_prompt(request, tokenizer, budget)
    assert fitted.error == PROMPT_TOO_LONG, why
    assert fitted.token_ids is None and fitted.num_tokens == 0


def test_fit_prompt_cuts_the_last_occurrence_in_the_last_user_message(tokenizer):
    # The same text also sits in the system message and early in the user message: only the
    # last occurrence in the last user message is the candidate.
    chunk = "the same long words again " * 20
    messages = (
        {"role": "system", "content": chunk},
        {"role": "user", "content": f"Quote: {chunk}\nCandidate: {chunk}\nEnd."},
    )
    request = JudgeRequest(messages=messages, shrinkable=chunk)
    full = len(render_ids(messages, tokenizer))
    fitted = fit_prompt(request, tokenizer, full - 10)
    assert fitted.truncated and fitted.error is None
    assert fitted.messages[0]["content"] == chunk
    assert fitted.messages[1]["content"].startswith(f"Quote: {chunk}\nCandidate: ")
    assert fitted.messages[1]["content"].endswith("\nEnd.")


def test_the_builders_span_cuts_the_candidate_not_an_earlier_or_later_copy(tokenizer, tmp_path):
    # A template that shows the candidate BEFORE a reference quoting the same text: finding the
    # candidate again by its text (the last occurrence) would cut the reference. The request the
    # prompt builder returns carries the candidate's span, and fitting cuts exactly there, inside
    # the fence, with the candidate neutralised first (a chat token in it is defused).
    template = tmp_path / "candidate_first.txt"
    template.write_text(
        "Answer to check:\n{candidate}\nReference: {reference}\nQuestion: {question}\n"
        "Reply with [[1]] if they agree, else [[0]]."
    )
    builder = PromptBuilder(PromptConfig(template=str(template)), VerdictConfig())
    candidate = CANDIDATE + " <|im_end|>"
    placed = builder.build(question="q", reference="r", candidate=candidate).candidate  # neutralised
    reference = f"as given: {placed}"
    prompt = builder.build(question="what is 6 x 7?", reference=reference, candidate=candidate)
    request = prompt.request
    assert request.shrinkable == prompt.candidate != candidate  # neutralised, as placed
    content = prompt.messages[-1]["content"]
    assert content[slice(*request.span)] == prompt.candidate
    budget = len(render_ids(prompt.messages, tokenizer)) - 40
    fitted = fit_prompt(request, tokenizer, budget)
    assert fitted.truncated and fitted.error is None and fitted.num_tokens <= budget
    user = fitted.messages[-1]["content"]
    opening, closing = user.index(f"<candidate-{prompt.nonce}>"), user.index(f"</candidate-{prompt.nonce}>")
    assert opening < user.index(ELISION_MARKER) < closing  # the candidate was cut, inside its fence
    assert f"Reference: {reference}\n" in user  # the reference's copy is whole
    assert user.endswith(content[request.span[1] :])
    # Found again by its text alone (a request without the span), the later copy, in the
    # reference, is the one cut and the candidate goes to the judge whole.
    by_text = fit_prompt(JudgeRequest(prompt.messages, shrinkable=prompt.candidate), tokenizer, budget)
    assert by_text.truncated and f"Reference: {reference}\n" not in by_text.messages[-1]["content"]
    assert f"\n{prompt.candidate}\n</candidate-{prompt.nonce}>" in by_text.messages[-1]["content"]


def test_a_span_must_hold_the_shrinkable_text():
    messages = ({"role": "user", "content": "Candidate: 42 is right"},)
    assert JudgeRequest(messages, shrinkable="42 is right", span=(11, 22)).span == (11, 22)
    for span in [(10, 21), (11, 40), (-1, 22)]:
        with pytest.raises(ValueError, match="does not hold the shrinkable text"):
            JudgeRequest(messages, shrinkable="42 is right", span=span)


def test_fit_prompt_rejects_a_bad_budget(tokenizer):
    with pytest.raises(ValueError, match="at least 1"):
        fit_prompt(_request(), tokenizer, 0)


# ----------------------------------------------------------------------------- plan_batches
@pytest.mark.parametrize(
    "lengths, max_batch_size, budget, new, expected",
    [
        # Longest first; count cap of 2.
        ([5, 1, 3, 4], 2, 10_000, 0, [[0, 3], [2, 1]]),
        # Token budget: padded length (5 + 1 new) x count <= 12 -> pairs, even with a count cap of 10.
        ([5, 5, 5, 5], 10, 12, 1, [[0, 1], [2, 3]]),
        # The first (longest) prompt sets the padded length: 10 + 2 = 12, 12 x 2 <= 24.
        ([10, 2, 2, 2], 10, 24, 2, [[0, 1], [2, 3]]),
        # After the long one, short prompts pack densely: (3 + 0) x 4 = 12 <= 12.
        ([9, 3, 3, 3, 3], 8, 12, 0, [[0], [1, 2, 3, 4]]),
        # A prompt over the budget on its own still gets a batch, alone.
        ([50, 2, 2], 8, 20, 0, [[0], [1, 2]]),
        # Equal lengths keep input order inside a batch (stable sort).
        ([2, 2, 2], 8, 100, 0, [[0, 1, 2]]),
        # Nothing to plan.
        ([], 4, 100, 0, []),
    ],
)
def test_plan_batches(lengths, max_batch_size, budget, new, expected):
    batches = plan_batches(lengths, max_batch_size=max_batch_size, max_tokens_per_batch=budget, max_new_tokens=new)
    assert batches == expected


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plan_batches_invariants(seed):
    import random

    rng = random.Random(seed)
    lengths = [rng.randint(1, 300) for _ in range(500)]
    batches = plan_batches(lengths, max_batch_size=16, max_tokens_per_batch=2048, max_new_tokens=8)
    flat = sorted(i for batch in batches for i in batch)
    assert flat == list(range(len(lengths)))  # every prompt exactly once
    for batch in batches:
        padded = max(lengths[i] for i in batch) + 8
        assert len(batch) <= 16
        assert len(batch) == 1 or len(batch) * padded <= 2048
    # Length bucketing: batches come longest first and never interleave.
    bounds = [(min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in batches]
    assert all(lo_prev >= hi for (lo_prev, _), (_, hi) in zip(bounds, bounds[1:], strict=False))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_batch_size": 0, "max_tokens_per_batch": 10, "max_new_tokens": 0},
        {"max_batch_size": 1, "max_tokens_per_batch": 0, "max_new_tokens": 0},
        {"max_batch_size": 1, "max_tokens_per_batch": 10, "max_new_tokens": -1},
    ],
)
def test_plan_batches_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError):
        plan_batches([1, 2], **kwargs)


@pytest.mark.parametrize(
    "lengths, max_padding, expected",
    [
        # 100 sets the width; 90 is padded by 10 = 10% of it (allowed at 0.1), 89 by 11% is not.
        ([100, 90, 89, 88], 0.1, [[0, 1], [2, 3]]),
        # No bound: one batch, as before.
        ([100, 90, 89, 88], None, [[0, 1, 2, 3]]),
        # A bound of 0 puts only equal lengths together.
        ([7, 7, 6], 0.0, [[0, 1], [2]]),
    ],
)
def test_plan_batches_max_padding(lengths, max_padding, expected):
    batches = plan_batches(
        lengths, max_batch_size=64, max_tokens_per_batch=10_000, max_new_tokens=4, max_padding=max_padding
    )
    assert batches == expected


def test_plan_batches_max_padding_cuts_padded_positions_on_mixed_lengths():
    import random

    rng = random.Random(0)
    lengths = [rng.randint(200, 700) for _ in range(512)]  # the judge bench's mix

    def padded_positions(batches):
        return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)

    loose = plan_batches(lengths, max_batch_size=512, max_tokens_per_batch=200_000, max_new_tokens=0)
    tight = plan_batches(lengths, max_batch_size=512, max_tokens_per_batch=200_000, max_new_tokens=0, max_padding=0.1)
    assert padded_positions(tight) < padded_positions(loose) / 4
    for batch in tight:
        width = max(lengths[i] for i in batch)
        assert all(width - lengths[i] <= 0.1 * width for i in batch)


def test_plan_batches_rejects_a_bad_padding_bound():
    with pytest.raises(ValueError, match="max_padding"):
        plan_batches([1, 2], max_batch_size=1, max_tokens_per_batch=10, max_new_tokens=0, max_padding=1.0)
