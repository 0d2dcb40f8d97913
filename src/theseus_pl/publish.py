"""``python -m theseus_pl.publish RUN_DIR --repo-id ORG/NAME`` (or ``theseus-pl-publish``): a finished run's successor
to the Hugging Face Hub (see :mod:`theseus_pl.app.ship.publishing`)."""

from theseus_pl.app.ship.publishing import main


def cli() -> None:
    """The ``theseus-pl-publish`` command."""
    main()


if __name__ == "__main__":
    cli()
