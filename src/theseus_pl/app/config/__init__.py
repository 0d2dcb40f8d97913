"""Hydra's configuration as the app reads it: resolvers, the command line, the config's words for errors."""
