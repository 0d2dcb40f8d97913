"""Each YAML text OmegaConf loads in a test's process parsed once.

Hydra's ``compose`` reads every file of the defaults tree anew at each call (about 30: the train config, its groups,
the experiment and Hydra's own), and the tests compose about 1,160 times a run, once for each config a test builds and
for each job a sweep's checks compose: 141 s in all on the AVX-512 EPYC (where the two workers spend about 770 s in
tests), about half of it parsing YAML into OmegaConf objects. ``OmegaConf.load`` is replaced here by a memo keyed by
the text it is given, which returns a deep copy of the first parse: a copy costs about a sixth of a parse, so a
compose takes 63-88 ms instead of 90-111 ms. Hydra calls ``OmegaConf.load`` on each file it reads; should it stop
doing so, nothing here is reached and nothing breaks. A text not seen before is parsed by OmegaConf from the caller's
own path or stream, so a YAML error names its file as it would.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import IO, Any

from omegaconf import DictConfig, ListConfig, OmegaConf

omegaconf_load = OmegaConf.load
_parsed: dict[str, DictConfig | ListConfig] = {}


def _load_parsed_once(file_: str | os.PathLike[str] | IO[Any]) -> DictConfig | ListConfig:
    """What ``OmegaConf.load(file_)`` returns, as a fresh object, without parsing a text twice."""
    if isinstance(file_, (str, os.PathLike)):
        try:
            text = Path(file_).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # OmegaConf's own error
            return omegaconf_load(file_)
    elif not file_.seekable():
        return omegaconf_load(file_)
    else:
        text = file_.read()
        text = text.decode("utf-8") if isinstance(text, bytes) else text  # a zip's members read as bytes
        file_.seek(0)
    if (parsed := _parsed.get(text)) is None:
        parsed = _parsed[text] = omegaconf_load(file_)
    return copy.deepcopy(parsed)


def parse_each_yaml_text_once() -> None:
    """From now on in this process, ``OmegaConf.load`` parses each text once."""
    OmegaConf.load = staticmethod(_load_parsed_once)
