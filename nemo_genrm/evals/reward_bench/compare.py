"""Compare a RewardBench run with reference numbers: a table, a verdict, a bar chart.

The reference is a results JSON: reward-bench's own output (subset names as top-level keys,
e.g. a file from ``allenai/reward-bench-results``), a results file written by this package, or
any JSON object whose top-level keys include subset or section names with numbers.

Rows: every subset present on both sides; every section computed from those common subsets on
both sides with the same weights (so a partial run is compared like with like), or, when the
reference gives a section only as a number, that number against ours when we cover the whole
section; and ``Score``, the mean of the sections compared.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.evals.reward_bench.scores import (
    OVERALL,
    SECTIONS,
    SUBSET_MAPPING,
    SUBSET_TO_SECTION,
    SUBSETS,
    mean_of_sections,
    section_scores,
)
from nemo_genrm.evals.reward_bench.v2_scores import V2_SUBSETS

logger = logging.getLogger(__name__)


class ComparisonError(ValueError):
    """The reference file cannot be compared (missing, not JSON, nothing in common)."""


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the comparison.

    Attributes:
        name: Subset, section or ``Score``.
        kind: ``subset``, ``section`` or ``overall``.
        ours: Our value.
        reference: The reference value.
    """

    name: str
    kind: str
    ours: float
    reference: float

    @property
    def delta(self) -> float:
        """ours - reference."""
        return self.ours - self.reference


@dataclass(frozen=True)
class Comparison:
    """A comparison with reference numbers.

    Attributes:
        rows: Subsets, then sections, then ``Score``.
        tolerance: The largest accepted ``|delta|``.
        missing: Subsets in the reference that this run did not score.
    """

    rows: tuple[ComparisonRow, ...]
    tolerance: float
    missing: tuple[str, ...] = ()

    @property
    def failures(self) -> list[ComparisonRow]:
        """Rows whose ``|delta|`` exceeds the tolerance."""
        return [r for r in self.rows if abs(r.delta) > self.tolerance + 1e-12]

    @property
    def ok(self) -> bool:
        """Whether every row is within the tolerance."""
        return not self.failures

    @property
    def exit_code(self) -> int:
        """0 when within tolerance, 1 otherwise (for the entry point)."""
        return 0 if self.ok else 1

    def table(self) -> str:
        """The comparison as plain text, one row per subset, section and ``Score``."""
        header = f"{'':<26}{'ours':>9}{'reference':>11}{'delta':>9}"
        lines = [header, "-" * (len(header) + 4)]
        previous_kind = None
        for row in self.rows:
            if previous_kind is not None and row.kind != previous_kind:
                lines.append("-" * (len(header) + 4))
            previous_kind = row.kind
            flag = "  !!" if abs(row.delta) > self.tolerance + 1e-12 else ""
            lines.append(f"{row.name:<26}{row.ours:>9.4f}{row.reference:>11.4f}{row.delta:>+9.4f}{flag}")
        verdict = "within" if self.ok else f"{len(self.failures)} row(s) beyond"
        lines.append(f"{verdict} tolerance {self.tolerance:g}")
        if self.missing:
            lines.append(f"not scored in this run: {', '.join(self.missing)}")
        return "\n".join(lines)


