"""Red-team figures: how many adversarial answers flip a gullible judge, defended and not.

Every answer of ``nemo_genrm.testing.redteam`` (label forgery, hidden characters, instructions,
fake role turns, special tokens, fence escapes, JSON verdicts, master keys) goes through the
real environment, once with ``prompt.neutralise: true`` (the default) and once with ``false``,
against the two gullible stand-ins of ``nemo_genrm.testing.gullible``. Also timed side by side:
building the judge prompts of all answers with and without neutralisation (the fence is always
there), so the cost of the defence is a ratio.

    uv run python bench/bench_redteam.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, offline, write_result  # noqa: E402

offline()

from nemo_genrm.config import PromptConfig, VerdictConfig  # noqa: E402
from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.prompts import PromptBuilder  # noqa: E402
from nemo_genrm.testing.gullible import EscapeJudge, LabelLineJudge  # noqa: E402
from nemo_genrm.testing.redteam import QUESTION, REDTEAM_ANSWERS, REFERENCE, run_redteam  # noqa: E402

STAND_INS = {"label_line": LabelLineJudge, "escape": EscapeJudge}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds of prompt building")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/redteam.json)")
    return parser.parse_args()


def flips(neutralise: bool) -> dict[str, dict]:
    """Per stand-in: flipped answers, reasons, controls judged right."""
    out = {}
    for name, cls in STAND_INS.items():
        def make(cls=cls):
            cfg = {"judge": {"model_name": "stand-in"}, "resources": {"gpus_per_replica": 0},
                   "prompt": {"neutralise": neutralise}}  # fmt: skip
            return GenRMEnvironmentImpl(cfg, judge=cls(REFERENCE))

        result = run_redteam(make)
        out[name] = {
            "flipped": len(result.flipped),
            "answers": len(REDTEAM_ANSWERS),
            "flip_rate": result.flip_rate,
            "flipped_names": result.flipped,
            "reasons": dict(result.reasons),
            "controls_right": result.controls_right,
        }
    return out


def build_times(repeats: int) -> dict[str, float]:
    """Median seconds to build the prompts of every answer, neutralised and raw, alternating."""
    builders = {
        flag: PromptBuilder(PromptConfig(neutralise=flag), VerdictConfig()) for flag in (True, False)
    }
    answers = [builders[True].extract(a.text).text or "" for a in REDTEAM_ANSWERS]
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for flag, builder in builders.items():
            start = time.perf_counter()
            for answer in answers:
                builder.build(question=QUESTION, reference=REFERENCE, candidate=answer)
            times[flag].append(time.perf_counter() - start)
    return {"neutralised_s": median(times[True]), "raw_s": median(times[False])}


def main() -> None:
    args = _args()
    defended, undefended = flips(True), flips(False)
    timing = build_times(args.repeats)
    print(f"{len(REDTEAM_ANSWERS)} red-team answers; flips (defended vs neutralise: false):")
    for name in STAND_INS:
        print(f"  {name:>10}: {defended[name]['flipped']}/{len(REDTEAM_ANSWERS)} "
              f"vs {undefended[name]['flipped']}/{len(REDTEAM_ANSWERS)}")  # fmt: skip
    per_prompt = {k: v / len(REDTEAM_ANSWERS) * 1e6 for k, v in timing.items()}
    ratio = timing["neutralised_s"] / timing["raw_s"]
    print(f"prompt build: {per_prompt['neutralised_s']:.0f} us neutralised vs {per_prompt['raw_s']:.0f} us raw "
          f"per prompt ({ratio:.1f}x)")  # fmt: skip
    path = write_result(
        "redteam",
        {"defended": defended, "undefended": undefended, "build_time": timing, "build_ratio": ratio},
        args.out,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
