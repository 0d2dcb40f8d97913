"""What ``python -m theseus_pl.publish`` does (:mod:`theseus_pl.publish` says it in the user's words): the upload
planned and checked before anything goes up, the card written afresh from the record, the hub's refusals in one
line."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from huggingface_hub import HfApi, ModelCard, constants, get_token
from huggingface_hub.errors import HFValidationError
from huggingface_hub.errors import HTTPError as TransportError  # httpx's base error, as huggingface_hub imports it
from huggingface_hub.utils import validate_repo_id

from theseus_pl.app.results.envelope import ResultsError, RunRecord, UnknownKind
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import kind_named
from theseus_pl.app.ship.model_card import model_card
from theseus_pl.core.io import has_tokenizer, is_pickled

SUCCESSOR = "successor"
CARD = "README.md"
RUN_FOLDER = "results.json and successor/"  # what makes a folder a finished run's, as the refusals say
ORG_SLASH_NAME = re.compile(r"[^/\s]+/[^/\s]+")
NO_TOKEN = (
    "No Hugging Face token: run `hf auth login` once, set HF_TOKEN, or pass --token TOKEN "
    "(a token that may write to the repo's user or organisation); --dry-run needs none."
)


class PublishRefused(ValueError):
    """Everything wrong with a publish command, found before anything is uploaded: one problem a line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class PublishFailed(RuntimeError):
    """The hub refused or could not be reached; the message is one line."""


class HubApi(Protocol):
    """The two calls of ``huggingface_hub.HfApi`` that publishing makes (a stand-in records them in the tests)."""

    def create_repo(self, repo_id: str, *, private: bool, exist_ok: bool, repo_type: str) -> str: ...

    def upload_folder(
        self,
        *,
        repo_id: str,
        folder_path: Path,
        repo_type: str,
        allow_patterns: list[str],
        delete_patterns: list[str],
        commit_message: str,
    ) -> object: ...


# The repo's files a deployment makes (its ONNX, OpenVINO and GGUF folders) that this upload does not hold, removed in
# its commit: a repo published before a redeploy with fewer models kept the old files, which the card no longer named.
DEPLOYMENT_FOLDERS = ("onnx/*", "openvino/*", "gguf/*")


@dataclass(frozen=True)
class Upload:
    """What goes up: the successor folder's files (path inside it -> bytes, the card's as rewritten) and its card."""

    repo_id: str
    private: bool
    folder: Path
    files: dict[str, int]
    card: ModelCard
    commit_message: str


def planned_upload(run_dir: Path, repo_id: str, private: bool) -> Upload:
    """The upload of ``run_dir``'s successor to ``repo_id``; :class:`PublishRefused` names every problem at once."""
    results, problems = publishable_record(run_dir)
    problems = repo_id_problems(repo_id) + problems
    if results is None or problems:
        raise PublishRefused(problems)
    folder = run_dir / SUCCESSOR
    try:
        card = model_card(results, repo_id)
    except UnknownKind as error:  # a kind the card writer does not know: nothing to publish it with
        raise PublishRefused([str(error)]) from None
    files = successor_files(folder) | {CARD: len(str(card).encode("utf-8"))}
    message = f"{results.successor_in_words()} ({results.method}), from theseus_pl"
    return Upload(repo_id, private, folder, dict(sorted(files.items())), card, message)


def repo_id_problems(repo_id: str) -> list[str]:
    if not ORG_SLASH_NAME.fullmatch(repo_id):
        return [
            f"--repo-id {repo_id!r} is not ORG/NAME: give your user or organisation, a slash and the model's name, "
            "e.g. --repo-id my-org/rte-6-layers."
        ]
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        return [f"--repo-id {repo_id!r} is not a hub repo id: {error}"]
    return []


def publishable_record(run_dir: Path) -> tuple[RunRecord | None, list[str]]:
    """The results of a finished run with an exported successor, or why ``run_dir`` is not one (saying what was
    looked for)."""
    if not run_dir.is_dir():
        return None, [f"{run_dir} is not a folder: give a finished run's folder (it holds {RUN_FOLDER})."]
    missing = " and no ".join(name for name in ("results.json", f"{SUCCESSOR}/") if not (run_dir / name).exists())
    if missing:
        where = _nearby_run(run_dir)
        return None, [f"{run_dir} is not a finished theseus_pl run: looked for {RUN_FOLDER}, no {missing}{where}."]
    successor = run_dir / SUCCESSOR
    weights = any(successor.glob("*.safetensors")) or is_pickled(successor)
    if not ((successor / "config.json").is_file() and weights):
        return None, [
            f"{successor} holds no exported model: looked for config.json and model.safetensors (or successor.pt, "
            "a pickled successor); rerun the run to finish its export."
        ]
    try:
        record = read_run(run_dir / "results.json")
    except ResultsError as error:
        return None, [str(error)]
    except json.JSONDecodeError as error:
        return None, [f"{run_dir / 'results.json'} is not valid JSON ({error}): is the run still writing it?"]
    missing_parts = _missing_parts(successor, record)
    if missing_parts:  # uploaded as it was, a model its users cannot load, under a card that says it can be
        return None, [
            f"{successor} lacks {', '.join(missing_parts)}, which the run wrote: rerun the run (resume=force) to "
            "export its successor whole."
        ]
    return record, []


