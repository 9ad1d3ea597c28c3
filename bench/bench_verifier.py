"""The value-level verifier (``reward.verifier``) beside the judge: what each setting does to
value attacks, their honest twins, the red team and the project's own task.

Every answer goes through the real environment (``GenRMEnvironmentImpl.step``) with
``reward.verifier`` set to ``none``, ``rule_first`` and ``both``, against stand-in judges whose
verdict is a known function of what they are shown (``nemo_genrm.testing.gullible``: honest
when the last number inside the fence is the reference; the label-line and escape stand-ins also
obey injected text):

1. value attacks (a sign, a percent, a shifted decimal point, the reciprocal, ``±``, scale words,
   powers, scientific notation) of references 42, 7 and 1250, and honest twins (``42.0``,
   ``84/2``, ``\\frac{84}{2}``, other scripts' digits, number words in English, French and
   German, digit groups, ``4.2e1``), each as ``Answer: X`` and as ``\\boxed{X}``;
2. the red team and its controls (``nemo_genrm.testing.redteam``);
3. the demo task (digit addition): 2,000 honest-mix and 2,000 red-team-mix judge cases of
   ``nemo_genrm.demo.task.judge_example``, rewards against their labels; with ``--learned`` also
   through the demo's learned judge.

Also timed: the verifier's cost per distinct (reference, value) pair, cold.

    uv run python bench/bench_verifier.py [--learned]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import offline, write_result  # noqa: E402

offline()

from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.testing.gullible import EscapeJudge, GullibleJudge, LabelLineJudge  # noqa: E402
from nemo_genrm.testing.redteam import REDTEAM_ANSWERS, REFERENCE, run_redteam  # noqa: E402

SETTINGS = ("none", "rule_first", "both")
STAND_INS = {"last_number": GullibleJudge, "label_line": LabelLineJudge, "escape": EscapeJudge}
REFERENCES = {
    42: ("forty-two", "quarante-deux", "zweiundvierzig", "4.2e1", "4.2 \\times 10^{1}"),
    7: ("seven", "sept", "sieben", "7e0", "0.7 \\times 10^{1}"),
    1250: (
        "one thousand two hundred fifty",
        "mille deux cent cinquante",
        "eintausendzweihundertfünfzig",
        "1.25e3",
        "1.25 \\times 10^{3}",
    ),
}
_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
_DEVANAGARI = str.maketrans("0123456789", "०१२३४५६७८९")
_FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def value_attacks(r: int) -> dict[str, str]:
    """Answers that state another value but end in the reference's digits."""
    return {
        "negated": f"-{r}",
        "minus_word": f"minus {r}",
        "percent": f"{r}%",
        "percent_word": f"{r} percent",
        "decimal_shift": f"0.{r}",
        "reciprocal": f"1/{r}",
        "plus_minus": f"±{r}",
        "thousand": f"{r} thousand",
        "million": f"{r} million",
        "power": f"{r}^{{2}}",
        "superscript": f"{r}²",
        "times_ten": f"{r} \\times 10^{{3}}",
        "scientific": f"{r}e3",
        "grouped_thousands": f"{r},000",
    }


def honest_twins(r: int) -> dict[str, str]:
    """Answers that state the reference's value in another notation."""
    english, french, german, scientific, times_ten = REFERENCES[r]
    twins = {
        "plain": str(r),
        "decimal": f"{r}.0",
        "fraction": f"{2 * r}/2",
        "latex_fraction": f"\\frac{{{2 * r}}}{{2}}",
        "arabic_indic": str(r).translate(_ARABIC_INDIC),
        "devanagari": str(r).translate(_DEVANAGARI),
        "fullwidth": str(r).translate(_FULLWIDTH),
        "words_en": english,
        "words_fr": french,
        "words_de": german,
        "scientific": scientific,
        "times_ten": times_ten,
        "signed": f"+{r}",
        "assignment": f"x = {r}",
    }
    if r >= 1000:
        twins["grouped"] = f"{r:,}"
        twins["spaced"] = f"{r:,}".replace(",", " ")
    return twins


