"""The kinds of run, by the names the config (``data.kind``) and every ``results.json`` (``kind``) give them."""

TASK_MODEL = "task_model"  # a classifier or regressor (an encoder) compressed on a task
LANGUAGE_MODEL = "language_model"  # a decoder LM compressed on text
EMBEDDING_MODEL = "embedding_model"  # a sentence-transformers model compressed to its own sentence vectors