def _numbers(data: Mapping[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in data.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
    }


def load_reference(path: str | Path) -> dict[str, float]:
    """Subset and section numbers of a reference results JSON.

    Args:
        path: The JSON file.

    Returns:
        Name -> value for the known subset, section and ``Score`` keys, plus any other numeric
        top-level key (custom subsets).

    Raises:
        ComparisonError: Missing file, not a JSON object, or no number in it.
    """
    path = Path(path)
    if not path.is_file():
        raise ComparisonError(f"compare_to: file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ComparisonError(f"compare_to: {str(path)!r} is not JSON ({err})") from err
    if not isinstance(data, dict):
        raise ComparisonError(f"compare_to: {str(path)!r} must hold a JSON object")
    values = _numbers(data)
    if not values:
        raise ComparisonError(f"compare_to: {str(path)!r} holds no subset or section numbers")
    return values


def compare(ours: Mapping[str, float], reference: Mapping[str, float], tolerance: float = 0.02) -> Comparison:
    """Compare our flat scores with the reference's.

    Args:
        ours: Subset (and section) accuracies of this run, e.g. ``RewardBenchScores.flat()``.
        reference: The reference's numbers, e.g. from :func:`load_reference`.
        tolerance: The largest accepted ``|ours - reference|``.

    Returns:
        The comparison.

    Raises:
        ComparisonError: No subset or section in common.
    """
    if _is_v2(ours):
        return _compare_v2(ours, reference, tolerance)
    known = set(SUBSETS)
    subset_names = [s for s in SUBSETS if s in ours and s in reference]
    subset_names += sorted(s for s in ours if s in reference and s not in known and s not in SECTIONS and s != OVERALL)
    rows = [ComparisonRow(s, "subset", ours[s], reference[s]) for s in subset_names]
    common = {s for s in subset_names if s in SUBSET_TO_SECTION}
    ours_sections = section_scores({s: ours[s] for s in common})
    ref_sections = section_scores({s: reference[s] for s in common})
    compared: dict[str, tuple[float, float]] = {}
    for section in SECTIONS:
        if section in ours_sections:
            compared[section] = (ours_sections[section], ref_sections[section])
        elif section in reference and section in ours and all(s in ours for s in SUBSET_MAPPING[section]):
            compared[section] = (ours[section], reference[section])
    rows += [ComparisonRow(name, "section", o, r) for name, (o, r) in compared.items()]
    if compared:
        ours_mean = mean_of_sections({k: v[0] for k, v in compared.items()})
        ref_mean = mean_of_sections({k: v[1] for k, v in compared.items()})
        rows.append(ComparisonRow(OVERALL, "overall", ours_mean, ref_mean))  # type: ignore[arg-type]
    if not rows:
        raise ComparisonError(
            "nothing to compare: the reference shares no subset or section with this run "
            f"(ours: {', '.join(sorted(ours))}; reference: {', '.join(sorted(reference))})"
        )
    missing = tuple(s for s in SUBSETS if s in reference and s not in ours)
    return Comparison(rows=tuple(rows), tolerance=tolerance, missing=missing)


def _is_v2(ours: Mapping[str, float]) -> bool:
    """Whether scores are RewardBench 2's: its subset names and none of RewardBench's."""
    return any(s in ours for s in V2_SUBSETS if s != "Safety") and not any(s in ours for s in SUBSETS)


def _compare_v2(ours: Mapping[str, float], reference: Mapping[str, float], tolerance: float) -> Comparison:
    """RewardBench 2: every common subset, then ``Score`` as the mean of those subsets on each side."""
    names = [s for s in V2_SUBSETS if s in ours and s in reference]
    names += sorted(s for s in ours if s in reference and s not in V2_SUBSETS and s != OVERALL)
    if not names:
        raise ComparisonError(
            "nothing to compare: the reference shares no RewardBench 2 subset with this run "
            f"(ours: {', '.join(sorted(ours))}; reference: {', '.join(sorted(reference))})"
        )
    rows = [ComparisonRow(s, "subset", ours[s], reference[s]) for s in names]
    rows.append(
        ComparisonRow(OVERALL, "overall", _mean([ours[s] for s in names]), _mean([reference[s] for s in names]))
    )
    missing = tuple(s for s in V2_SUBSETS if s in reference and s not in ours)
    return Comparison(rows=tuple(rows), tolerance=tolerance, missing=missing)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def plot_comparison(
    comparison: Comparison, path: str | Path, *, ours_label: str = "ours", reference_label: str = "reference"
) -> Path:
    """Save a horizontal grouped bar chart of ours vs reference for every row.

    Args:
        comparison: The comparison to draw.
        path: The PNG to write.
        ours_label: Legend text of our bars.
        reference_label: Legend text of the reference bars.

    Returns:
        The path written.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = list(comparison.rows)
    height = 0.38
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.36 * len(rows)))
    try:
        ys = list(range(len(rows)))
        ax.barh([y - height / 2 for y in ys], [r.ours for r in rows], height, label=ours_label, color="#4c72b0")
        ax.barh(
            [y + height / 2 for y in ys], [r.reference for r in rows], height, label=reference_label, color="#dd8452"
        )
        for y, row in zip(ys, rows, strict=True):
            color = "#c44e52" if abs(row.delta) > comparison.tolerance + 1e-12 else "#333333"
            ax.text(
                1.01, y, f"{row.delta:+.3f}", va="center", fontsize=8, color=color, transform=ax.get_yaxis_transform()
            )
        labels = [r.name if r.kind == "subset" else f"[{r.name}]" for r in rows]
        ax.set_yticks(ys, labels, fontsize=8)
        ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top, no empty margins
        for y, (above, below) in enumerate(itertools.pairwise(rows)):
            if above.kind != below.kind:
                ax.axhline(y + 0.5, color="#999999", linewidth=0.8)
        ax.set_xlim(0.0, 1.0)
        ax.set_xlabel("accuracy")
        ax.axvline(0.5, color="#999999", linewidth=0.8, linestyle="--")
        ax.set_title(
            f"RewardBench: {ours_label} vs {reference_label} (delta at right, tolerance {comparison.tolerance:g})",
            fontsize=10,
            pad=22,
        )
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=8, frameon=False)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    logger.info("saved comparison chart to %s", path)
    return path
