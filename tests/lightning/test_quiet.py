"""theseus_pl silences exactly the third-party messages users can do nothing about, and nothing else."""

import logging
import warnings

from theseus_pl.lightning.quiet import install_filters

PYTREE = "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)` instead."


def test_the_pytree_deprecation_is_silenced_only_where_lightning_raises_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install_filters()
        warnings.warn_explicit(PYTREE, FutureWarning, "_pytree.py", 21, module="lightning.pytorch.utilities._pytree")
        warnings.warn_explicit(PYTREE, FutureWarning, "mine.py", 1, module="my_code")
        warnings.warn_explicit("another", UserWarning, "_pytree.py", 22, module="lightning.pytorch.utilities._pytree")
    assert [str(w.message) for w in caught] == [PYTREE, "another"]


def test_lightnings_mid_epoch_resume_warning_is_silenced_only_from_its_epoch_loop():
    resume = "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is not resumable."
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install_filters()
        loop = "lightning.pytorch.loops.training_epoch_loop"
        warnings.warn_explicit(resume, UserWarning, "loop.py", 224, module=loop)
        warnings.warn_explicit(resume, UserWarning, "mine.py", 1, module="my_code")
    assert [w.filename for w in caught] == ["mine.py"]


def test_the_model_summarys_bf16_size_notice_is_silenced_only_from_the_summary():
    notice = (
        "Precision bf16-mixed is not supported by the model summary.  Estimated model size in MB will not be accurate."
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install_filters()
        summary = "lightning.pytorch.utilities.model_summary.model_summary"
        warnings.warn_explicit(notice, UserWarning, "model_summary.py", 242, module=summary)
        warnings.warn_explicit(notice, UserWarning, "mine.py", 1, module="my_code")
    assert [w.filename for w in caught] == ["mine.py"]


def test_the_litlogger_tip_is_dropped_and_other_lightning_info_kept(caplog):
    install_filters()
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    with caplog.at_level(logging.INFO, logger="lightning.pytorch.utilities.rank_zero"):
        rank_zero.info("💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]")
        rank_zero.info("GPU available: False, used: False")
    assert [record.getMessage() for record in caplog.records] == ["GPU available: False, used: False"]
