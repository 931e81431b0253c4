"""The command line's logging: every URL in a log line without its credentials
(:class:`RedactURLs`)."""

from __future__ import annotations

import logging

__all__ = ["RedactURLs"]


class RedactURLs(logging.Filter):
    """Every URL in a log line without its credentials: the HTTP client logs
    each request's URL under ``-v``, query parameters (``?api_key=…``) included. The
    command line puts it on its log handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        from credo.models.urls import redact_text

        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
