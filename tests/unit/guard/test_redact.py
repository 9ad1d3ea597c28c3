"""Redaction: secrets and URL credentials masked before any cut, partial secrets at a cut too."""

from __future__ import annotations

import pytest

from nemo_genrm.guard.redact import (
    Redactor,
    mask_url,
    redact_tree,
    redact_url,
    url_credentials,
    url_without_credentials,
)

KEY = "sk-0123456789abcdefXYZ"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("see http://u:p@h:8/v1 now", "see http://***@h:8/v1 now"),
        ("https://tok@h/v1", "https://***@h/v1"),  # a token as the user name
        ("two: http://a:b@x/ and https://c:d@y/", "two: http://***@x/ and https://***@y/"),
        ("mail me: a@b.org", "mail me: a@b.org"),  # not a URL
        ("http://h/v1?next=a@b", "http://h/v1?next=a@b"),  # '@' after the host is no credential
    ],
)
def test_redact_url(text, expected):
    assert redact_url(text) == expected


def test_url_helpers():
    url = f"http://genrm:{KEY}@127.0.0.1:9/v1"
    assert url_credentials(url) == ("genrm", KEY)
    assert url_credentials("http://127.0.0.1:9/v1") is None
    assert url_without_credentials(url) == "http://127.0.0.1:9/v1"
    assert mask_url(f"genrm:{KEY}@host/v1") == "***@host/v1"  # no scheme: still masked
    assert mask_url(f"ftp://genrm:{KEY}@host/v1") == "ftp://***@host/v1"
    tree = redact_tree({"a": [url, 3, None], "b": {"c": url}})
    assert KEY not in repr(tree) and tree["a"][1:] == [3, None]


def test_clip_masks_before_cutting():
    redact = Redactor([KEY])
    for start in range(0, 60):  # the key starts anywhere around the cut at 50
        text = "x" * start + KEY + " tail"
        clipped = redact.clip(text, 50)
        assert len(clipped) <= 50 + 3
        # Not even a 3-character start of the key survives at the cut.
        assert all(KEY[i : i + 3] not in clipped for i in range(len(KEY) - 2)), (start, clipped)


def test_short_and_overlapping_secrets():
    redact = Redactor(["ab", "abcdef", ""])  # empty ignored; the longer one masked whole
    assert redact("xx abcdef yy ab") == "xx *** yy ***"
    assert "Redactor(2 secrets)" == repr(redact)
