"""Everything a run is refused for, found before any compute and said in one message."""
