"""What leaves a finished run: its model card, the hub upload, the deployed models, a GLUE submission."""
