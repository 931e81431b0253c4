"""Server URLs without their secrets: what a model's identity, logs and errors may show.

A base URL may carry credentials in its userinfo (``http://user:KEY@host/v1``). Nothing
credo writes (the model identity, hence the cache and every report; log lines; error
messages) may hold them, so backends keep the URL as :func:`redact_url` gives it and the
credentials apart (:func:`split_credentials`), to send as an ``Authorization`` header.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote

__all__ = ["basic_authorization", "redact_url", "split_credentials"]

# [scheme://]authority rest — the authority ends at the first "/", "?" or "#".
_URL = re.compile(
    r"^(?P<scheme>(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//)?(?P<authority>[^/?#]*)(?P<rest>.*)$",
    re.DOTALL,
)


def redact_url(url: str) -> str:
    """``url`` without its userinfo: ``http://user:KEY@host:8000/v1`` → ``http://host:8000/v1``.

    A URL without userinfo is returned unchanged, character for character (model
    identities, and so cache keys, are built from it). The host is what follows the last
    ``@`` of the authority, so an unescaped ``@`` in a password never leaks a part of it.
    """
    return split_credentials(url)[0]


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
