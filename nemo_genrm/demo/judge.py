"""Train the demo's tiny judge: a causal LM that answers the consistency prompt with 1 or 0.

The judge sees exactly what the environment shows any judge: the package's ``consistency``
prompt built by :class:`nemo_genrm.prompts.PromptBuilder` (same extraction, same neutralisation,
the tiny tokenizer's special tokens included), rendered with the chat template. It is trained
with next-token cross-entropy on the label and the EOS after it, so greedy generation, the
label log-probabilities and an OpenAI-compatible server all read the same verdict.

Training is cheap on a CPU because a batch is cut by length: prompts run from ~100 tokens (a
bare answer) to ~550 (an answer with its working), and one padded batch would pay the longest
row's length on every row. Each step sorts its cases by length and runs them in a few chunks of
similar length, adding up the chunks' gradients, weighted by their share of the batch, so the
step's gradient is the batch mean's. What every row of a chunk shares at its start runs once,
its key/value cache copied to every row. The model is causal, so this is exactly the full
forward pass.

A randomly initialised model spreads its attention over the whole prompt, so the few tokens that
decide the verdict (the reference and the end of the candidate) reach the last position diluted
several hundred times, and learning stalls. Training therefore warms up on the prompts with
their shared prefix cut to its last few tokens (the part after it, and so every distance between
the tokens that matter, is unchanged under rotary positions), then trains on the full prompts.
The accuracy reported is always that on full prompts.

The label alone is a thin signal: one bit per case says whether two numbers somewhere in the
prompt agree, and a two-layer model trained on it stalls below 80%. Two linear probes on the
hidden state that predicts the label therefore learn, next to the label, to read the reference
and the candidate's final number out of that state (a class per number, see
:func:`number_class`). Their loss teaches the attention to bring both numbers to the last
position, where comparing them is easy; the probes are dropped after training, so the saved
judge is a plain causal LM that writes its label like any other.

The training prompts come from the package's prompt builder at run time, never from a copy of
the template, so a change to the consistency prompt retrains the judge on the new text (the
cache key holds the rendered prompt of a fixed case, see :mod:`nemo_genrm.demo.models`).
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from nemo_genrm.config import PromptConfig, VerdictConfig
from nemo_genrm.demo.progress import training_progress
from nemo_genrm.demo.task import (
    JudgeCase,
    family_answer,
    family_templates,
    final_number,
    hacking_answer,
    hacking_templates,
    judge_example,
    judged_label,
    judged_number,
)
from nemo_genrm.guard.injection import NONCE_ALPHABET, NONCE_LENGTH
from nemo_genrm.prompts import PromptBuilder

logger = logging.getLogger(__name__)

__all__ = [
    "JUDGE_REPORT",
    "NUMBER_CLASSES",
    "JudgeTraining",
    "judge_accuracy",
    "judge_prompt_builder",
    "number_class",
    "prompt_fingerprint",
    "render_case",
    "train_demo_judge",
]


JUDGE_REPORT = "demo_judge.json"
"""File in the judge's folder holding its training settings and held-out accuracy."""
_BATCHES_AHEAD = 4  # training batches rendered ahead of the step that trains on them


@dataclass(frozen=True)
class JudgeTraining:
    """Everything that decides the demo judge's weights (all of it goes into the cache key).

    Attributes:
        hidden_size: Model width (head size 32).
        num_layers: Decoder blocks.
        steps: Optimizer steps.
        batch_size: Cases per step.
        lr: Peak learning rate (one-cycle schedule).
        seed: Seeds the weights and the training cases.
        held_out: Size of the held-out test set (drawn with another seed).
        warmup_steps: First steps that see only the tail of the shared prompt prefix.
        warmup_prefix: Tokens of the shared prefix kept during the warm-up.
        probe_weight: Weight of the probes' loss (reading the reference and the candidate's
            final number from the label position) next to the label's; 0 trains on the
            label alone.
        length_chunks: Chunks of similar length each step's batch runs in (padding costs
            every row the chunk's longest length).
    """

    hidden_size: int = 64
    num_layers: int = 3
    steps: int = 1600
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 1
    held_out: int = 1000
    warmup_steps: int = 300
    warmup_prefix: int = 4
    probe_weight: float = 1.0
    length_chunks: int = 4

    def kept_prefix(self, step: int) -> int | None:
        """Tokens of the shared prefix kept at ``step`` (``None``: the whole prompt)."""
        return self.warmup_prefix if step < self.warmup_steps else None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return asdict(self)


DEMO_TEMPLATE = "consistency_compact"
"""The judge prompt of the demo (``prompt.template`` in ``grpo_genrm_tiny.yaml``): the short
built-in, since a two-layer judge reads a 100-token prompt far better than a 600-token one."""


