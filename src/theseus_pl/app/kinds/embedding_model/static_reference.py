"""model2vec's static distillation of a sentence-embedding search's predecessor, as one more point on the search's
front: no layers at all, each token's vector looked up and averaged, 100x to 500x faster than the encoder at a lower
STS-B score. Where depth compression stands against it is what a user choosing a fast embedding model needs to see;
it is never a trial and never the pick.

Distilled once per predecessor (model2vec's ``distill`` from the local folder, PCA to 256 dimensions) into the cache
folder; scored on the same STS-B dev pairs as the trials and timed on the same dev sentences at the search's batch
size, with the timing code and busy-machine check deploy uses (a time taken beside other work is kept and said, as
deploy keeps its latencies). Its time includes tokenising (the trials' ONNX times do not), which only understates its
lead."""

from __future__ import annotations

import hashlib
import logging
import math
from pathlib import Path

import torch
from omegaconf import OmegaConf

from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.kinds.embedding_model.run import sts_dev_pairs
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.search_finding import ReferencePoint
from theseus_pl.app.ship.deploy_folder import CONFIG
from theseus_pl.core.embeddings import pair_spearman
from theseus_pl.core.timing import p50_milliseconds, was_busy
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.deployment.onnx_deployment import own_length_groups

log = logging.getLogger(__name__)
PCA_DIMS = 256  # model2vec's own default: its vectors' size
REPEATS = 20  # timed rounds, as deploy.repeats' default
LABEL = f"model2vec static ({PCA_DIMS} dims)"


def static_reference(trial_folder: Path, batch_size: int, cache_dir: Path) -> list[ReferencePoint]:
    """The predecessor of the search's trial in ``trial_folder`` distilled by model2vec, scored and timed as the
    trials are; no point where model2vec is not installed (``pip install 'theseus_pl[search]'``)."""
    try:
        from model2vec import StaticModel
        from model2vec.distill import distill
    except ModuleNotFoundError as missing:
        log.warning("No model2vec point on the front (%s): pip install 'theseus_pl[search]'", missing)
        return []
    record = read_run(trial_folder / "results.json", EmbeddingModelResults)  # registered for this kind's searches
    predecessor = Path(record.predecessor.dir)
    digest = hashlib.sha256(f"{predecessor.resolve()}:{PCA_DIMS}".encode()).hexdigest()[:16]
    model, _ = load_or_build(
        cache_dir / "model2vec" / f"{predecessor.name}-{digest}",
        lambda path: StaticModel.from_pretrained(str(path)),
        lambda staging: distill(model_name=str(predecessor), pca_dims=PCA_DIMS).save_pretrained(str(staging)),
        "model2vec's static model of the predecessor",
    )
    rows = sts_dev_pairs(OmegaConf.load(trial_folder / CONFIG).data)
    vectors = [torch.from_numpy(model.encode(list(rows[column]))) for column in ("sentence1", "sentence2")]
    score = pair_spearman(vectors[0], vectors[1], rows["label"])
    if not math.isfinite(score):  # constant vectors: every word outside its vocabulary
        log.warning("%s scored no number on the STS-B dev pairs (its vectors do not vary): not on the front", LABEL)
        return []
    batches = own_length_groups([*rows["sentence1"], *rows["sentence2"]], batch_size, len)  # the trials' rows
    milliseconds, other_cores = p50_milliseconds({LABEL: lambda: [model.encode(batch) for batch in batches]}, REPEATS)
    if was_busy(other_cores):  # kept, as deploy keeps a busy machine's latencies: said, not hidden
        log.warning("model2vec's static model was timed while other processes kept %.1f cores busy: its time on the "
                    "front is not its own alone; search again on a quiet machine to weigh it", other_cores)  # fmt: skip
    return [ReferencePoint(LABEL, score, milliseconds[LABEL] / len(batches))]
