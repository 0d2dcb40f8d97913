"""Tasks of EleutherAI's lm-evaluation-harness (``lm-eval``) on a causal LM, through lm-eval's own HF model class.

Held-out perplexity says how well a compressed LM predicts text; lm-eval's tasks say what it can still *do*, scored
the way the field scores it. The tasks are lm-eval's by name (they read their data from the Hugging Face hub) or
task YAMLs in folders given as ``include_paths`` (:mod:`theseus_pl.data.harness_tasks` writes two over a local GLUE
folder). lm-eval is an optional extra (``theseus_pl[lm-eval]``): it is imported only here, only when tasks are asked
for.

lm-eval indexes its ~15,000 bundled tasks in about 8 s; :func:`harness_problems` indexes only the given folders when
they hold every task asked for. Each task's data is loaded by the check, so a task that cannot get its data (offline)
is refused before any training; lm-eval reads it from its cache when it scores.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from theseus_pl.data.harness_tasks import LOCAL_TASKS

log = logging.getLogger(__name__)

INSTALL = 'pip install "theseus_pl[lm-eval]"'


def harness_problems(tasks: Sequence[str], include_paths: Sequence[Path]) -> list[str]:
    """Why ``tasks`` cannot be scored: lm-eval missing, a task name it does not know (with the nearest names), or a
    task whose data cannot be loaded (offline, a missing file), each named with the fix."""
    try:
        import lm_eval.tasks  # noqa: F401 (installed?)
    except ImportError:
        return [f"evaluation.lm_eval.tasks needs lm-evaluation-harness, not installed here: {INSTALL}."]
    manager = _task_manager(tasks, include_paths)
    known = set(manager.all_tasks)
    problems = []
    for task in tasks:
        if task not in known:
            near = difflib.get_close_matches(task, known | set(LOCAL_TASKS), n=3)  # local ones even if not asked for
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            problems.append(f"evaluation.lm_eval.tasks: lm-eval has no task {task!r}{hint}.")
            continue
        try:
            manager.load([task])  # builds the task, which loads its data
        except Exception as error:  # lm-eval and datasets raise many kinds: each is a task that cannot run
            problems.append(
                f"evaluation.lm_eval.tasks: {task} cannot load its data ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}). Offline, score sst2_local or rte_local "
                "(evaluation.lm_eval.glue_dir=PATH) or your own task YAMLs over local files "
                "(evaluation.lm_eval.include_path=FOLDER)."
            )
    return problems


def harness_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: Sequence[str],
    include_paths: Sequence[Path],
    num_fewshot: int = 0,
    limit: int | None = None,
    batch_size: int = 8,
) -> dict[str, dict[str, float]]:
    """Each task's metrics (``acc``, ``acc_stderr``, …, the filter name dropped) for ``model`` as it is (its device
    and dtype), ``limit`` examples a task at most, with ``num_fewshot`` examples in each prompt."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    harness_model = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    with torch.no_grad():
        results = lm_eval.simple_evaluate(
            model=harness_model, tasks=list(tasks), task_manager=_task_manager(tasks, include_paths),
            num_fewshot=num_fewshot, limit=limit, log_samples=False, random_seed=0, numpy_random_seed=0,
            torch_random_seed=0, fewshot_random_seed=0,
        )  # fmt: skip
    return {task: _metrics(results["results"][task]) for task in tasks}


def _task_manager(tasks: Sequence[str], include_paths: Sequence[Path]) -> Any:
    """lm-eval's task index: the given folders alone when they hold every task, else with lm-eval's own tasks."""
    from lm_eval.tasks import TaskManager

    paths = [str(path) for path in include_paths]
    if paths:
        local = TaskManager(include_path=paths, include_defaults=False)
        if set(tasks) <= set(local.all_tasks):
            return local
    return TaskManager(include_path=paths or None)


def _metrics(values: dict[str, Any]) -> dict[str, float]:
    """``{"acc,none": 0.7, "acc_stderr,none": 0.01, "alias": ...}`` as ``{"acc": 0.7, "acc_stderr": 0.01}``."""
    return {
        name.split(",")[0]: float(value)
        for name, value in values.items()
        if "," in name and isinstance(value, int | float) and not isinstance(value, bool)
    }
