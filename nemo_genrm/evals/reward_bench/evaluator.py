"""Score a judge on RewardBench through the same judge engines the GenRM environment uses.

Protocols (``protocol`` in :class:`~nemo_genrm.config.RewardBenchConfig`):

- ``pairwise`` (reward-bench's generative evaluation): one judge call per example with chosen
  and rejected placed as A and B by a coin seeded from ``seed`` and the example id (or drawn
  unseeded, as the reference does, with ``placement: reference_random``); the verdict
  is ``[[A]]`` or ``[[B]]``. Correct 1, wrong 0, no verdict 0.5 (counted as an error).
  ``both_orders: true`` also judges the swapped placement and reports position consistency;
  the headline accuracy still uses the coin's placement only, so it stays comparable.
- ``rating``: each response rated alone; the higher rating wins, equal ratings score 0.5
  (ties), a missing rating scores 0.5 (error).

With ``judge.verdict_from: logprobs`` the verdict is the most probable label from one forward
pass (the two choice markers, or every rating) instead of parsed text.

Outputs under ``output_dir``: ``examples.jsonl`` (one record per example, appended and flushed
per batch, so an interrupted run resumes where it stopped), ``results.json`` in reward-bench's
own shape (and ``results_pref_sets.json`` for the prior sets), ``summary.json`` with sections,
``Score`` and the project's counters (see :mod:`.results`), and ``run_config.json``
(what a resume must match).

Examples too long for the judge's context are skipped and counted per subset, or have both
responses shortened alike (``long_prompts``, see :mod:`.judge_requests`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.config import REFERENCE_MAX_NEW_TOKENS, ConfigError, RewardBenchConfig
from nemo_genrm.console import progress
from nemo_genrm.evals.reward_bench.data import RewardBenchExample
from nemo_genrm.evals.reward_bench.judge_requests import RequestBuilder, RequestPlan
from nemo_genrm.evals.reward_bench.preset import (
    RewardBenchPreset,
    load_rewardbench_preset,
    reference_choice,
    reference_rating,
)
from nemo_genrm.evals.reward_bench.results import (
    PREF_RESULTS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    model_label,
    model_type,
    results_row,
    write_json,
)
from nemo_genrm.evals.reward_bench.scores import (
    OVERALL,
    ExampleScore,
    RewardBenchScores,
    pairwise_score,
    rating_score,
)
from nemo_genrm.evals.reward_bench.store import EXAMPLES_FILE, RecordStore, fingerprint
from nemo_genrm.judges.base import Judge, JudgeRequest
from nemo_genrm.judges.fitting import PROMPT_TOO_LONG
from nemo_genrm.prompts import JudgeTemplate, load_template, template_labels_from_config
from nemo_genrm.verdicts import Verdict, VerdictParser
from nemo_genrm.verdicts.voting import majority

logger = logging.getLogger(__name__)

PROVIDED_FIELDS = {"pairwise": ("question", "response_a", "response_b"), "rating": ("question", "response")}


@dataclass(frozen=True)
class JudgeReply:
    """One engine answer, from ``generate`` (text) or ``score`` (probabilities)."""

    text: str | None
    probs: dict[str, float] | None
    error: str | None

    @property
    def output(self) -> Any:
        """What the per-example record keeps as the judge's raw output."""
        return self.probs if self.probs is not None else self.text


@dataclass
class RewardBenchOutcome:
    """The result of a run.

    Attributes:
        scores: Per-subset and per-section scores.
        results: ``results.json`` as written (reward-bench's shape).
        summary: ``summary.json`` as written (sections, Score, the project's extras).
        output_dir: Where the files are.
        judged: Examples judged in this call.
        resumed: Examples taken from an earlier, interrupted run.
    """

    scores: RewardBenchScores
    results: dict[str, Any]
    summary: dict[str, Any]
    output_dir: Path
    judged: int
    resumed: int

    @property
    def results_path(self) -> Path:
        """The results JSON (reward-bench's shape)."""
        return self.output_dir / RESULTS_FILE

    @property
    def summary_path(self) -> Path:
        """The summary JSON (sections, Score, counters, settings)."""
        return self.output_dir / SUMMARY_FILE

    @property
    def examples_path(self) -> Path:
        """The per-example JSONL."""
        return self.output_dir / EXAMPLES_FILE


