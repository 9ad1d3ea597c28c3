"""The ``>>>`` examples in the docstrings of the environment's entry points and the drop-in rewards
run, offline on CPU with stand-in judges, and print what they show.

Each module is run with :mod:`doctest` at its default settings (no ``ELLIPSIS``, no
``NORMALIZE_WHITESPACE``): an example whose output changes fails here. The modules listed import
no framework (TRL and verl are reached through their calling conventions only), so they run in the
main suite. NeMo Gym's server shows its ``/verify`` request and answer in a block that is not run
(it is built by Gym's server machinery, its judge from its config); its tests post them for real.
"""

from __future__ import annotations

import doctest
import importlib
import io

import pytest

MODULES = (
    "nemo_genrm.env.environment",
    "nemo_genrm.integrations.judge_reward",
    "nemo_genrm.integrations.trl",
    "nemo_genrm.integrations.verl",
)

# The public entry points that must carry a runnable example (a lost example fails here too).
WITH_EXAMPLES = {
    "nemo_genrm.env.environment": {"GenRMEnvironmentImpl", "GenRMEnvironmentImpl.step"},
    "nemo_genrm.integrations.judge_reward": {"JudgeReward"},
    "nemo_genrm.integrations.trl": {"GenRMReward"},
    "nemo_genrm.integrations.verl": {"compute_score"},
}


def docstring_tests(module_name: str) -> list[doctest.DocTest]:
    """The docstrings of a module that hold ``>>>`` examples (objects defined in it only)."""
    module = importlib.import_module(module_name)
    return [test for test in doctest.DocTestFinder().find(module) if test.examples]


def run(tests: list[doctest.DocTest]) -> tuple[doctest.TestResults, str]:
    """Run the examples as ``python -m doctest`` does: the results and the report of the failures."""
    runner = doctest.DocTestRunner(optionflags=0)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    return runner.summarize(verbose=False), report.getvalue()


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run_and_print_what_they_show(module_name):
    tests = docstring_tests(module_name)
    results, report = run(tests)
    assert results.failed == 0, report
    names = {test.name.removeprefix(f"{module_name}.") for test in tests}
    missing = WITH_EXAMPLES[module_name] - names
    assert not missing, f"entry points of {module_name} without a >>> example: {sorted(missing)}"


def test_an_example_whose_output_changed_fails():
    # JudgeReward's example with its first reward changed from 1.0 to 0.0: the runner must catch it.
    (test,) = [t for t in docstring_tests("nemo_genrm.integrations.judge_reward") if t.name.endswith(".JudgeReward")]
    for example in test.examples:
        example.want = example.want.replace("1.0 judged 1 42", "0.0 judged 1 42")
    results, report = run([test])
    assert results.failed == 1 and "0.0 judged 1 42" in report
