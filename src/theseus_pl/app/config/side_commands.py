"""What the side commands (``theseus-pl-report``, ``-deploy``, ``-publish``, ``-dashboard``, ``-submit``) share, so
they read as one tool: the name in their usage line, their help's plain text and shown defaults, and ``--dry-run``.

Each command's description is its module docstring, written for the API reference (reStructuredText roles and
double backticks, which mkdocstrings renders); ``--help`` prints it without that markup. Only the standard library is
imported: ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

PACKAGE = "theseus_pl"
ROLE = re.compile(r":(?:py:)?[a-z]+:`~?([^`]+)`")  # :mod:`x`, :class:`~x.Y`, :func:`f` -> their target
CODE = re.compile(r"``([^`]+)``")


def program_name(command: str, argv0: str | None = None) -> str:
    """How the command was invoked: ``python -m theseus_pl.<command>`` when ``argv[0]`` is a module file (Python
    sets it so for ``-m``), else the console script's own name (``theseus-pl-<command>``, or whatever it was
    installed as)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if not argv0 or argv0.endswith(".py") or argv0 == "-c":
        return f"python -m {PACKAGE}.{command}"
    return Path(argv0).name


def plain(text: str) -> str:
    """A docstring without its reStructuredText markup, as a terminal should show it."""
    return CODE.sub(r"\1", ROLE.sub(r"\1", text))


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (its usage lines and lists keep their shape); each option's default after its
    help, unless it has none worth showing (None, a switch's False) or the help already says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def command_parser(command: str, description: str | None, dry_run: str) -> argparse.ArgumentParser:
    """The parser of ``theseus_pl.<command>``, with its ``--dry-run`` (``dry_run``: what it does instead)."""
    parser = argparse.ArgumentParser(
        prog=program_name(command), description=plain(description or ""), formatter_class=HelpFormatter
    )
    parser.add_argument("--dry-run", action="store_true", help=dry_run)
    return parser


def count_of(what: str) -> Callable[[str], int]:
    """An option's type: a whole number, at least 1 (``what`` names it in argparse's refusal: "count of jobs"),
    refused as the command line is read, before anything is loaded."""

    def parse(text: str) -> int:
        if not (text.isdigit() and int(text) >= 1):
            raise argparse.ArgumentTypeError(f"{text!r} is no {what}: a whole number, at least 1")
        return int(text)

    return parse


# The settings a lower layer's message names (as a run's config sets them) that a side command's flag sets, by flag.
SETTING_FLAGS = {"data.glue_dir": "--glue-dir"}


def in_flags(message: str, flags: Iterable[str]) -> str:
    """``message`` with each setting of :data:`SETTING_FLAGS` whose flag is one of ``flags`` (those the command's
    user sets it with) named by that flag: ``data.glue_dir=PATH`` as ``--glue-dir PATH``."""
    for setting, flag in SETTING_FLAGS.items():
        if flag in flags:
            message = message.replace(f"{setting}=", f"{flag} ")
    return message


class CommandRefused(SystemExit):
    """A side command's refusal: its message on stderr and exit status 2, as argparse's for a bad option, with no
    traceback. ``str()`` is the message (``SystemExit``'s would be the status)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def refuse(message: str) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise CommandRefused(message)
