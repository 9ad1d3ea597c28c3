"""The dtensor judge engine: the in-process worker, and replicas / tensor parallel on Ray (CPU).

Everything runs in float32 on tiny models built offline, so engines can be compared exactly.
Ray actors are the expensive part (each imports transformers), so the judges are module-scoped
and shared: one pool of two TP=1 replicas, one TP=2 replica, and one judge with a short deadline.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges import (
    JUDGE_ERROR,
    TIMEOUT,
    JudgeRequest,
    Placement,
    ReplicaPlacement,
    create_judge,
)
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model
from nemo_genrm.testing.cluster import kill_actor

INSTRUCTIONS = "Reply with 1 if the candidate matches the reference, else 0."
LABELS = ["1", "0", "Judgement: 1"]  # the last one is several tokens: teacher-forced
CPU = ReplicaPlacement(num_gpus=0.0, num_cpus=1.0)


def _config(path, **overrides) -> JudgeConfig:
    config = {
        "backend": "dtensor",
        "model_name": str(path),
        "precision": "float32",
        "max_model_len": 256,
        "sampling": {"max_new_tokens": 6},
        "batching": {"max_batch_size": 32, "max_tokens_per_batch": 4096},
    }
    config.update(overrides)
    return JudgeConfig.model_validate(config)


def _prompts(n: int) -> list[list[dict]]:
    """Prompts of mixed lengths (2 to 50 filler words), each with its own number."""
    return [
        [{"role": "user", "content": f"Item {i}: " + "alpha beta " * (1 + (i * 7) % 25) + INSTRUCTIONS}]
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def model_path(tiny_cache_dir):
    return cached_tiny_model()


@pytest.fixture(scope="module")
def worker(model_path):
    """The in-process (no Ray) worker on the random tiny model: the reference engine."""
    w = LocalTransformersJudge(_config(model_path))
    yield w
    w.shutdown()


@pytest.fixture(scope="module")
def pool_judge(ray_cluster, model_path):
    # No back-off: a crashed replica comes back within the call that saw it (the back-off
    # itself is tested in tests/unit/judges/test_restart_budget.py and test_judge_recovery.py).
    judge = create_judge(
        _config(model_path), Placement((CPU, CPU)), fault_tolerance={"max_restarts": 2, "restart_backoff_s": 0.0}
    )
    yield judge
    judge.shutdown()


@pytest.fixture(scope="module")
def tp2_judge(ray_cluster, model_path):
    judge = create_judge(
        _config(model_path, dtensor={"tensor_parallel_size": 2}),
        Placement((CPU,)),
        fault_tolerance={"restart_backoff_s": 0.0},  # restart at once, as the test expects
    )
    yield judge
    judge.shutdown()


# ----------------------------------------------------------------------------- in process
def test_worker_batches_like_single_prompts(worker):
    prompts = _prompts(5)
    batched = worker.score(prompts, LABELS)
    texts = worker.generate(prompts)
    for prompt, scores, gen in zip(prompts, batched, texts, strict=True):
        alone = worker.score([prompt], LABELS)[0]
        # Left padding and position ids leave each prompt's distribution unchanged.
        for label in LABELS:
            assert scores.probs[label] == pytest.approx(alone.probs[label], abs=1e-5)
        assert abs(sum(scores.probs.values()) - 1.0) < 1e-9
        assert gen.text == worker.generate([prompt])[0].text
        assert 1 <= gen.output_tokens <= 6 and gen.prompt_tokens == scores.prompt_tokens > 0
    stats = worker.stats()
    assert stats.prompts_scored == 10 and stats.prompts_generated == 10 and stats.errors == 0


@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("1", ["1", "0"], "1"),
        ("0", ["1", "0"], "0"),
        ("[[A]]", ["[[A]]", "[[B]]"], "[[A]]"),
        ("Judgement: 1", ["Judgement: 1", "Judgement: 0"], "Judgement: 1"),  # differs at token 3
        ("maybe", ["maybe", "1", "0"], "maybe"),
    ],
)
def test_fixed_verdict_judges(tiny_cache_dir, text, labels, expected):
    worker = LocalTransformersJudge(_config(cached_tiny_judge(text)))
    prompts = _prompts(3)
    assert [g.text for g in worker.generate(prompts)] == [text] * 3
    for scores in worker.score(prompts, labels):
        assert scores.probs[expected] > 0.99
    if text == "maybe":  # an off-label judge says nothing about 1 vs 0: an even split
        for scores in worker.score(prompts, ["1", "0"]):
            assert scores.probs["1"] == pytest.approx(0.5, abs=1e-6)
    worker.shutdown()


def test_sleep_then_wake_gives_identical_outputs(worker):
    prompts = _prompts(4)
    before = (worker.generate(prompts), worker.score(prompts, LABELS))
    worker.sleep()
    assert worker.asleep and worker.stats().extra["asleep"]
    assert all(p.numel() == 0 for p in worker.model.parameters())  # weights really left
    worker.wake()
    after = (worker.generate(prompts), worker.score(prompts, LABELS))
    assert after == before
    # Called while asleep, the worker wakes itself rather than computing on empty weights.
    worker.sleep()
    assert worker.score(prompts, LABELS) == before[1] and not worker.asleep


def test_long_candidate_is_shortened_and_instructions_survive(worker):
    candidate = "the sum of the series is computed term by term " * 60
    request = JudgeRequest(
        messages=({"role": "user", "content": f"Candidate: {candidate}\n{INSTRUCTIONS}"},),
        shrinkable=candidate,
    )
    gens, counts = worker.generate_counted([request, _prompts(1)[0]])
    assert gens[0].truncated and gens[0].error is None and gens[0].prompt_tokens <= 256 - 6
    assert not gens[1].truncated
    assert counts.truncated == 1
    fitted = worker.fitter.fit([request])[0]
    assert INSTRUCTIONS in worker.tokenizer.decode(list(fitted.token_ids))
    # Without a shrinkable part the same prompt cannot fit: an error, never an exception.
    too_long = JudgeRequest(messages=request.messages)
    assert worker.score([too_long], LABELS)[0].error == "prompt_too_long"


# -------------------------------------------------------------------------------------- Ray
def test_tensor_parallel_matches_single_rank(worker, tp2_judge):
    prompts = _prompts(6)
    assert [g.text for g in tp2_judge.generate(prompts)] == [g.text for g in worker.generate(prompts)]
    for ours, ref in zip(tp2_judge.score(prompts, LABELS), worker.score(prompts, LABELS), strict=True):
        assert ours.error is None
        for label in LABELS:
            assert ours.probs[label] == pytest.approx(ref.probs[label], abs=1e-5)


def test_tensor_parallel_sleep_and_wake(tp2_judge):
    prompts = _prompts(3)
    before = tp2_judge.score(prompts, LABELS)
    tp2_judge.sleep()
    assert tp2_judge.stats().extra["asleep"]
    tp2_judge.wake()
    assert tp2_judge.score(prompts, LABELS) == before


def test_two_replicas_keep_input_order(worker, pool_judge):
    prompts = _prompts(1000)
    chunks_before = pool_judge.stats().extra["chunks_per_replica"]
    ours, counts = pool_judge.score_counted(prompts, ["1", "0"])
    ref = worker.score(prompts, ["1", "0"])
    assert len(ours) == 1000
    got = torch.tensor([s.probs["1"] for s in ours], dtype=torch.float64)
    want = torch.tensor([s.probs["1"] for s in ref], dtype=torch.float64)
    assert torch.allclose(got, want, atol=1e-5, rtol=0)
    assert len(set(want.tolist())) > 900  # the check can see a swap: the values differ
    assert counts.prompts_scored == 1000 and counts.errors == 0
    chunks_after = pool_judge.stats().extra["chunks_per_replica"]
    assert all(a > b for a, b in zip(chunks_after, chunks_before, strict=True))  # both replicas worked


def test_deadline_replaces_the_busy_replica_for_free_then_a_crash_without_budget_gives_judge_errors(
    ray_cluster, model_path
):
    # The deadline leaves room to fit 300 prompts on a loaded machine (else nothing is dispatched
    # and nothing replaced); 600 new tokens each still last far longer than it.
    config = _config(model_path, sampling={"max_new_tokens": 600}, max_model_len=1024)
    judge = create_judge(config, Placement((CPU,)), fault_tolerance={"max_restarts": 0, "step_timeout_s": 4.0})
    try:
        start = time.monotonic()
        gens = judge.generate(_prompts(300))
        assert time.monotonic() - start < 14.0  # returns at its deadline, not when the work ends
        assert len(gens) == 300 and any(g.error == TIMEOUT for g in gens)
        assert all(g.error in (None, TIMEOUT) for g in gens)
        assert all((g.text is None) == (g.error is not None) for g in gens)
        stats = judge.stats()
        # The busy replica is being replaced in the background, spending no restart.
        assert stats.restarts == 0 and stats.deadline_exceeded == 1 and stats.extra["replacements"] == 1
        assert judge.pool.num_alive == 1
        # The replacement dies and there is no restart to spend: no replica is left, and the
        # samples come back as judge_error at once instead of an exception or a hang.
        kill_actor(judge.pool.actors()[0][0])  # returns once it is dead
        start = time.monotonic()
        failed = judge.score(_prompts(2), ["1", "0"])
        assert time.monotonic() - start < 10.0
        assert [s.error for s in failed] == [JUDGE_ERROR, JUDGE_ERROR]
        assert all(s.probs is None for s in failed)
        assert judge.stats().restarts == 0 and judge.pool.num_alive == 0
        assert judge.stats().unavailable_calls == 1
    finally:
        judge.shutdown()
        judge.shutdown()  # safe twice


def test_killed_worker_is_restarted_and_the_call_completes(ray_cluster, worker, pool_judge):
    # Last in the module: the replacement replica is still loading when the module's judges
    # are shut down, so its start costs no other test anything.
    prompts = _prompts(64)
    ref = [g.text for g in worker.generate(prompts)]
    before = pool_judge.stats().restarts
    victim = pool_judge.pool.actors()[0][0]
    killer = threading.Timer(0.3, lambda: ray_cluster.kill(victim, no_restart=True))
    killer.start()
    texts = [g.text for g in pool_judge.generate(prompts)]
    killer.join()
    if pool_judge.stats().restarts == before:  # the kill landed after the call: the next sees it
        texts = [g.text for g in pool_judge.generate(prompts)]
    assert texts == ref
    assert pool_judge.stats().restarts == before + 1
    assert pool_judge.pool.num_alive == 2


def test_a_dead_rank_takes_its_whole_tensor_parallel_replica_down(ray_cluster, tp2_judge):
    # Rank 1 dies; the next call to the replica (here the broadcast of sleep) sees it, and the
    # surviving rank 0, which would hang in its next collective, is killed with it. The new
    # ranks start in the background (and come back asleep, as the judge now is).
    old = tp2_judge.pool.actors()[0]
    ray_cluster.kill(old[1], no_restart=True)
    before = tp2_judge.stats().restarts
    tp2_judge.sleep()
    assert tp2_judge.stats().restarts == before + 1
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        ray_cluster.get(old[0].address.remote(), timeout=30)
    new = tp2_judge.pool.actors()[0]
    assert len(new) == 2 and not set(new) & set(old)


# -------------------------------------------------------------------------------- GPU (nccl)
def _tp_rank(rank: int, port: int, path: str, generation: str, results) -> None:
    """One rank of a two-rank replica (a spawned process): its generations and scores."""
    worker = LocalTransformersJudge(
        _config(path, dtensor={"generation": generation}),
        rank=rank,
        world_size=2,
        master_port=port,
        local_rank=rank,
        num_threads=1,
    )
    try:
        prompts = _prompts(6)
        texts = [g.text for g in worker.generate(prompts)]
        results.put((rank, texts, [s.probs for s in worker.score(prompts, LABELS)]))
    finally:
        worker.shutdown()


def _run_two_ranks(path, generation: str) -> dict:
    """Spawn both ranks of a replica; rank -> (texts, probs)."""
    import multiprocessing
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    results = ctx.Queue()
    ranks = [ctx.Process(target=_tp_rank, args=(r, port, str(path), generation, results)) for r in range(2)]
    for proc in ranks:
        proc.start()
    got = {rank: (texts, probs) for rank, texts, probs in (results.get(timeout=600) for _ in ranks)}
    for proc in ranks:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return got


def _assert_matches_one_rank(got: dict, reference: LocalTransformersJudge) -> None:
    assert got[0] == got[1]  # every rank computes the same result
    texts, probs = got[0]
    assert texts == [g.text for g in reference.generate(_prompts(6))]
    for ours, ref in zip(probs, reference.score(_prompts(6), LABELS), strict=True):
        for label in LABELS:
            assert ours[label] == pytest.approx(ref.probs[label], abs=1e-4)


def test_tensor_parallel_static_generation_over_gloo(worker, model_path):
    # Sharded weights (DTensor) decoding into the preallocated cache: each rank's cache holds
    # its own heads, and the result is the single-rank one.
    _assert_matches_one_rank(_run_two_ranks(model_path, "static"), worker)


@pytest.mark.gpu
def test_tensor_parallel_over_nccl_matches_one_gpu(model_path):
    # The gloo tests' twin on two GPUs: same worker, nccl process group, the default (static) loop.
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two visible GPUs")
    got = _run_two_ranks(model_path, "auto")
    single = LocalTransformersJudge(_config(model_path))  # one GPU, no process group
    assert single.device.type == "cuda" and single.generation_mode == "static"
    try:
        _assert_matches_one_rank(got, single)
    finally:
        single.shutdown()
