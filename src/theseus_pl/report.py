"""``python -m theseus_pl.report RUN_DIR ...`` (or ``theseus-pl-report``): one table of a sweep's runs (see
:mod:`theseus_pl.app.report.tables`)."""

from theseus_pl.app.report.tables import main


def cli() -> None:
    """The ``theseus-pl-report`` command."""
    main()


if __name__ == "__main__":
    cli()
