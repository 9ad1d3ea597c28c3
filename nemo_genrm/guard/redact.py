"""Masking of credentials before any text leaves the process (logs, errors, files).

Two kinds of secret are masked: the ``user:password@`` part of any URL, and every value a
:class:`Redactor` was given (an API key, a URL's password), whatever its length. Text is
redacted before it is cut short, and the cut end is checked for the start of a secret, so a
secret straddling the cut cannot leak a prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "MASK",
    "Redactor",
    "mask_url",
    "redact_tree",
    "redact_url",
    "url_credentials",
    "url_without_credentials",
]

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#]*@")
_WINDOW = 65_536  # longest text redacted before a cut; bodies past it are cut here first
_MIN_PARTIAL = 3  # a cut end matching this many leading characters of a secret is masked


def redact_url(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URL in it replaced by ``***@``."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)


def redact_tree(value: Any) -> Any:
    """A copy of a config-like tree (dicts, lists, strings) with URL credentials masked.

    Used before a run config is written to files or sent to a tracker: ``judge.http.base_url``
    may carry ``user:key@``.
    """
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, dict):
        return {key: redact_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(item) for item in value]
    return value


def mask_url(url: str) -> str:
    """One URL as it may be shown: anything before its last ``@`` masked, scheme or not."""
    if "@" not in url:
        return url
    head, host = url.rsplit("@", 1)
    scheme = head.split("://", 1)[0] + "://" if "://" in head else ""
    return f"{scheme}{MASK}@{host}"


def url_credentials(url: str) -> tuple[str, str] | None:
    """The (user, password) embedded in ``url``, or ``None`` when it has none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return parts.username or "", parts.password or ""


def url_without_credentials(url: str) -> str:
    """``url`` with its ``user:password@`` removed (host, port, path and query kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_url(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class Redactor:
    """Masks a fixed set of secret values and URL credentials in text.

    Args:
        secrets: Values to mask wherever they appear (empty ones are ignored).
    """

    def __init__(self, secrets: Iterable[str] = ()):
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"

    def __call__(self, text: str) -> str:
        """``text`` with every secret and URL credential masked."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return redact_url(text)

    def clip(self, text: str, limit: int) -> str:
        """Redact, then cut to ``limit`` characters; a cut end that starts a secret is masked.

        Args:
            text: Untrusted text, e.g. a server's error body that may quote the request.
            limit: Most characters kept.

        Returns:
            At most ``limit`` characters (plus a mask) with no secret or part of one at the end.
        """
        return self._mask_partial_tail(self(text[:_WINDOW])[:limit])

    def _mask_partial_tail(self, text: str) -> str:
        for secret in self._secrets:
            shortest = min(_MIN_PARTIAL, len(secret))
            for size in range(len(secret) - 1, shortest - 1, -1):
                if text.endswith(secret[:size]):
                    return text[: len(text) - size] + MASK
        return text
