"""``python -m theseus_pl.report SWEEP_DIR ...``: one table of a sweep's runs (see :mod:`theseus_pl.app.report`)."""

from theseus_pl.app.report import main

if __name__ == "__main__":
    main()
