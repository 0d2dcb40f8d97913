"""The library's errors in the words of the config: its Python argument names become the config keys that set them.

The library (``theseus_pl.core``) names its own arguments (``hidden_size=10 must be ...``); a user of the app set
them as config keys (``theseus.successor.hidden_size=10``), so the app rewords each message before it shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SUCCESSOR_SETTINGS = ("intermediate_size", "hidden_size", "importance")  # theseus.successor.*
SCHEDULE_SETTINGS = ("p", "switch_step", "b", "k", "steps_to_full")  # replacement.*


def in_config_terms(message: str, group: str, arguments: Iterable[str]) -> str:
    """``message`` with each of ``arguments`` named as ``<group>.<argument>`` where it stands as a name (followed by
    ``=`` or ``:``, not already part of a dotted key)."""
    names = "|".join(re.escape(argument) for argument in arguments)
    return re.sub(rf"(?<![\w.])({names})(?=[=:])", rf"{group}.\1", message)


def naming_group(group: str, message: str) -> str:
    """``message`` as one line of a refusal: prefixed with ``<group>:`` unless it names an option of the group
    already (``data.files.validation=... does not exist`` says ``data`` once)."""
    return message if message.startswith(f"{group}.") else f"{group}: {message}"
