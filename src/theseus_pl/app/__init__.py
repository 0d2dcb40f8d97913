"""The application behind ``python -m theseus_pl`` and its commands, in wings with one job each.

From the top down (``.importlinter``'s ``app-wings`` contract: a wing imports only the wings below it):
``run`` drives a run through its stages; ``checks`` refuses a run before compute; ``tracking`` logs to the console,
CSV and W&B; ``ship`` makes what leaves a run (model card, hub upload, deployment, GLUE submission) and ``report``
reads many runs into tables; ``methods`` builds what trains; ``predecessors`` makes the model compressed;
``results`` is the record a run writes; ``config`` reads Hydra's configuration.
"""
