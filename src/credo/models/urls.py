"""Server URLs without their secrets: what a model's identity, logs and errors may show.

A base URL may carry credentials in its userinfo (``http://user:KEY@host/v1``) or in its
query string (``http://host/v1?api_key=KEY``: a parameter named like a credential, see
:data:`SECRET_PARAMS`). Nothing credo writes (the model identity, hence the
cache and every report; config.yaml; log lines; error messages) may hold them, so
backends keep the URL as :func:`redact_url` gives it and the credentials apart
(:func:`split_credentials`, :func:`split_query_secrets`), to send as an
``Authorization`` header and as query parameters the client adds to every call.
:func:`redact_text` takes them out of any text that holds URLs (a log line).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qsl, unquote, urlencode

__all__ = [
    "SECRET_PARAMS",
    "basic_authorization",
    "redact_text",
    "redact_url",
    "split_credentials",
    "split_query_secrets",
]

SECRET_PARAMS = re.compile(
    r"(?i)^(?:[a-z0-9]*[-_])*(?:api[-_]?key|apikey|key|token|access[-_]?token|accesstoken|"
    r"auth|authorization|secret|password|passwd|pwd|sig|signature)$"
)
"""Query parameter names taken for credentials: ``api_key``, ``key``, ``token``,
``access_token``, ``sig``, ``password``, …, also after a ``word_`` or ``word-`` prefix
(``x-api-key``, ``client_secret``), in any case."""

_ANY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")

# [scheme://]authority rest — the authority ends at the first "/", "?" or "#".
_URL = re.compile(
    r"^(?P<scheme>(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//)?(?P<authority>[^/?#]*)(?P<rest>.*)$",
    re.DOTALL,
)


def redact_url(url: str) -> str:
    """``url`` without its userinfo nor its credential query parameters:
    ``http://user:KEY@host:8000/v1?api_key=K&x=1`` → ``http://host:8000/v1?x=1``.

    A URL with neither is returned unchanged, character for character (model
    identities, and so cache keys, are built from it). The host is what follows the last
    ``@`` of the authority, so an unescaped ``@`` in a password never leaks a part of it.
    """
    return split_query_secrets(split_credentials(url)[0])[0]


def redact_text(text: str) -> str:
    """``text`` with every URL in it as :func:`redact_url` gives it (a log line)."""
    if "://" not in text:
        return text
    return _ANY_URL.sub(lambda m: redact_url(m.group(0)), text)


def split_query_secrets(url: str) -> tuple[str, dict[str, str]]:
    """``(url without its credential query parameters, those parameters)``;
    ``(url, {})`` unchanged when it has none. A fragment is kept."""
    head, mark, query = url.partition("?")
    if not mark:
        return url, {}
    query, hash_, fragment = query.partition("#")
    pairs = parse_qsl(query, keep_blank_values=True)
    secrets = {k: v for k, v in pairs if SECRET_PARAMS.match(k)}
    if not secrets:
        return url, {}
    kept = urlencode([(k, v) for k, v in pairs if not SECRET_PARAMS.match(k)])
    return head + (f"?{kept}" if kept else "") + hash_ + fragment, secrets


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(redact_url(url), user, password)``; user and password are percent-decoded, and
    ``None`` where the URL has no userinfo (password ``None`` also for ``http://user@host``)."""
    match = _URL.match(url)
    if match is None or "@" not in match["authority"]:
        return url, None, None
    userinfo, _, host = match["authority"].rpartition("@")
    user, colon, password = userinfo.partition(":")
    return (
        (match["scheme"] or "") + host + match["rest"],
        unquote(user),
        unquote(password) if colon else None,
    )


def basic_authorization(user: str, password: str | None) -> str:
    """The ``Authorization`` header value of HTTP basic authentication (RFC 7617)."""
    token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
    return f"Basic {token}"
