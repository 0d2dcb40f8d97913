"""Task data: the GLUE registry, sources (hub, local GLUE folder, own files, demo), cached tokenisation, DataModule."""
