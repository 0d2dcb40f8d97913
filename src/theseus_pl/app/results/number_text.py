"""A record's figure in a line of text (a run's headline, a model card, the deployment's table), or n/a where it
holds none.

``results.json`` writes a number that is not finite as null (a constant model's NaN correlation, a diverged LM's inf
perplexity), so a record read back holds None where the process that wrote it still holds the NaN or inf. Every
kind's headline and card shows either as n/a by this one rule: a format spec given a None raised TypeError (ending
``report --dry-run``, which lists each run by its headline, and the run's own last log line), and a NaN read "nan"
where the same figure read back read "n/a". It lives below the kinds, which may not import one another.
"""

from __future__ import annotations

import math


def known(value: float | None) -> bool:
    """A number to show: not missing, and finite."""
    return value is not None and math.isfinite(value)


def shown(value: float | None, spec: str, unit: str = "") -> str:
    """``value`` in the format ``spec`` (``".2f"``) followed by ``unit`` (``"%"``, ``"x"``), or n/a where it is not
    :func:`known`."""
    return f"{value:{spec}}{unit}" if known(value) else "n/a"