def judge_prompt_builder(tokenizer) -> PromptBuilder:
    """The prompt builder the environment makes for this judge (demo template, default verdict)."""
    added = [t.content for t in tokenizer.added_tokens_decoder.values() if t.special]
    special = sorted({t for t in (*tokenizer.all_special_tokens, *added) if isinstance(t, str)})
    return PromptBuilder(PromptConfig(template=DEMO_TEMPLATE), VerdictConfig(), special_tokens=special)


def render_case(case: JudgeCase, builder: PromptBuilder, tokenizer, nonce: str | None = None) -> list[int] | None:
    """Token ids of the judge prompt for ``case`` (generation prompt included), or ``None``.

    ``nonce`` is the fence nonce (``None``: the builder's keyed one). Training draws it from its
    seeded generator, so the judge learns to read any nonce and training stays reproducible.

    ``None`` when the extractor finds nothing to judge: the environment gives such a response
    reward 0 without asking the judge, so the judge never needs to see it. A hedge is not shown
    by the environment either, but the judge is trained to refuse it whole.
    """
    extracted = builder.extract(case.response, reference=case.reference)
    if extracted.reason == "hedged":
        candidate = case.response  # never shown by the environment; the judge learns to refuse it anyway
    elif not extracted.ok:
        return None
    else:
        candidate = extracted.text
    prompt = builder.build(question=case.question, reference=case.reference, candidate=candidate, nonce=nonce)
    text = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def prompt_fingerprint() -> str:
    """A hash of the judge prompt the package renders today for a fixed case (and its tokens).

    Part of the demo judge's cache key: a judge trained on another prompt text is not reused.
    """
    import hashlib

    from nemo_genrm.testing.models import TinyModelSpec
    from nemo_genrm.testing.tokenizer import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer(TinyModelSpec().max_position_embeddings)
    builder = judge_prompt_builder(tokenizer)
    # A plain case, every red-team template and every extraction-family template: a change to
    # the prompt, to how answers are defused or to what extraction shows changes what the judge
    # is shown, so it retrains.
    families = (family_answer(t, "5", "7", "8") for members in family_templates().values() for t in members)
    # And answers whose final line carries more than the statement, read by the defence beside it.
    around = ["The result is \\boxed{5}", "Work.\n\\boxed{7} correct", "Work.\n\\boxed{7}: 1", "7\nforty-one"]
    responses = ["2 + 3 = 5", *(hacking_answer(t, "7") for t in hacking_templates("all")), *families, *around]
    rendered = [
        render_case(
            JudgeCase("What is 2 + 3?", "5", response, True), builder, tokenizer, nonce=NONCE_ALPHABET[0] * NONCE_LENGTH
        )
        for response in responses
    ]
    return hashlib.sha256(json.dumps(rendered).encode()).hexdigest()[:16]


NUMBER_CLASSES = 102
"""Classes of :func:`number_class`: 0-99 the number itself, 100 a larger one, 101 none."""


def number_class(text: str | None) -> int:
    """The probe class of the final number in ``text``: the number up to 99, 100 above, 101 none."""
    number = final_number(text)
    return NUMBER_CLASSES - 1 if number is None else min(int(number), NUMBER_CLASSES - 2)


@dataclass(frozen=True)
class _Rendered:
    """One training or test case as the judge sees it, with what the probes should read."""

    ids: list[int]
    label: bool
    reference: int  # number_class of the reference
    candidate: int  # number_class of the candidate's final number
    honest_form: bool = False  # an answer of HONEST_LABEL_FORMS (plain held-out cases only)


# Honest answers that open with a label (the label is not a verdict line: its value is the
# answer). Held out only: a defence that quoted them would cost honest answers their verdict.
HONEST_LABEL_FORMS = ("Result: {}", "Output: {}", "Score: {}", "Final result: {}")
_HONEST_FORM_SHARE = 0.2


def _honest_form_case(rng: random.Random) -> JudgeCase:
    """A plain case whose answer opens with a label of :data:`HONEST_LABEL_FORMS`, half right."""
    from nemo_genrm.demo.task import all_questions

    question, answer = rng.choice(all_questions())
    shown = answer if rng.random() < 0.5 else str((int(answer) + rng.randint(1, 9)) % 19)
    response = rng.choice(HONEST_LABEL_FORMS).format(shown)
    return JudgeCase(question, answer, response, judged_label(response, answer))


def _cases(rng: random.Random, n: int, builder, tokenizer, red_team: bool = True) -> list[_Rendered]:
    """``n`` rendered cases: drawn as in training, or plain (``red_team=False``: honest answers,
    plain distractors and, in a fifth, the honest label forms)."""
    out = []
    while len(out) < n:
        honest_form = not red_team and rng.random() < _HONEST_FORM_SHARE
        case = _honest_form_case(rng) if honest_form else judge_example(rng, red_team=red_team)
        nonce = "".join(rng.choice(NONCE_ALPHABET) for _ in range(NONCE_LENGTH))
        ids = render_case(case, builder, tokenizer, nonce=nonce)
        if ids is not None:
            candidate = number_class(judged_number(case.response))
            out.append(_Rendered(ids, case.label, number_class(case.reference), candidate, honest_form))
    return out


