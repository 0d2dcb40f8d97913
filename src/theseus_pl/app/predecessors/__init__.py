"""The model a run compresses: made, fine-tuned or converted, and cached."""
