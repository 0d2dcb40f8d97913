"""Drive a run through its stages, from its composed config to its results record."""
