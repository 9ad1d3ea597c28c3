"""Check recorded uses of vLLM's API against the installed vLLM's real signatures.

Standalone on purpose: it imports vLLM and the standard library only, so it also runs under an
interpreter that has vLLM but not this project (a separate virtual environment):

    python tests/unit/vllm_api_check.py uses.json    # prints, per set of uses, its problems

``uses.json`` holds a list of sets of uses, each ``{"calls": [...], "attributes": [...]}`` as written by
``tests/unit/test_vllm_api.py``: each call names its target (``LLM``, ``LLM.<method>``,
``SamplingParams``, ``TokensPrompt``), its number of positional arguments and its keyword
names; each attribute read names a class (``RequestOutput``, ``CompletionOutput``,
``Logprob``) and the attribute.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from typing import Any


def _classes() -> dict[str, Any]:
    import vllm
    from vllm.inputs import TokensPrompt
    from vllm.outputs import CompletionOutput, RequestOutput

    try:
        from vllm.logprobs import Logprob
    except ImportError:  # vLLM before the logprobs module
        from vllm.sequence import Logprob
    return {
        "LLM": vllm.LLM,
        "SamplingParams": vllm.SamplingParams,
        "TokensPrompt": TokensPrompt,
        "RequestOutput": RequestOutput,
        "CompletionOutput": CompletionOutput,
        "Logprob": Logprob,
    }


def _engine_args() -> set[str]:
    from vllm.engine.arg_utils import EngineArgs

    return {f.name for f in dataclasses.fields(EngineArgs)}


def _check_call(classes: dict[str, Any], call: dict) -> list[str]:
    target, nargs, kwargs = call["target"], call["args"], call["kwargs"]
    name, _, method = target.partition(".")
    if name not in classes:
        return [f"{target}: not a vLLM name this check knows"]
    obj = classes[name]
    if name == "TokensPrompt":  # a TypedDict: keys, no positional arguments
        keys = set(getattr(obj, "__annotations__", {}))
        return [f"TokensPrompt has no key {k!r}" for k in kwargs if k not in keys] + (
            ["TokensPrompt takes no positional arguments"] if nargs else []
        )
    if method:
        if not hasattr(obj, method):
            return [f"{target}: vLLM's {name} has no method {method!r}"]
        fn, lead = getattr(obj, method), [object()]  # unbound: self first
    else:
        fn, lead = obj, []
    signature = inspect.signature(fn)
    problems = []
    try:
        signature.bind(*lead, *([None] * nargs), **dict.fromkeys(kwargs))
    except TypeError as exc:
        problems.append(f"{target}(positional={nargs}, keywords={sorted(kwargs)}): {exc}")
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    if name == "LLM" and not method and has_var_kw:  # extra keywords go to EngineArgs
        known = set(signature.parameters) | _engine_args()
        problems += [f"LLM(...): {k!r} is neither an LLM nor an EngineArgs argument" for k in kwargs if k not in known]
    return problems


def _has_attribute(cls: Any, attr: str) -> bool:
    if dataclasses.is_dataclass(cls) and attr in {f.name for f in dataclasses.fields(cls)}:
        return True
    if attr in getattr(cls, "__struct_fields__", ()):  # msgspec structs
        return True
    try:
        if attr in inspect.signature(cls).parameters:  # plain classes store their arguments
            return True
    except (TypeError, ValueError):
        pass
    return hasattr(cls, attr)


def check(uses: dict) -> list[str]:
    """Every problem found (an empty list when the recorded uses match the installed vLLM)."""
    classes = _classes()
    problems = [p for call in uses["calls"] for p in _check_call(classes, call)]
    for read in uses["attributes"]:
        cls = classes.get(read["cls"])
        if cls is None or not _has_attribute(cls, read["attr"]):
            problems.append(f"{read['cls']}.{read['attr']}: not an attribute of vLLM's {read['cls']}")
    return problems


if __name__ == "__main__":
    with open(sys.argv[1]) as handle:
        print(json.dumps([check(uses) for uses in json.load(handle)]))