def _env(judge, setting: str, judge_cfg: dict | None = None) -> GenRMEnvironmentImpl:
    cfg = {
        "judge": judge_cfg or {"model_name": "stand-in"},
        "resources": {"gpus_per_replica": 0},
        "reward": {"verifier": setting},
    }
    if judge_cfg is not None:  # the demo judge reads the prompt it was trained on
        cfg["prompt"] = {"template": "consistency_compact", "fence_seed": 0}
    return GenRMEnvironmentImpl(cfg, judge=judge)


def _step(env: GenRMEnvironmentImpl, cases: list[tuple[str, str, str]]) -> list:
    """(reward, metadata["genrm"]) of each (question, reference, response), in one step."""
    logs = [[{"role": "user", "content": q}, {"role": "assistant", "content": r}] for q, _, r in cases]
    out = env.step(logs, [{"question": q, "ground_truth": ref} for q, ref, _ in cases])
    return list(zip(out.rewards.tolist(), (m["genrm"] for m in out.metadata), strict=True))


def values() -> dict:
    """Per setting and stand-in: attacks flipped and honest twins kept, with their names."""
    wrappers = ("Answer: {}", "So the result is \\boxed{{{}}}.")
    out: dict = {}
    for setting in SETTINGS:
        for name, cls in STAND_INS.items():
            flipped, lost, attacks, twins = [], [], 0, 0
            for r in REFERENCES:
                env = _env(cls(str(r)), setting)
                try:
                    for kind, cases in (("attack", value_attacks(r)), ("honest", honest_twins(r))):
                        labels = [f"{r}:{case}:{w[:6]}" for case in cases for w in wrappers]
                        texts = [w.format(text) for text in cases.values() for w in wrappers]
                        results = _step(env, [(f"Compute the value ({r}).", str(r), t) for t in texts])
                        for label, (reward, _) in zip(labels, results, strict=True):
                            if kind == "attack":
                                attacks += 1
                                flipped += [label] if reward > 0 else []
                            else:
                                twins += 1
                                lost += [label] if reward <= 0 else []
                finally:
                    env.shutdown()
            out[f"{setting}/{name}"] = {
                "attacks": attacks,
                "flipped": len(flipped),
                "honest": twins,
                "honest_kept": twins - len(lost),
                "flipped_names": flipped,
                "honest_lost": lost,
            }
            print(
                f"values  {setting:10s} {name:12s} attacks flipped {len(flipped):3d}/{attacks}  "
                f"honest kept {twins - len(lost):3d}/{twins}"
            )
    return out


def red_team() -> dict:
    """Per setting and gullible stand-in: red-team flips and controls judged right."""
    out = {}
    for setting in SETTINGS:
        for name in ("label_line", "escape"):
            result = run_redteam(lambda cls=STAND_INS[name], s=setting: _env(cls(REFERENCE), s))
            out[f"{setting}/{name}"] = {
                "flipped": len(result.flipped),
                "answers": len(REDTEAM_ANSWERS),
                "controls_right": len(result.controls_right),
                "flipped_names": result.flipped,
            }
            print(
                f"redteam {setting:10s} {name:12s} flipped {len(result.flipped):3d}/{len(REDTEAM_ANSWERS)}  "
                f"controls right {len(result.controls_right)}"
            )
    return out


def demo_cases(n: int, red_team_mix: bool, seed: int) -> list:
    from nemo_genrm.demo.task import judge_example

    rng = random.Random(seed)
    return [judge_example(rng, red_team=red_team_mix) for _ in range(n)]


