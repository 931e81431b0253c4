"""A certificate bound to the run that made it (issue 23, item 3).

:func:`credo.evaluate.certify.certify` picks a threshold with a guarantee that holds for
new items *answered by the same model and pipeline*. A :class:`RunCertificate` carries the
statistical certificate together with what must match when it is used: the model's
identity, the prompt style, the sampling settings, n and m, the perturbation writer, the
kernel, the method with its options and credo's version. ``credo run --certificate``
compares them with its own before the first model call and refuses a run that differs,
naming the first field that does (:func:`mismatch`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from credo.config import RunConfig
from credo.errors import UserError
from credo.evaluate.certify import Certificate

__all__ = ["RunCertificate", "credo_version", "mismatch", "run_settings"]


def credo_version() -> str:
    """The installed credo's version ("unknown" when not installed as a package)."""
    try:
        return version("credo")
    except PackageNotFoundError:
        return "unknown"


def run_settings(config: RunConfig, model_identity: str, method: str) -> dict[str, Any]:
    """What a certificate's guarantee depends on besides the data: every setting that
    changes a sample or a score of ``method`` (issue 23, item 3), as JSON values."""
    dump = config.model_dump(mode="json")
    return {
        "model": model_identity,
        "prompt_style": config.prompt_style,
        "sampling": dump["sampling"],
        "n": config.n,
        "m": config.m,
        "writer": dump["perturbation"]["generator"],
        "perturbation": {k: dump["perturbation"][k]
                         for k in ("prompt", "rules", "threshold", "corpus", "sampling")},
        "kernel": config.kernel,
        "method": method,
        "baselines": dump["baselines"],
        "judge": dump["judge"]["model"],
        "credo": credo_version(),
    }


def mismatch(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """The first setting (dotted path) whose value differs, or None when all match."""
    for key in expected:
        a, b = expected[key], actual.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = mismatch(a, b)
            if inner is not None:
                return f"{key}.{inner}"
        elif a != b:
            return key
    return None


@dataclass(frozen=True)
class RunCertificate:
    """A :class:`~credo.evaluate.certify.Certificate` and the settings it holds for."""

    certificate: Certificate
    settings: dict[str, Any]
    source: str = ""

    @property
    def method(self) -> str:
        """The scoring method whose scores the threshold applies to."""
        return str(self.settings["method"])

    def to_json(self) -> dict[str, Any]:
        """The certificate file's content."""
        return {"certificate": self.certificate.to_dict(), "settings": self.settings,
                "source": self.source}

    @classmethod
    def read(cls, path: str | Path) -> RunCertificate:
        """A certificate file written by ``credo certify``; a :class:`UserError` names the
        file when it cannot be read."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            return cls(Certificate.from_dict(data["certificate"]), dict(data["settings"]),
                       str(data.get("source", "")))
        except OSError as e:
            raise UserError(f"{p}: cannot read the certificate ({e.strerror or e})") from None
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{p}: not a credo certificate ({e})") from None

    def check(self, config: RunConfig, model_identity: str) -> None:
        """Refuse a run whose settings differ from the certificate's (issue 23, item 4):
        a :class:`UserError` naming the field, before any model call."""
        if self.method not in config.methods:
            raise UserError(f"--certificate: the certificate is for method {self.method!r},"
                            f" which the run does not score (methods: {config.methods})")
        actual = run_settings(config, model_identity, self.method)
        differs = mismatch(self.settings, actual)
        if differs is not None:
            raise UserError(
                f"--certificate: the run's {differs} differs from the certificate's "
                f"({_at(actual, differs)!r} here, {_at(self.settings, differs)!r} there); "
                "its guarantee holds only for the settings it was made with"
            )


def _at(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data
