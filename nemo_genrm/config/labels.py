"""Ray node labels and label selectors, read and matched without Ray.

A node gets labels when it starts (``ray start --labels genrm-role=judge,zone=a``; KubeRay sets
them from the RayCluster spec). A selector maps a label key to a condition on its value, in
Ray's syntax (the Kubernetes label character set):

- ``judge``: the node's value is ``judge``;
- ``!judge``: the node has another value, or no such label;
- ``in(a,b)``: the value is ``a`` or ``b``; ``!in(a,b)``: neither (or no such label).

The judge's ``resources.node_labels`` and the service's ``serve.node_labels`` are such selectors;
Ray applies them (placement-group bundle selectors, actor label selectors), and
:func:`selector_problems` and :func:`node_matches` let start-up say in advance which nodes qualify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["describe_selector", "node_matches", "selector_problems", "user_labels"]

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^(?:(?:{_NAME})(?:\.{_NAME})*/)?{_NAME}$")
_VALUE = re.compile(rf"^!?(?:in\(\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\)|{_NAME})$")
_RESERVED_PREFIX = "ray.io/"


def selector_problems(selector: Mapping[str, str], field: str | None = None) -> list[str]:
    """Syntax problems of a label selector, one line each (empty when it is valid).

    Args:
        selector: Label key -> condition.
        field: The config field, to start the messages with (``serve.node_labels``); ``None``
            when the caller locates them itself (a field validator).

    Returns:
        One sentence per bad key or condition, saying the accepted form.
    """
    where = f"{field}: " if field else ""
    problems = []
    for key, value in selector.items():
        if not _KEY.match(key):
            problems.append(
                f"{where}{key!r} is not a label key (letters, digits, '-', '_', '.', at most 63 "
                "characters, optionally a DNS prefix and '/')"
            )
        if not isinstance(value, str) or not _VALUE.match(value):
            problems.append(
                f"{where}{key}={value!r} is not a label condition (write a value, '!value', 'in(a,b)' or '!in(a,b)')"
            )
    return problems


def _values(condition: str) -> tuple[bool, set[str]]:
    """``(negated, accepted values)`` of one condition."""
    negated = condition.startswith("!")
    body = condition[1:] if negated else condition
    if body.startswith("in(") and body.endswith(")"):
        return negated, {v.strip() for v in body[3:-1].split(",")}
    return negated, {body}


def node_matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies every condition of ``selector``."""
    for key, condition in selector.items():
        negated, accepted = _values(condition)
        present = key in labels and labels[key] in accepted
        if present == negated:
            return False
    return True


def describe_selector(selector: Mapping[str, str]) -> str:
    """``key=condition, ...`` for messages."""
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))


def user_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """A node's labels without the ones Ray sets itself (``ray.io/...``)."""
    return {k: v for k, v in labels.items() if not k.startswith(_RESERVED_PREFIX)}