def _chunks(items: Sequence[RewardBenchExample], size: int) -> Iterator[Sequence[RewardBenchExample]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class RewardBenchEvaluator:
    """Judges RewardBench examples with one judge engine and writes the results.

    Built before the judge starts, so prompt and preset problems surface first.

    Args:
        cfg: The evaluation config.

    Raises:
        ConfigError: The prompt template or preset cannot be loaded for the protocol.
    """

    def __init__(self, cfg: RewardBenchConfig) -> None:
        if cfg.protocol not in PROVIDED_FIELDS:
            raise ConfigError(
                [f"protocol {cfg.protocol!r} is RewardBench 2: use RewardBench2Evaluator (evaluator_for)"]
            )
        self.cfg = cfg
        self.parser = VerdictParser.from_config(cfg.verdict)
        self.markers: tuple[str, str] = (cfg.verdict.choice_markers[0], cfg.verdict.choice_markers[1])
        self.preset: RewardBenchPreset | None = None
        if cfg.prompt.preset == "rewardbench":
            self.preset = load_rewardbench_preset(cfg.protocol)
            self.template: JudgeTemplate = self.preset.template
            if cfg.prompt.neutralise:
                logger.info("prompt.preset rewardbench: responses are sent unchanged, as the reference does")
        else:
            self.template = load_template(
                cfg.prompt.template,
                provided_fields=PROVIDED_FIELDS[cfg.protocol],
                labels=template_labels_from_config(cfg.verdict),
            )
        self.neutralise = cfg.prompt.neutralise and self.preset is None
        self.builder = RequestBuilder(cfg, self.template, self.preset, self.markers, self.neutralise)
        self.requests_per_example = 2 if (cfg.protocol == "rating" or cfg.both_orders) else 1
        self.output_dir = Path(cfg.output_dir)
        reference_tokens = REFERENCE_MAX_NEW_TOKENS[cfg.protocol]
        if self.preset is not None and cfg.judge.sampling.max_new_tokens < reference_tokens:
            logger.warning(
                "judge.sampling.max_new_tokens is %d but the reference lets the judge write %d tokens: a "
                "verdict written after token %d is cut off here and read by the reference",
                cfg.judge.sampling.max_new_tokens,
                reference_tokens,
                cfg.judge.sampling.max_new_tokens,
            )

    # ------------------------------------------------------------------------- requests
    def plan(self, example: RewardBenchExample) -> RequestPlan:
        """The judge requests of one example and its placement (see :mod:`.judge_requests`)."""
        return self.builder.plan(example)

    # --------------------------------------------------------------------------- judging
    def _labels(self) -> list[str]:
        if self.cfg.protocol == "pairwise":
            return list(self.markers)
        return [str(r) for r in range(self.cfg.verdict.rating_min, self.cfg.verdict.rating_max + 1)]

    def _ballots(self, judges: Sequence[Judge], requests: list[JudgeRequest]) -> list[list[JudgeReply]]:
        """Every member's replies to every request (``votes`` each): one ballot per request."""
        votes = self.cfg.votes
        ballots: list[list[JudgeReply]] = [[] for _ in requests]
        for judge, member in zip(judges, self.cfg.members, strict=True):
            replies = self._ask(judge, [r for r in requests for _ in range(votes)], member.verdict_from)
            for index, ballot in enumerate(ballots):
                ballot.extend(replies[index * votes : (index + 1) * votes])
        return ballots

    def _ask(self, judge: Judge, requests: list[JudgeRequest], verdict_from: str) -> list[JudgeReply]:
        if verdict_from == "logprobs":
            scored = judge.score(requests, self._labels())
            replies = [JudgeReply(None, s.probs, s.error) for s in scored]
        else:
            generated = judge.generate(requests)
            replies = [JudgeReply(g.text, None, g.error) for g in generated]
        if len(replies) != len(requests):
            raise RuntimeError(f"judge returned {len(replies)} results for {len(requests)} requests")
        return replies

    def _verdict(self, reply: JudgeReply) -> Verdict:
        if reply.probs is not None:
            labels = self._labels()
            best = max(labels, key=lambda label: reply.probs.get(label, 0.0))  # type: ignore[union-attr]
            if self.cfg.protocol == "pairwise":
                return Verdict("AB"[labels.index(best)], "ok")
            return Verdict(int(best), "ok")
        if reply.text is None:
            return Verdict(None, f"judge_error:{reply.error}")
        if self.preset is not None and self.cfg.protocol == "rating":
            # Parity: the reference reads only a 1-10 integer that ends the reply.
            rating = reference_rating(reply.text)
            return Verdict(rating, "ok") if rating is not None else Verdict(None, "no_trailing_rating")
        if self.preset is not None:
            # Parity: the reference searches the whole reply, <think> blocks included, for the A
            # marker first, then the B marker.
            choice = reference_choice(reply.text, self.markers)
            return Verdict(choice, "ok") if choice is not None else Verdict(None, "no_marker")
        return self.parser.parse(reply.text)

    def _side(self, placement: str, ballot: Sequence[JudgeReply]) -> dict[str, Any]:
        if len(ballot) == 1:
            verdict = self._verdict(ballot[0])
            value, reason, extra = verdict.value, verdict.reason, {"output": ballot[0].output}
        else:
            votes = [self._verdict(r).value for r in ballot]
            result = majority(votes, ties=self.cfg.ties)
            value, reason = result.verdict, "tie" if result.tie else "majority"
            extra = {"output": [r.output for r in ballot], "votes": votes, "agreement": result.agreement}
        return {
            "placement": placement,
            "verdict": value,
            "verdict_reason": reason,
            "judge_error": next((r.error for r in ballot if r.error is not None), None),
            "score": pairwise_score(value, placement),  # type: ignore[arg-type]
            **extra,
        }

    def record_for(
        self, example: RewardBenchExample, plan: RequestPlan, ballots: Sequence[Sequence[JudgeReply]]
    ) -> dict[str, Any]:
        """The per-example JSONL record from its plan and each request's replies (see :meth:`plan`)."""
        head = {"id": example.id, "subset": example.subset, "protocol": self.cfg.protocol}
        head["skipped"] = any(r.error == PROMPT_TOO_LONG for ballot in ballots for r in ballot)
        head["shortened"] = plan.shortened
        if self.cfg.protocol == "rating":
            replies = [ballot[0] for ballot in ballots]  # no rating ensembles (validated)
            verdicts = [self._verdict(r) for r in replies]
            ratings = [v.value for v in verdicts]
            missing = any(r is None for r in ratings)
            return {
                **head,
                "placement": None,
                "verdict": {"chosen": ratings[0], "rejected": ratings[1]},
                "verdict_reason": {"chosen": verdicts[0].reason, "rejected": verdicts[1].reason},
                "judge_error": {"chosen": replies[0].error, "rejected": replies[1].error},
                "score": rating_score(ratings[0], ratings[1]),  # type: ignore[arg-type]
                "error": missing,
                "tie": not missing and ratings[0] == ratings[1],
                "output": {"chosen": replies[0].output, "rejected": replies[1].output},
            }
        first = self._side(plan.placement, ballots[0])  # type: ignore[arg-type]
        record = {**head, **first, "error": first["verdict"] is None}
        if self.cfg.both_orders:
            swapped = self._side("chosen_b" if first["placement"] == "chosen_a" else "chosen_a", ballots[1])
            both_parsed = first["verdict"] is not None and swapped["verdict"] is not None
            record["swapped"] = swapped
            record["consistent"] = both_parsed and first["score"] == swapped["score"]
        return record

    # ------------------------------------------------------------------------------ run
    def run(self, examples: Sequence[RewardBenchExample], judge: Judge | Sequence[Judge]) -> RewardBenchOutcome:
        """Judge every example not already in ``output_dir``, then score and write the results.

        Args:
            examples: The examples (see :func:`~nemo_genrm.evals.reward_bench.data.load_examples`).
            judge: A started judge, or one per member of ``judges`` in order (see
                :func:`open_judges`); the caller shuts them down.

        Returns:
            The outcome; ``results.json`` is written.

        Raises:
            ValueError: No examples.
            ConfigError: ``output_dir`` holds a run with other settings or other data.
        """
        if not examples:
            raise ValueError("no RewardBench examples to judge")
        judges = [judge] if isinstance(judge, Judge) else list(judge)
        if len(judges) != len(self.cfg.members):
            raise ValueError(f"{len(judges)} judge(s) given for {len(self.cfg.members)} configured")
        store = RecordStore(self.output_dir, fingerprint(self.cfg))
        clashes = [ex.key for ex in examples if ex.key in store and store[ex.key]["subset"] != ex.subset]
        if clashes:
            message = (
                f"output_dir {str(self.output_dir)!r} holds records for ids {', '.join(clashes[:5])} under other "
                "subsets than the data: it was made from different data; use another output_dir"
            )
            raise ConfigError([message])
        # A record whose judge call failed (engine error, not an unparseable reply) is judged again.
        retry = [ex for ex in examples if ex.key in store and _engine_failed(store[ex.key])]
        todo = [ex for ex in examples if ex.key not in store or _engine_failed(store[ex.key])]
        resumed = len(examples) - len(todo)
        if resumed or retry:
            logger.info(
                "resuming: %d of %d examples already judged in %s; re-judging %d that hit a judge error",
                resumed,
                len(examples),
                self.output_dir,
                len(retry),
            )
        per_call = self.cfg.judge.batching.max_batch_size * self.cfg.resources.num_replicas
        per_chunk = max(1, per_call // (self.requests_per_example * self.cfg.votes))
        pending = {ex.key for ex in todo}
        done = [ExampleScore.from_record(store[ex.key]) for ex in examples if ex.key not in pending]
        done = [d for d in done if not math.isnan(d.score)]
        try:
            # A bar on a terminal; a line every 30 s in a file (no redrawn bar there).
            with progress("RewardBench", len(examples), unit="example", initial=resumed, log=logger) as bar:
                for chunk in _chunks(todo, per_chunk):
                    plans = [self.plan(ex) for ex in chunk]
                    ballots = iter(self._ballots(judges, [r for plan in plans for r in plan.requests]))
                    records = [
                        self.record_for(ex, plan, [next(ballots) for _ in plan.requests])
                        for ex, plan in zip(chunk, plans, strict=True)
                    ]
                    store.append(records)
                    done += [d for d in map(ExampleScore.from_record, records) if not math.isnan(d.score)]
                    bar.update(len(chunk), **_running(done))
        finally:
            store.close()
        chosen = [store[ex.key] for ex in examples]
        scores = self._scores(chosen)
        results, summary = self._write_results(scores, chosen)
        scores.log(logger)
        return RewardBenchOutcome(scores, results, summary, self.output_dir, judged=len(todo), resumed=resumed)

    def _scores(self, records: Sequence[dict[str, Any]]) -> RewardBenchScores:
        """The scores of the selected examples' records."""
        return RewardBenchScores.from_examples(ExampleScore.from_record(r) for r in records)

    def _write_results(
        self, scores: RewardBenchScores, records: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Write ``results.json`` (and the prior sets' file) and ``summary.json``; return both dicts."""
        label, kind = model_label(self.cfg), model_type(self.cfg)
        results = results_row(label, scores.subset_accuracy(pref_sets=False), kind)
        write_json(self.output_dir / RESULTS_FILE, results)
        pref = scores.subset_accuracy(pref_sets=True)
        if pref:
            write_json(self.output_dir / PREF_RESULTS_FILE, results_row(label, pref, kind))
        head = {"model": label, "model_type": kind, **scores.sections}
        if scores.score is not None:
            head[OVERALL] = scores.score
        summary = {**head, "nemo_genrm": self._details(scores, records)}
        write_json(self.output_dir / SUMMARY_FILE, summary)
        return results, summary

    def _details(self, scores: RewardBenchScores, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        prompt = self.preset.describe() if self.preset else {"template": self.template.name, "preset": None}
        placements = None
        if self.cfg.protocol == "pairwise":
            placements = {p: sum(r["placement"] == p for r in records) for p in ("chosen_a", "chosen_b")}
        return {
            **scores.details(),
            "judge_errors": sum(_engine_failed(r) for r in records),
            "protocol": self.cfg.protocol,
            "both_orders": self.cfg.both_orders,
            "seed": self.cfg.seed,
            "placements": placements,
            "prompt": prompt,
            "placement": self.cfg.placement,
            "long_prompts": self.cfg.long_prompts,
            "judge": fingerprint(self.cfg)["judge"],
            "examples_file": EXAMPLES_FILE,
        }


def _engine_failed(record: dict[str, Any]) -> bool:
    """Whether a judge call of a record failed in the engine and may succeed on a retry.

    A reply that did not parse is no failure, nor is a prompt too long for the judge (it would
    be too long again).
    """
    errors = record["judge_error"]
    errors = list(errors.values()) if isinstance(errors, dict) else [errors]
    swapped = record.get("swapped")
    if isinstance(swapped, dict):
        errors.append(swapped.get("judge_error"))
    return any(e is not None and e != PROMPT_TOO_LONG for e in errors)


def _running(done: Sequence[ExampleScore]) -> dict[str, Any]:
    """Shown beside the count: running accuracy and error count."""
    if not done:
        return {}
    return {"acc": f"{sum(d.score for d in done) / len(done):.3f}", "err": sum(d.error for d in done)}