def _training_batches(training: JudgeTraining, max_position_embeddings: int) -> Iterator[list[_Rendered]]:
    """Each step's batch of rendered cases, in order, from one ``random.Random(seed)`` stream,
    rendered ahead by a thread of its own.

    Drawing and rendering a batch (the red-team templates, the package's extraction, the chat
    template) is Python, and takes about as long as the step's forward and backward passes, which
    run in torch's kernels with the GIL released: a thread renders the next batches meanwhile.
    The thread holds the only stream and a tokenizer and prompt builder of its own (both
    deterministic), so the batches are the ones an in-process loop would draw, bit for bit.
    """
    from nemo_genrm.testing.tokenizer import make_tiny_tokenizer

    ready: queue.Queue[Any] = queue.Queue(maxsize=_BATCHES_AHEAD)
    stop = threading.Event()
    end = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def render() -> None:
        try:
            tokenizer = make_tiny_tokenizer(max_position_embeddings)
            builder = judge_prompt_builder(tokenizer)
            rng = random.Random(training.seed)
            for _ in range(training.steps):
                if not put(_cases(rng, training.batch_size, builder, tokenizer)):
                    return
            put(end)
        except BaseException as error:  # raised in the training loop, not lost in the thread
            put(error)

    thread = threading.Thread(target=render, name="demo-judge-batches", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # done, or the training stopped early: the thread stops too
        stop.set()
        thread.join(timeout=10)


def _label_hidden(model, rows: list[list[int]], extra: list[list[int]], keep_prefix: int | None = None) -> torch.Tensor:
    """Final hidden states at each row's last prompt token and at the ``extra`` tokens after it.

    Args:
        model: The causal LM.
        rows: Prompt ids per row.
        extra: Ids appended to each row (the label and EOS while training; empty to score).
        keep_prefix: Keep only this many of the shared prefix's last tokens (the warm-up phase
            of training); ``None`` keeps the whole prompt.

    Returns:
        ``[B, 1 + len(extra[0]), H]``: the states that predict the label and what follows.
    """
    seqs = [r + e for r, e in zip(rows, extra, strict=True)]
    shared = min(len(r) for r in rows) - 1
    for i in range(shared):
        if len({s[i] for s in seqs}) > 1:
            shared = i
            break
    batch = len(seqs)
    start = 0 if keep_prefix is None else max(0, shared - keep_prefix)
    prefix = torch.tensor([seqs[0][start:shared]])  # [1, P]
    cache = model.model(input_ids=prefix, use_cache=True).past_key_values
    for layer in cache.layers:  # one prefix for every row: broadcast its keys and values
        layer.keys = layer.keys.expand(batch, -1, -1, -1)
        layer.values = layer.values.expand(batch, -1, -1, -1)
    tails = [s[shared:] for s in seqs]
    width = max(len(t) for t in tails)
    ids = torch.zeros(batch, width, dtype=torch.long)  # [B, W] right-padded: pads come after
    for i, tail in enumerate(tails):
        ids[i, : len(tail)] = torch.tensor(tail)
    hidden = model.model(input_ids=ids, past_key_values=cache, use_cache=True).last_hidden_state  # [B, W, H]
    n_extra = len(extra[0])
    first = torch.tensor([len(r) - shared - 1 for r in rows])  # [B] last prompt token in the tail
    index = first[:, None] + torch.arange(n_extra + 1)[None, :]  # [B, 1 + n_extra]
    return hidden[torch.arange(batch)[:, None], index]


def _length_chunks(batch: list[_Rendered], chunks: int) -> list[list[_Rendered]]:
    """``batch`` sorted by prompt length and cut into ``chunks`` runs of (nearly) equal size."""
    ordered = sorted(batch, key=lambda case: len(case.ids))
    cuts = [len(ordered) * i // chunks for i in range(chunks + 1)]
    return [ordered[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _chunk_loss(model, probes, chunk: list[_Rendered], labels, eos: int, training, step: int) -> torch.Tensor:
    """Mean loss of ``chunk``: the label and the EOS after it, plus the probes' reading of the
    reference and the candidate's final number at the label position."""
    targets = [[labels[case.label], eos] for case in chunk]
    hidden = _label_hidden(model, [case.ids for case in chunk], targets, training.kept_prefix(step))  # [B, 3, H]
    logits = model.lm_head(hidden[:, :2])  # [B, 2, V]: predicts the label, then EOS
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(targets).flatten())
    if training.probe_weight:
        for name, probe in probes.items():
            read = torch.tensor([getattr(case, name) for case in chunk])  # [B]
            loss = loss + training.probe_weight * torch.nn.functional.cross_entropy(probe(hidden[:, 0]), read)
    return loss


@torch.no_grad()
def judge_accuracy(model, cases: list[_Rendered], pos_id: int, neg_id: int) -> float:
    """Share of cases where the positive label outscores the negative one as the label says."""
    model.eval()
    right = 0
    cases = sorted(cases, key=lambda case: len(case.ids))  # chunks of similar length pad little
    for i in range(0, len(cases), 100):
        chunk = cases[i : i + 100]
        logits = model.lm_head(_label_hidden(model, [c.ids for c in chunk], [[] for _ in chunk])[:, 0])  # [B, V]
        says_yes = (logits[:, pos_id] > logits[:, neg_id]).tolist()
        right += sum(int(y == c.label) for y, c in zip(says_yes, chunk, strict=True))
    return right / len(cases)


def train_demo_judge(path: str | Path, training: JudgeTraining) -> float:
    """Train the demo judge, save it into ``path`` and return its held-out accuracy.

    Args:
        path: Folder to write (model, tokenizer, :data:`JUDGE_REPORT`).
        training: Size, schedule and seed.

    Returns:
        The share of held-out cases judged right (by the label log-probabilities).
    """
    from nemo_genrm.testing.models import TinyModelSpec, new_tiny_model, save_tiny_model
    from nemo_genrm.testing.tokenizer import EOS_TOKEN, make_tiny_tokenizer

    start = time.perf_counter()
    torch.manual_seed(training.seed)
    spec = TinyModelSpec(
        hidden_size=training.hidden_size,
        num_layers=training.num_layers,
        num_heads=training.hidden_size // 32,
        num_kv_heads=training.hidden_size // 32,
        intermediate_size=2 * training.hidden_size,
        seed=training.seed,
    )
    tokenizer = make_tiny_tokenizer(spec.max_position_embeddings)
    builder = judge_prompt_builder(tokenizer)
    model = new_tiny_model(spec, tokenizer).train()
    labels = {True: tokenizer.convert_tokens_to_ids("1"), False: tokenizer.convert_tokens_to_ids("0")}
    eos = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    probes = torch.nn.ModuleDict(
        {
            "reference": torch.nn.Linear(training.hidden_size, NUMBER_CLASSES),
            "candidate": torch.nn.Linear(training.hidden_size, NUMBER_CLASSES),
        }
    )
    params = [*model.parameters(), *(probes.parameters() if training.probe_weight else ())]
    optimizer = torch.optim.AdamW(params, lr=training.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, training.lr, total_steps=training.steps, pct_start=0.1)
    logger.info("Training the demo judge (%d steps, once; cached)", training.steps)
    batches = _training_batches(training, spec.max_position_embeddings)
    with training_progress("demo judge", training.steps, logger) as progress:
        for step, batch in zip(range(training.steps), batches, strict=True):
            loss_sum = 0.0
            for chunk in _length_chunks(batch, training.length_chunks):
                loss = _chunk_loss(model, probes, chunk, labels, eos, training, step)
                (loss * len(chunk) / len(batch)).backward()  # the batch mean's gradient, chunk by chunk
                loss_sum += loss.item() * len(chunk) / len(batch)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            progress(step, loss_sum)
    train_seconds = time.perf_counter() - start
    held_out = _cases(random.Random(training.seed + 10_000), training.held_out, builder, tokenizer)
    accuracy = judge_accuracy(model, held_out, labels[True], labels[False])
    # The same, with honest answers and plain distractors only: what the red-team training must not cost.
    plain = _cases(random.Random(training.seed + 20_000), training.held_out, builder, tokenizer, red_team=False)
    plain_accuracy = judge_accuracy(model, plain, labels[True], labels[False])
    forms = [c for c in plain if c.honest_form]
    save_tiny_model(model.eval(), spec, path)
    report = {
        "held_out_accuracy": accuracy,
        "held_out_cases": len(held_out),
        "plain_held_out_accuracy": plain_accuracy,
        "train_seconds": train_seconds,
        "honest_forms_accuracy": judge_accuracy(model, forms, labels[True], labels[False]) if forms else None,
        "honest_forms_cases": len(forms),
        "training": training.to_dict(),
    }
    (Path(path) / JUDGE_REPORT).write_text(json.dumps(report, indent=2) + "\n")
    logger.info(
        "Demo judge: %.1f%% right on %d held-out pairs, %.1f%% on plain ones (%.0fs)",
        100 * accuracy,
        len(held_out),
        100 * plain_accuracy,
        train_seconds,
    )
    return accuracy
