"""Tables, plots and warnings over many runs' results records."""
