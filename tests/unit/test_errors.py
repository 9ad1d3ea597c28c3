"""The error types and outcome reasons: one definition each, at the bottom of the import graph."""

from __future__ import annotations

import ast
import inspect

import nemo_genrm.config as config
import nemo_genrm.config.loading as config_loading
import nemo_genrm.errors as errors
import nemo_genrm.samples.types as env_types
from nemo_genrm.judges import JUDGE_ERROR, PROMPT_TOO_LONG, TIMEOUT
from nemo_genrm.samples.metrics import StepTally


def test_errors_imports_nothing_from_the_package():
    tree = ast.parse(inspect.getsource(errors))
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and not [m for m in imported if m.startswith("nemo_genrm")]


def test_config_error_is_one_class_under_every_old_name():
    assert config.ConfigError is errors.ConfigError is config_loading.ConfigError
    err = errors.ConfigError(["a is wrong", "b is wrong"], source="env.genrm")
    assert err.problems == ["a is wrong", "b is wrong"]
    assert str(err).splitlines()[0] == "2 configuration problems in env.genrm:"


def test_reasons_are_one_enum_and_keep_their_strings():
    assert env_types.REASONS == tuple(errors.Reason)
    assert env_types.JUDGE_ERROR is JUDGE_ERROR is errors.Reason.JUDGE_ERROR
    assert [str(r) for r in errors.Reason] == [
        "judged",
        "parse_failure",
        "no_answer",
        "too_long",
        "judge_error",
        "missing_ground_truth",
        "bad_input",
        "incomplete_group",
        "missing_rubric",
        "hedged",
    ]
    assert (PROMPT_TOO_LONG, TIMEOUT) == ("prompt_too_long", "timeout")
    tally = StepTally()
    tally.counts[errors.Reason.TOO_LONG] += 1
    assert tally.counts["too_long"] == 1 and f"genrm/{errors.Reason.TOO_LONG}" == "genrm/too_long"


def test_judge_errors_are_runtime_errors_with_their_facts():
    err = errors.JudgeUnavailableError("no replica alive and the restart budget is spent", 31.5)
    assert isinstance(err, RuntimeError) and err.down_s == 31.5 and "budget is spent" in err.why
    assert issubclass(errors.JudgeClosedError, RuntimeError)


def test_the_package_errors_cross_a_pickle_whole():
    """Ray pickles an actor's error to the driver: the message and the facts arrive unchanged."""
    import pickle

    for err in (
        errors.ConfigError(["judge.model_name: no tokenizer"], source="env.genrm"),
        errors.JudgeUnavailableError("restart budget spent", 12.0),
        errors.JudgeStartupError(["rank 0: no GPU"]),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and vars(back) == vars(err)


def test_rays_task_error_wrapper_is_still_the_package_error():
    from ray.exceptions import RayTaskError

    cause = errors.ConfigError(["judge.model_name: no tokenizer could be loaded"])
    wrapped = RayTaskError("GenRMEnvironmentActor.step", "Traceback ...", cause).as_instanceof_cause()
    assert isinstance(wrapped, errors.ConfigError) and wrapped.problems == cause.problems
