"""Where a run is logged: the console, CSV and W&B; the W&B dashboard as code."""
