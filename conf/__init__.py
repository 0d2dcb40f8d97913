"""Hydra configs of `python -m theseus_pl`, packaged with the wheel (a module so Hydra can find them installed)."""
