"""Publish a finished run's successor to the Hugging Face Hub.

    python -m theseus_pl.publish RUN_DIR --repo-id ORG/NAME [--private] [--dry-run] [--token TOKEN]

A run of any kind: an encoder compressed on a task, a decoder LM compressed on text, or a sentence-embedding model
compressed to its own vectors. Only the content of ``RUN_DIR/successor/`` goes up: the checkpoint (or the pickled
``successor.pt``; a sentence-transformers folder, its pooling included), its tokenizer, the model card ``README.md``
and, when the run was deployed, ``onnx/``. The run's other files (checkpoints, logs, W&B runs, the config) describe
the experiment, not the model, and name local paths. The card (its kind's) is written afresh from ``results.json``
just before the upload, so that it shows the run's final numbers (a deployment redone after the run included) and
code that loads the model from its repo. ``--dry-run`` lists every file that would go up and the card's metadata,
and uploads nothing. The token comes from ``--token``, else from huggingface_hub (``HF_TOKEN``, or the one
``hf auth login`` saved).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from theseus_pl.app.config.side_commands import command_parser

if TYPE_CHECKING:
    from theseus_pl.app.ship.publishing import HubApi


def main(argv: Sequence[str] | None = None, api: HubApi | None = None) -> str:
    """The command; ``api`` stands in for ``HfApi(token=...)``. Returns the repo's URL."""
    parser = command_parser("publish", __doc__, dry_run="list what would go up, upload nothing, need no token")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="a finished run's folder (it holds results.json and successor/)")  # fmt: skip
    parser.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the hub repo to create or update")
    parser.add_argument(
        "--private", action="store_true", help="create the repo private (an existing repo keeps its own)"
    )
    parser.add_argument("--token", help="a hub token that may write (default: HF_TOKEN, or `hf auth login`'s)")
    args = parser.parse_args(argv)
    # The hub's client and the records (torch, transformers) once the command line is read: --help answers at once.
    from theseus_pl.app.ship.publishing import publish_run

    return publish_run(args.run_dir, args.repo_id, args.private, args.token, args.dry_run, api)


def cli() -> None:
    """The ``theseus-pl-publish`` command."""
    main()


if __name__ == "__main__":
    cli()
