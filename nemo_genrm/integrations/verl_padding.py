"""verl's batch reward path for pairwise groups: its padded batch put together, its padding copies told apart.

With a reward model colocated with the policy, verl's trainer scores a whole batch through
``RewardLoopManager.compute_rm_score``: it pads the batch to a multiple of its worker count with
exact copies of its first rows (``pad_dataproto_to_divisor``: row ``n + j`` copies row
``j % n``), gives worker ``i`` (``reward_loop_worker_<i>``) the ``i``-th contiguous chunk and
keeps the first ``n`` results. A copy is equal to its original in everything, and so is an
honest twin (a response sampled twice for the same prompt), so no group can be settled row by
row there: a copy arriving before a row of its group would be ranked in that row's place, and a
copy arriving after its group was ranked would open a phantom group that waits and owes.

So each row comes with its place in the padded batch (:class:`BatchSlot`, from
:class:`~nemo_genrm.integrations.verl_manager.GenRMRewardManager`), and the shared pairwise judge
(:class:`~nemo_genrm.integrations.verl_groups.GroupJudgeActor`) puts the whole batch together
(:class:`PaddedBatches`) before judging any of it. Then the copies are told apart by the rule
of :func:`padding_sources` (the batch's last rows, fewer than the worker count, repeating its
first rows in verl's order, and leaving no group they copy smaller than the batch's other
groups); every other row is judged in ONE call that holds whole groups (nothing waits, nothing
is owed, no later step or validation inherits anything), and each copy gets the judgement of
the row it copies, which verl drops: a copy is never ranked, never counted in the metrics,
never opens or owes a group. A batch still missing rows ``group_wait_ms`` after its first one
came (a worker lost) is masked in full (``incomplete_group``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

from nemo_genrm.integrations.judge_reward import Judgement, JudgeReward
from nemo_genrm.samples.types import INCOMPLETE_GROUP

logger = logging.getLogger(__name__)

__all__ = ["BatchSlot", "PaddedBatches", "padding_sources"]


class BatchSlot(NamedTuple):
    """A row's place in verl's padded batch on the batch reward path.

    Attributes:
        chunk: The chunk the row is in (the worker's index: worker ``i`` scores chunk ``i``).
        chunks: Chunks in the batch (``reward.num_workers``).
        position: The row's place in its chunk.
        size: Rows in its chunk.
    """

    chunk: int
    chunks: int
    position: int
    size: int


def padding_sources(rows: Sequence[Hashable], groups: Sequence[Hashable], chunks: int) -> list[int]:
    """Per row of verl's padded batch, the index of the real row it is or copies.

    ``pad_dataproto_to_divisor`` appends ``pad < chunks`` rows to a batch of ``n``: row ``n + j``
    is a copy of row ``j % n``, equal to it in everything. A response sampled twice is equal to
    its twin too, so a tail that repeats the batch's first rows may be honest. The rule: the
    padding is the longest tail, shorter than ``chunks``, that repeats the batch's first rows in
    verl's order and whose removal leaves each group it copies at least as many rows as the
    smallest group it does not touch. verl's groups are all one size (a training step's
    ``rollout.n``, a validation's ``val_kwargs.n``; only verl's legacy validation adds
    trajectories, to its first prompts): an honest twin at the tail would take its group below
    the others, a copy never does, whether the groups are full or short. When the tail touches
    every group, nothing tells their size and the longest repeating tail is the padding: a twin
    taken for a copy then leaves its group short, masked, never ranked with a copy in it.

    Args:
        rows: Per row, what identifies its content (identical for a copy and its original).
        groups: Per row, its group.
        chunks: Chunks the padded batch was cut into (the padding is shorter).

    Returns:
        Per row, its own index (a real row) or that of the row it copies (a padding row).
    """
    total = len(rows)
    counts = Counter(groups)
    for pad in range(min(chunks - 1, total - 1), 0, -1):
        real = total - pad
        if any(rows[real + j] != rows[j % real] for j in range(pad)):
            continue
        copied = {groups[j % real] for j in range(pad)}
        kept = Counter(groups[:real])
        smallest = min((count for group, count in counts.items() if group not in copied), default=1)
        if all(kept[group] >= smallest for group in copied):
            return list(range(real)) + [j % real for j in range(pad)]
    return list(range(total))


Sample = tuple[str, Any, Any, Any]
"""``(answer, reference, question, extras)``, as :meth:`JudgeReward.ajudge` takes them."""


class _PaddedBatch:
    """The rows of one padded batch as they come, by their place in it."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.sizes: dict[int, int] = {}
        self.rows: dict[tuple[int, int], tuple[Sample, asyncio.Future]] = {}
        self.timer: asyncio.TimerHandle | None = None

    def takes(self, slot: BatchSlot) -> bool:
        """Whether ``slot`` fits this batch (not taken, its chunk's size as the others said)."""
        return (
            slot.chunks == self.chunks
            and self.sizes.get(slot.chunk, slot.size) == slot.size
            and (slot.chunk, slot.position) not in self.rows
        )

    def add(self, slot: BatchSlot, sample: Sample, future: asyncio.Future) -> None:
        self.sizes[slot.chunk] = slot.size
        self.rows[slot.chunk, slot.position] = (sample, future)

    def complete(self) -> bool:
        return len(self.sizes) == self.chunks and len(self.rows) == sum(self.sizes.values())

    def ordered(self) -> list[tuple[Sample, asyncio.Future]]:
        """Every row in the padded batch's order."""
        return [self.rows[chunk, position] for chunk in range(self.chunks) for position in range(self.sizes[chunk])]


