"""theseus_pl's search as a Hydra sweeper (``hydra/sweeper=search``). Hydra instantiates sweepers only from the
``hydra_plugins`` namespace package and imports every module there as it starts, for any Hydra app: this shim
therefore imports nothing but Hydra, and the search (Optuna, the results' readers) only once a search starts."""