def _missing_parts(successor: Path, record: RunRecord) -> list[str]:
    """What a model users load from ``successor`` needs that is not there: a tokenizer, and what the record's kind
    registered its successors to need besides (a sentence-transformers folder's modules)."""
    missing = [] if has_tokenizer(successor) else ["a tokenizer"]
    kind = kind_named(record.kind)
    return missing + (kind.missing_parts(successor) if kind and kind.missing_parts else [])


def _nearby_run(run_dir: Path) -> str:
    """Where the run is when the folder given is next to it: a multirun's folder, or the run's successor/ itself."""
    jobs = sorted(path.parent for path in run_dir.glob("*/results.json"))
    if jobs:
        return f" (a multirun's folder? give one of its jobs, e.g. {jobs[0]})"
    if run_dir.name == SUCCESSOR and (run_dir.parent / "results.json").is_file():
        return f" (this is a run's successor/: give the run's folder, {run_dir.parent})"
    return ""


def successor_files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` by its path inside it, with its size; hidden ones aside (an editor's, the OS's or
    huggingface_hub's own cache: never part of a model)."""
    files = {}
    for path in folder.rglob("*"):
        inside = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in inside.parts):
            files[inside.as_posix()] = path.stat().st_size
    return files


def publish(upload: Upload, api: HubApi) -> str:
    """Create the repo if needed, rewrite the card and upload exactly ``upload.files``; the repo's URL.

    The card is rewritten once the repo exists, so that a refused token or an unreachable hub leaves it as it was.
    """
    try:
        url = api.create_repo(upload.repo_id, private=upload.private, exist_ok=True, repo_type="model")
        upload.card.save(upload.folder / CARD)
        api.upload_folder(
            repo_id=upload.repo_id,
            folder_path=upload.folder,
            repo_type="model",
            allow_patterns=list(upload.files),
            delete_patterns=list(DEPLOYMENT_FOLDERS),
            commit_message=upload.commit_message,
        )
    except (OSError, TransportError) as error:  # the hub's HTTP errors are OSErrors; offline mode a ConnectionError
        raise PublishFailed(f"Could not publish to {upload.repo_id}: {' '.join(str(error).split())}") from None
    return str(url)


def describe(upload: Upload) -> str:
    """The dry run's report: the repo, its visibility, every file with its size, and the card's metadata."""
    visibility = "private" if upload.private else "public"
    lines = [
        f"Would publish {upload.folder} to {upload.repo_id} ({visibility} if created; an existing repo keeps its own):"
    ]
    width = len(f"{max(upload.files.values()):,}")
    for name, size in upload.files.items():
        note = " (the model card, rewritten from results.json)" if name == CARD else ""
        lines.append(f"  {size:>{width},}  {name}{note}")
    lines.append(f"{len(upload.files)} files, {sum(upload.files.values()):,} bytes; an existing repo's files in onnx/, "
                 "openvino/ or gguf/ that are none of them are removed. The model card's metadata:")  # fmt: skip
    lines.append(f"---\n{upload.card.data.to_yaml()}\n---")
    return "\n".join(lines)


def _token_line(given: str | None) -> str:
    """Which token the upload would use, not checked by a dry run (no network): the one given, the machine's, or none
    (then the upload itself is refused)."""
    if given:
        return "The upload would use the token given by --token (a dry run does not check it)."
    if get_token():
        return "The upload would use this machine's token (HF_TOKEN or `hf auth login`'s; a dry run does not check it)."
    return f"The upload itself would be refused: {NO_TOKEN}"


def publish_run(run_dir: Path, repo_id: str, private: bool, token: str | None, dry_run: bool,
                api: HubApi | None = None) -> str:  # fmt: skip
    """The command, its line read: ``api`` stands in for ``HfApi(token=...)``. Returns the repo's URL."""
    found = token or (None if dry_run else get_token())  # the one given, else the machine's
    problems = [] if dry_run or found else [NO_TOKEN]
    try:
        upload = planned_upload(run_dir, repo_id, private)
    except PublishRefused as refused:
        problems = refused.problems + problems
    if problems:
        print("Nothing was published:\n" + "\n".join(f"- {problem}" for problem in problems), file=sys.stderr)
        raise SystemExit(2)
    if dry_run:
        print(describe(upload))
        print(_token_line(token))
        url = f"{constants.ENDPOINT}/{upload.repo_id}"
        print(f"Dry run: nothing was uploaded. The model would be at {url}")
        return url
    try:
        url = publish(upload, api or HfApi(token=found))
    except PublishFailed as error:
        raise SystemExit(str(error)) from None
    print(f"Published {len(upload.files)} files of {upload.folder} to {url}")
    return url
