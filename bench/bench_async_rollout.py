"""NeMo-RL's async rollout vs its sync rollout, same samples, same GenRM judge.

NeMo-RL's ``run_async_multi_turn_rollout`` rewards each sample on its own (one ``step`` call per
sample), where ``run_multi_turn_rollout`` sends the whole batch in one ``step``. This runs both on
the same ``--questions`` x ``--generations`` samples (a scripted policy answers, two distinct
answers per question, so the generation costs nothing and the time is the environment's) against
one GenRM environment started by NeMo-RL's ``create_env`` with a tiny CPU judge, alternating the
two paths. It reports each path's rollout wall time and their ratio, and the judge engine calls
and prompts each path cost (deltas of the engine's own counters).

Needs NeMo-RL (run it in the environment ``ci/nemo_rl/build_env.sh`` builds)::

    .venv-nemo-rl/bin/python bench/bench_async_rollout.py
    .venv-nemo-rl/bin/python bench/bench_async_rollout.py --questions 32 --generations 8 --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, write_result  # noqa: E402

for _name, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(_name, _value)

TASK = "genrm"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--generations", type=int, default=8, help="samples per question (GRPO group)")
    parser.add_argument("--repeats", type=int, default=2, help="timed rollouts per path")
    parser.add_argument("--out", default=None, help="result file (default bench/results/async_rollout.json)")
    return parser.parse_args()


def _batch(tokenizer, questions: int, generations: int):
    """NeMo-RL's way: processed dataset -> rl_collate_fn -> repeat_interleave per generation."""
    import datasets
    from nemo_rl.data.collate_fn import rl_collate_fn
    from nemo_rl.data.datasets import AllTaskProcessedDataset
    from nemo_rl.data.interfaces import TaskDataSpec

    from nemo_genrm.integrations.nemo_rl_processor import genrm_math_data_processor

    rows = [
        {
            "messages": [
                {"role": "user", "content": f"What is {q} plus {q}? (#{q})"},
                {"role": "assistant", "content": str(2 * q)},
            ],
            "task_name": TASK,
        }
        for q in range(questions)
    ]
    spec = TaskDataSpec(task_name=TASK)
    dataset = AllTaskProcessedDataset(
        datasets.Dataset.from_list(rows), tokenizer, spec, {TASK: (spec, genrm_math_data_processor)}, max_seq_length=512
    )
    return rl_collate_fn([dataset[i] for i in range(len(dataset))]).repeat_interleave(generations)


def _respond():
    """Per prompt, alternate the right answer and a wrong one: two distinct answers a question,
    whichever order the rollout asks in."""
    seen: collections.Counter[str] = collections.Counter()

    def respond(prompt: str) -> str:
        seen[prompt] += 1
        q = int(prompt.rsplit("(#", 1)[1].split(")", 1)[0])
        return f"\\boxed{{{2 * q + seen[prompt] % 2}}}"

    return respond


def _run_once(path: str, env, batch, tokenizer) -> dict:
    import ray
    from nemo_rl.experience import rollouts

    from nemo_genrm.testing.scripted_generation import ScriptedGeneration

    ray.get(env.global_post_process_and_metrics.remote(None))  # open a fresh metrics window
    before = ray.get(env.judge_stats.remote())
    rollout = rollouts.run_async_multi_turn_rollout if path == "async" else rollouts.run_multi_turn_rollout
    start = time.perf_counter()
    final, _ = rollout(
        ScriptedGeneration(tokenizer, _respond()),
        batch.copy(),
        tokenizer,
        {TASK: env},
        max_seq_len=512,
        max_rollout_turns=1,
    )
    wall = time.perf_counter() - start
    after = ray.get(env.judge_stats.remote())
    _, metrics = ray.get(env.global_post_process_and_metrics.remote(None))
    return {
        "wall_s": wall,
        "engine_calls": (after.generate_calls + after.score_calls) - (before.generate_calls + before.score_calls),
        "engine_prompts": (after.prompts_generated + after.prompts_scored)
        - (before.prompts_generated + before.prompts_scored),
        "genrm_num_samples": metrics["genrm/num_samples"],
        "genrm_judge_prompts": metrics["genrm/judge_prompts"],
        "mean_reward": float(final["total_reward"].mean()),
    }


def main() -> None:
    args = _args()
    import ray
    from nemo_rl.algorithms.grpo import shutdown_environments
    from nemo_rl.algorithms.utils import get_tokenizer
    from nemo_rl.environments.utils import create_env

    from nemo_genrm.integrations.nemo_rl import register
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_tokenizer

    ray.init(num_cpus=4, num_gpus=0, include_dashboard=False, log_to_driver=False)
    register()
    tokenizer = get_tokenizer({"name": str(cached_tiny_tokenizer())})
    cfg = {
        "judge": {"model_name": str(cached_tiny_judge("1")), "precision": "float32", "max_model_len": 1024},
        "resources": {"num_replicas": 1, "gpus_per_replica": 0, "cpus_per_replica": 1.0},
    }
    env = create_env(TASK, cfg)
    try:
        batch = _batch(tokenizer, args.questions, args.generations)
        runs: dict[str, list[dict]] = {"sync": [], "async": []}
        for path in runs:  # warm-up: model loaded, caches filled, on both paths
            _run_once(path, env, batch, tokenizer)
        for _ in range(args.repeats):  # alternate, so drifting load hits both alike
            for path in runs:
                runs[path].append(_run_once(path, env, batch, tokenizer))
    finally:
        shutdown_environments({TASK: env}, None)
        ray.shutdown()
    summary = {
        path: {"wall_s_median": median([r["wall_s"] for r in rs]), **{k: rs[-1][k] for k in rs[-1] if k != "wall_s"}}
        for path, rs in runs.items()
    }
    ratio = summary["async"]["wall_s_median"] / summary["sync"]["wall_s_median"]
    samples = args.questions * args.generations
    print(
        f"{samples} samples ({args.questions} questions x {args.generations}), tiny CPU judge, {args.repeats} repeats"
    )
    for path, s in summary.items():
        print(
            f"  {path:5s}: rollout {s['wall_s_median']:.2f} s, judge engine calls {s['engine_calls']}, "
            f"prompts {s['engine_prompts']}, mean reward {s['mean_reward']:.3f}"
        )
    print(f"  async / sync rollout time: {ratio:.2f}x (target <= 1.25x)")
    path = write_result(
        "async_rollout",
        {
            "samples": samples,
            "questions": args.questions,
            "generations": args.generations,
            "repeats": args.repeats,
            "ratio_async_over_sync": ratio,
            "summary": summary,
            "runs": runs,
        },
        args.out,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
