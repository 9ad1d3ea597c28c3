"""Reading samples: numeric references of every number type, non-finite ones, and batch shapes."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch

from nemo_genrm.config import JudgeConfig, PromptConfig, VerdictConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.samples.inputs import message_logs, metadata_list, number_text, prepare_sample
from nemo_genrm.testing import cached_tiny_judge

LOG = [{"role": "user", "content": "What is 1 + 2?"}, {"role": "assistant", "content": "Answer: 3"}]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3, "3"),
        (np.int64(3), "3"),  # what pandas and Parquet give for an integer column
        (np.int32(-7), "-7"),
        (np.uint8(5), "5"),
        (np.float64(3.0), "3"),  # an integer column with a gap becomes float64: the .0 means nothing
        (3.0, "3"),
        (2.5, "2.5"),
        (np.float32(0.1), "0.1"),  # shortest form at float32 width, not 0.10000000149011612
        (np.float16(0.1), "0.1"),
        (np.array(4), "4"),  # a 0-d array
        (np.array(2.5), "2.5"),
        (Decimal("2.50"), "2.50"),  # a Decimal keeps the digits it was written with
        (Decimal("1E+2"), "100"),  # ... in positional notation
        (Fraction(3, 4), "3/4"),
        (Fraction(6, 2), "3"),
        (torch.tensor(3), "3"),
        (torch.tensor(0.1), "0.1"),  # float32 tensor, float32 width
        (torch.tensor(2.5, dtype=torch.float64), "2.5"),
        (torch.tensor(0.5, dtype=torch.bfloat16), "0.5"),  # no NumPy bfloat16: widened exactly
        (1e20, "1e+20"),  # past 2**53 an integral float is not exact at the units digit
        (1e-7, "1e-07"),
    ],
)
def test_numbers_of_every_type_are_written_as_numbers(value, text):
    assert number_text(value) == text


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        np.float64("nan"),
        np.float32("inf"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("-Infinity"),
        torch.tensor(float("nan")),
        True,  # a flag is not an answer
        np.bool_(False),
        complex(1, 2),
        np.complex64(1),
        np.array([1, 2]),  # more than one number
        torch.tensor([3]),
        np.datetime64("2020-01-01"),
        object(),
        # Past Python's 4300-digit limit on writing an integer as text.
        pytest.param(10**5000, id="int-past-digit-limit"),
        pytest.param(-(10**4300), id="negative-int-past-digit-limit"),
        pytest.param(Fraction(10**5000, 3), id="fraction-past-digit-limit"),
    ],
)
def test_what_is_not_a_finite_real_number_is_refused(value):
    assert number_text(value) is None


def _builder() -> PromptBuilder:
    return PromptBuilder(PromptConfig(), VerdictConfig())


@pytest.mark.parametrize(
    ("truth", "reason", "reference"),
    [
        (np.int64(3), None, "3"),
        (Decimal("3"), None, "3"),
        (Fraction(3), None, "3"),
        (torch.tensor(3), None, "3"),
        ("3.0", None, "3.0"),  # text is the caller's own words, kept as written
        ("nan", None, "nan"),
        (float("nan"), "bad_input", ""),
        (np.float64("inf"), "bad_input", ""),
        (True, "bad_input", ""),
        ([3], "bad_input", ""),
        (None, "missing_ground_truth", ""),
    ],
)
def test_prepare_sample_reads_the_reference(truth, reason, reference):
    sample = prepare_sample(LOG, {"ground_truth": truth}, _builder(), needs_reference=True)
    assert (sample.reason, sample.reference) == (reason, reference)


@pytest.mark.parametrize("batch", ["Answer: 3", b"Answer: 3", {"role": "assistant", "content": "3"}, 3])
def test_a_batch_that_is_not_a_list_is_a_caller_error(batch):
    with pytest.raises(TypeError, match="message_log_batch must be a list"):
        message_logs(batch)


@pytest.mark.parametrize("metadata", ["3", {"ground_truth": "3"}, 3])
def test_metadata_that_is_not_a_list_is_a_caller_error(metadata):
    with pytest.raises(TypeError, match="metadata must be a list"):
        metadata_list(metadata, 1)


def test_lists_tuples_and_none_are_batches():
    assert message_logs(None) == []
    assert message_logs((LOG,)) == [LOG]
    assert message_logs(iter([LOG, LOG])) == [LOG, LOG]
    assert metadata_list(({"ground_truth": 3},), 1) == [{"ground_truth": 3}]


# ------------------------------------------------------------------------- through step
@pytest.fixture(scope="module")
def env(tiny_cache_dir: str) -> GenRMEnvironmentImpl:
    """The environment over an in-process fixed judge that always answers "1"."""
    model = str(cached_tiny_judge("1", cache_dir=tiny_cache_dir))
    judge: dict[str, Any] = {"model_name": model, "precision": "float32", "max_model_len": 1024}
    worker = LocalTransformersJudge(JudgeConfig.model_validate(judge))
    yield GenRMEnvironmentImpl({"judge": judge, "resources": {"gpus_per_replica": 0}}, judge=worker)
    worker.shutdown()


def test_step_judges_numeric_references_and_counts_non_finite_ones(env):
    # An integer too long for str() crashed the whole step; it is one sample's bad_input.
    truths = [
        np.int64(3),
        np.int32(3),
        Decimal("3"),
        Fraction(3),
        torch.tensor(3),
        np.float64(3.0),
        float("nan"),
        float("inf"),
        np.float32("nan"),
        10**5000,
    ]
    result = env.step([LOG] * len(truths), [{"ground_truth": t} for t in truths])
    assert result.rewards.tolist() == [1.0] * 6 + [0.0] * 4
    metrics = env.last_metrics()
    assert metrics["genrm/count/judged"] == 6
    assert metrics["genrm/count/bad_input"] == 4


@pytest.mark.parametrize(
    ("batch", "metadata"),
    [
        ("Answer: 3", None),  # would be one sample per character
        ({"role": "assistant", "content": "Answer: 3"}, None),  # one sample per key
        ([LOG], "3"),
        ([LOG], {"ground_truth": "3"}),
    ],
)
def test_step_refuses_a_string_or_mapping_batch(env, batch, metadata):
    with pytest.raises(TypeError):
        env.step(batch, metadata)
