"""The Lightning floor: modules, callbacks, metrics and evaluation around the core."""

from theseus_pl.lightning.quiet import install_filters, verbose

if not verbose():
    install_filters()
