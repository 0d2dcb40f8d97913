"""The fastest successor within a score floor, searched on this machine: a multi-objective Optuna search run as a
Hydra sweep (``+search=fastest_within``), each trial a deployed and timed run, its answer the Pareto front of dev
score against time a call and the fastest trial within the floor."""
