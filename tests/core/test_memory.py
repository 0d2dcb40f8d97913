"""A run's peak memory: reset at the start of each run, so the jobs of a multirun (one process) each get their own."""

import json
import mmap
import multiprocessing
import sys
from pathlib import Path

import pytest
import torch
from decoder_models import tiny_decoder, tiny_token_ids

from theseus_pl.core import memory
from theseus_pl.core.memory import checkpoint_activations, peak_memory, start_peak_memory
from theseus_pl.core.replacing import SuccessorInit, TheseusModel

pytestmark = pytest.mark.quick


def peaks_of_two_jobs(answer: Path) -> None:
    """Two jobs of a multirun in one process: the first allocates 300 MiB and frees it, the second starts.

    The block is mapped afresh, not malloc'd: malloc hands out freed heap memory that is still resident, and in a
    fork of a worker that had freed hundreds of MiB the block raised the resident set by 0.7 MB (the test failed once
    in a full run; a fork of a process that freed ~300 MB reproduces it: 93 MB for a malloc'd 300 MiB)."""
    since = start_peak_memory()
    base = peak_memory(since).cpu_mb
    block = mmap.mmap(-1, 300 * 2**20)
    for offset in range(0, len(block), mmap.PAGESIZE):  # touched, a page at a time
        block[offset] = 1
    during = peak_memory(since).cpu_mb
    block.close()
    since = start_peak_memory()  # the next job of a multirun
    answer.write_text(json.dumps([since, base, during, peak_memory(since).cpu_mb]))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident-set peak is reset through /proc")
def test_the_peak_is_the_runs_not_the_processs(tmp_path):
    # In a process of its own, forked from this one: in the suite's, what other tests left running (threads that
    # allocate) moved the resident set between the reset and the reading; a fork holds only the forking thread.
    job = multiprocessing.get_context("fork").Process(target=peaks_of_two_jobs, args=(tmp_path / "peaks.json",))
    job.start()
    job.join(300)
    assert job.exitcode == 0
    since, base, during, after = json.loads((tmp_path / "peaks.json").read_text())
    assert during > base + 250
    assert since == "run" and after < base + 100


def test_where_the_peak_cannot_be_reset_the_record_says_it_is_the_processs(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "no" / "clear_refs")
    since = start_peak_memory()
    assert since == "process" and peak_memory(since).cpu_since == "process" and peak_memory(since).cpu_mb > 0


GIB = 2**30
LAYER, TOTAL, VOCAB, HIDDEN = 3_540_096, 134_515_008, 49_152, 576  # SmolLM2-135M: a layer's parameters, all of them


@pytest.mark.parametrize(
    ("trained", "frozen", "tokens", "layers", "distils", "measured_gib"),
    [
        (TOTAL - 15 * LAYER, 0, 8 * 128, 15, False, 2.34),  # ShortGPT healed on the LM loss
        (TOTAL - 15 * LAYER, TOTAL, 8 * 128, 15, True, 3.80),  # ShortGPT distilled from the predecessor
        (15 * LAYER, TOTAL, 8 * 128, 22, False, 2.65),  # Theseus: its successor modules beside the predecessor
        (TOTAL - 15 * LAYER, 0, 8 * 256, 15, False, 3.84),  # ShortGPT healed, windows of 256
        (TOTAL - 15 * LAYER, TOTAL, 8 * 256, 15, True, 5.96),  # ShortGPT distilled, windows of 256
    ],
)
def test_the_memory_formula_meets_the_peaks_measured_on_smollm2_within_a_fifth(
    trained, frozen, tokens, layers, distils, measured_gib
):
    """Against the GPU peaks recorded for SmolLM2-135M 30 -> 15 layers on an H200 (docs/results/decoder-lms.md)."""
    estimate = memory.training_memory_bytes(trained, frozen, tokens, VOCAB, HIDDEN, layers, distils) / GIB
    assert abs(estimate / measured_gib - 1) < 0.2


def _theseus_step(checkpointed: bool) -> tuple[dict[str, torch.Tensor], int, list[str]]:
    """One training step of a tiny Theseus decoder (every module on its successor): the trained parameters'
    gradients, how often the lowest successor layer ran forward, and the models switched to checkpointing."""
    model = TheseusModel(tiny_decoder("llama", num_hidden_layers=4), 2, init=SuccessorInit.BOTTOM).train()
    switched = checkpoint_activations(model) if checkpointed else []
    calls = []
    # inside the layer (transformers checkpoints its forward, so the layer's own hooks run once either way), and early
    # in it (the recompute stops once it has every tensor the backward pass needs)
    model.blocks[0].successor.self_attn.q_proj.register_forward_hook(lambda *_: calls.append(1))
    ids = tiny_token_ids()
    model(gate=[True, True], input_ids=ids, labels=ids).loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}
    return grads, len(calls), switched


def test_activation_checkpointing_recomputes_the_trained_layers_and_changes_no_gradient():
    plain, plain_calls, _ = _theseus_step(checkpointed=False)
    checkpointed, checkpointed_calls, switched = _theseus_step(checkpointed=True)
    assert switched == ["model"]  # the wrapped decoder: its layers hold the successor modules
    assert (plain_calls, checkpointed_calls) == (1, 2)  # run again in the backward pass
    assert plain.keys() == checkpointed.keys() and len(plain) > 0
    assert all(torch.allclose(plain[name], checkpointed[name], atol=1e-6) for name in plain)


def test_a_frozen_teacher_is_left_alone_and_the_formula_counts_one_layers_activations():
    teacher = tiny_decoder("llama").requires_grad_(False)
    assert checkpoint_activations(torch.nn.ModuleDict({"teacher": teacher})) == []
    plain = memory.training_memory_bytes(10, 20, tokens=100, vocab=50, hidden=8, layers=30, distils=False)
    checkpointed = memory.training_memory_bytes(10, 20, tokens=100, vocab=50, hidden=8, layers=30, distils=False,
                                                checkpointed=True)  # fmt: skip
    assert plain - checkpointed == 100 * 8 * (100 * 30 - (4 * 30 + 100))
