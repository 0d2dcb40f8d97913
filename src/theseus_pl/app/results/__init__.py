"""The record every run writes (``results.json``) and reads back."""