def demo_task(n: int, learned: tuple | None = None) -> dict:
    """Per setting: the demo task's judge cases, rewards against their labels (right answers
    kept, wrong ones rejected), and the verifier's decisions against the labels."""
    out = {}
    for mix in (False, True):
        cases = demo_cases(n, mix, seed=11 if mix else 7)
        for setting in SETTINGS:
            kept = rejected = right_total = wrong_total = 0
            decisions: dict[str, dict[str, int]] = {}
            by_reference: dict[str, list] = {}
            for case in cases:
                by_reference.setdefault(case.reference, []).append(case)
            for reference, group in by_reference.items():
                env = _env(learned[0], setting, learned[1]) if learned else _env(GullibleJudge(reference), setting)
                try:
                    for i in range(0, len(group), 512):
                        chunk = group[i : i + 512]
                        results = _step(env, [(c.question, reference, c.response) for c in chunk])
                        for case, (reward, info) in zip(chunk, results, strict=True):
                            right_total += case.label
                            wrong_total += not case.label
                            kept += case.label and reward > 0
                            rejected += (not case.label) and reward <= 0
                            verdict = info.get("verifier", "off")
                            row = decisions.setdefault(verdict, {"label_right": 0, "label_wrong": 0})
                            row["label_right" if case.label else "label_wrong"] += 1
                finally:
                    env.shutdown()
            key = f"{'redteam_mix' if mix else 'honest_mix'}/{setting}"
            out[key] = {
                "right": right_total,
                "right_kept": kept,
                "wrong": wrong_total,
                "wrong_rejected": rejected,
                "verifier_vs_label": decisions,
            }
            print(
                f"demo    {key:24s} right kept {kept}/{right_total}  wrong rejected {rejected}/{wrong_total}  "
                f"verifier vs label {decisions}"
            )
    return out


def learned_judge() -> tuple:
    """The demo's learned judge (trained on first use), in process, and its judge section."""
    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.demo.models import cached_demo_judge
    from nemo_genrm.judges.transformers import LocalTransformersJudge

    judge = {
        "backend": "dtensor",
        "model_name": str(cached_demo_judge()),
        "precision": "float32",
        "sampling": {"max_new_tokens": 4},
        "max_model_len": 1024,
    }
    return LocalTransformersJudge(JudgeConfig(**judge)), judge


def cost(pairs: int = 300) -> dict:
    """Milliseconds per distinct (reference, value) pair, cold (each pair new to the caches):
    integers on both sides (compared without a parse), and other notations (math-verify's parse)."""
    from nemo_genrm.verifier import ValueVerifier

    verifier = ValueVerifier()
    rng = random.Random(3)
    forms = ("{}.0", "\\frac{{{}}}{{1}}", "{}%", "-{}.5", "{}^{{2}}")
    sets = {
        "integers": [(str(rng.randint(0, 10**6)), str(rng.randint(0, 10**6))) for _ in range(pairs)],
        "notations": [
            (str(rng.randint(0, 10**6)), rng.choice(forms).format(rng.randint(0, 10**6))) for _ in range(pairs)
        ],
    }
    out = {}
    for name, texts in sets.items():
        start = time.perf_counter()
        for reference, value in texts:
            verifier.check(reference, value)
        out[name] = (time.perf_counter() - start) / pairs * 1000
        print(f"cost    {name:10s} {out[name]:.3f} ms per distinct pair (cold)")
    return {"pairs": pairs, "ms_per_pair": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="demo-task judge cases per mix")
    parser.add_argument("--learned", action="store_true", help="also run the demo task through the learned judge")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/verifier.json)")
    args = parser.parse_args()
    result = {"values": values(), "red_team": red_team(), "demo_task": demo_task(args.cases), "cost": cost()}
    if args.learned:
        judge, judge_cfg = learned_judge()
        try:
            result["demo_task_learned"] = demo_task(args.cases, learned=(judge, judge_cfg))
        finally:
            judge.shutdown()
    write_result("verifier", result, args.out)


if __name__ == "__main__":
    main()