class PaddedBatches:
    """verl's padded batches, put together row by row and judged once each is whole (module docstring).

    Args:
        reward: The pairwise judge (``reward.pairwise_group.group_size`` set).
        wait_s: How long a batch may wait for its missing rows (``group_wait_ms``).
    """

    def __init__(self, reward: JudgeReward, wait_s: float) -> None:
        self._reward, self._wait_s = reward, wait_s
        self._batch: _PaddedBatch | None = None  # the batch coming in
        self._judging: set[asyncio.Task] = set()  # kept referenced until done

    async def judge(self, sample: Sample, slot: BatchSlot) -> Judgement:
        """One row's judgement, once its whole batch is here.

        Raises:
            Whatever the judge call raises (every row of the batch raises it).
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        batch = self._batch
        if batch is not None and not batch.takes(slot):  # a row of another batch: this one cannot fill
            self._give_up(batch, "a row of another batch came")
            batch = None
        if batch is None:
            batch = self._batch = _PaddedBatch(slot.chunks)
            batch.timer = loop.call_later(self._wait_s, self._give_up, batch, "group_wait_ms passed")
        batch.add(slot, sample, future)
        if batch.complete():
            self._batch = None
            batch.timer.cancel()
            task = loop.create_task(self._judge_batch(batch))  # not cancelled with this row's call
            self._judging.add(task)
            task.add_done_callback(self._judging.discard)
        return await future

    async def _judge_batch(self, batch: _PaddedBatch) -> None:
        """The real rows in one call that holds whole groups; each copy gets its original's judgement."""
        rows = batch.ordered()
        try:
            samples = [sample for sample, _ in rows]
            identities = [json.dumps(sample, sort_keys=True, default=str) for sample in samples]
            groups = [json.dumps(extras, sort_keys=True, default=str) for *_, extras in samples]
            sources = padding_sources(identities, groups, batch.chunks)
            real = [sample for i, (sample, source) in enumerate(zip(samples, sources, strict=True)) if source == i]
            if len(real) < len(rows):
                logger.info("pairwise_group: %d of verl's %d batch rows are padding", len(rows) - len(real), len(rows))
            answers, references, questions, extras = (list(column) for column in zip(*real, strict=True))
            judged = await self._reward.ajudge(answers, references, questions, extras, whole_groups=True)
        except BaseException as exc:  # noqa: BLE001 - every row of the batch raises it
            for _, future in rows:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), source in zip(rows, sources, strict=True):
            if not future.done():
                future.set_result(judged[source])

    def _give_up(self, batch: _PaddedBatch, why: str) -> None:
        """Mask every row of a batch that cannot be completed (its copies cannot be told apart)."""
        if self._batch is batch:
            self._batch = None
        if batch.timer is not None:
            batch.timer.cancel()
        expected = sum(batch.sizes.values()) if len(batch.sizes) == batch.chunks else "?"
        logger.warning(
            "pairwise_group: verl's padded batch had %d of %s rows when %s; its rows are masked (incomplete_group)",
            len(batch.rows),
            expected,
            why,
        )
        for (answer, *_), future in batch.rows.values():
            if not future.done():
                future.set_result(Judgement(0.0, INCOMPLETE_GROUP, None, answer, masked=True))
