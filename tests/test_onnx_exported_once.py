"""The suite exports each model once a run (``onnx_exported_once``): a copied file must be the bytes torch writes, and
whatever changes the graph must change the key, so that no test is handed another model's export."""

from __future__ import annotations

import copy
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import tiny_inputs, tiny_model
from onnx_exported_once import MEMO_FOLDER, export_each_model_once, export_key, exported_once, torch_onnx_export
from transformers import AutoModelForSequenceClassification
from transformers.models.bert.modeling_bert import BertSelfOutput

from theseus_pl.deployment.onnx_export import LOGITS, _OneOutput, export_onnx


def counting(export):
    """``export``, and the list of the calls that reached it."""
    calls = []

    def counted(*args, **options):
        calls.append(args)
        return export(*args, **options)

    return counted, calls


def test_a_model_exported_again_gets_the_bytes_torch_writes_and_torch_is_not_called(tmp_path, monkeypatch):
    assert torch.onnx.export is not torch_onnx_export  # conftest.py installed the memo
    model, example = tiny_model("bert", num_hidden_layers=1), tiny_inputs()
    export, calls = counting(torch_onnx_export)
    monkeypatch.setattr(torch.onnx, "export", exported_once(export, tmp_path / "memo"))
    first = export_onnx(model, example, tmp_path / "first.onnx")
    again = export_onnx(model, example, tmp_path / "again.onnx")
    monkeypatch.setattr(torch.onnx, "export", torch_onnx_export)
    torch_own = export_onnx(model, example, tmp_path / "torch.onnx")
    assert len(calls) == 1 and first.read_bytes() == again.read_bytes() == torch_own.read_bytes()


@pytest.mark.quick
def test_whatever_decides_the_graph_changes_the_key(monkeypatch, tmp_path):
    model = tiny_model("bert", num_hidden_layers=1).eval()
    example = tiny_inputs()
    names = list(example)
    options = {"input_names": names, "output_names": [LOGITS], "dynamo": True, "external_data": False}

    def key(module=model, inputs=example, names=names, output=LOGITS, **changed):
        wrapped = _OneOutput(module, names, output)
        return export_key(wrapped, tuple(inputs[name] for name in names), options | changed)

    same = key()
    assert key(copy.deepcopy(model)) == same  # other objects, the same model: the same key
    model.save_pretrained(tmp_path / "one")
    shutil.copytree(tmp_path / "one", tmp_path / "another")
    loaded = [AutoModelForSequenceClassification.from_pretrained(tmp_path / name) for name in ("one", "another")]
    assert key(loaded[0]) == key(loaded[1])  # each test loads its model from a folder of its own
    weight = copy.deepcopy(model)
    with torch.no_grad():
        weight.bert.encoder.layer[0].output.dense.weight[0, 0] += 1e-3
    buffer = copy.deepcopy(model)
    buffer.bert.embeddings.token_type_ids.fill_(1)  # a buffer, not a parameter
    attention = copy.deepcopy(model)
    attention.config._attn_implementation = "eager"
    setting = copy.deepcopy(model)
    setting.bert.encoder.layer[0].attention.self.scaling *= 2  # a plain attribute a forward reads
    hooked = copy.deepcopy(model)
    hooked.classifier.register_forward_hook(lambda module, inputs, output: output * 2)
    changed = [weight, buffer, attention, setting, hooked, copy.deepcopy(model).train()]
    values = {name: tensor.clone() for name, tensor in example.items()}
    values["input_ids"][0, 0] += 1
    longer = tiny_inputs(length=11)
    keys = [key(module) for module in changed]
    keys += [key(inputs=values), key(inputs=longer), key(names=names[::-1]), key(output="hidden_states")]
    keys += [key(output_names=["scores"]), key(dynamo=True, opset_version=17)]
    monkeypatch.setattr(BertSelfOutput, "forward", lambda self, hidden, residual: residual)  # a test's own forward
    keys.append(key())
    assert same not in keys and len(set(keys)) == len(keys)
    untied = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
    untied[1].load_state_dict(untied[0].state_dict())  # equal values, two tensors
    tied = copy.deepcopy(untied)
    tied[1].weight = tied[0].weight  # one tensor: the graph holds one initializer
    assert export_key(tied, (torch.ones(2, 4),), options) != export_key(untied, (torch.ones(2, 4),), options)


def writing(model, args, f, **options):
    """A stand-in exporter: writes the model's class name and the options, to a path or a stream."""
    text = f"{type(model).__name__} {sorted(options)}".encode()
    if isinstance(f, io.BytesIO):
        f.write(text)
    else:
        Path(f).write_bytes(text)


@pytest.mark.quick
def test_a_call_the_memo_does_not_cover_or_that_failed_goes_to_the_exporter_each_time(tmp_path):
    model, example = tiny_model("bert", num_hidden_layers=1), tuple(tiny_inputs().values())
    folder = tmp_path / "memo"
    folder.mkdir()
    export, calls = counting(writing)
    memo = exported_once(export, folder)
    covered = {"dynamo": True, "external_data": False}
    for _ in range(2):
        memo(model, example, io.BytesIO(), **covered)
        memo(model, example, tmp_path / "external.onnx", dynamo=True, external_data=True)
        memo(model, example, tmp_path / "torchscript.onnx", dynamo=False, external_data=False)
        memo(model, example, tmp_path / "keywords.onnx", kwargs={"token_type_ids": example[0]}, **covered)
    assert len(calls) == 8 and list(folder.iterdir()) == []

    def failing(*args, **options):
        raise RuntimeError("cannot trace")

    export, calls = counting(failing)
    memo = exported_once(export, folder)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="cannot trace"):
            memo(model, example, tmp_path / "failed.onnx", **covered)
    assert len(calls) == 2 and [path for path in folder.iterdir() if path.is_dir()] == []  # no entry, no staging
    export, calls = counting(writing)  # a covered call: stored once, copied after
    memo = exported_once(export, folder)
    memo(model, example, tmp_path / "first.onnx", **covered)
    memo(model, example, tmp_path / "again.onnx", **covered)
    assert len(calls) == 1 and len(list(folder.glob("*/model.onnx"))) == 1
    assert (tmp_path / "again.onnx").read_bytes() == (tmp_path / "first.onnx").read_bytes()


def tiny_export_keys() -> list[str]:
    """The keys of the tiny MPNet and DeBERTa-v2 classifiers' exports: their forwards hold nested functions."""
    example = tiny_inputs()
    wrapped = [_OneOutput(tiny_model(family), list(example), LOGITS) for family in ("mpnet", "deberta-v2")]
    return [export_key(model, tuple(example.values()), {"dynamo": True}) for model in wrapped]


def test_a_model_has_the_same_key_in_another_process():
    """The workers and the commands they fork share the files: a key that held an address (a nested function's code
    in a forward) would have each process export again."""
    run = subprocess.run(
        [sys.executable, "-c", "from test_onnx_exported_once import tiny_export_keys; print(*tiny_export_keys())"],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.split() == tiny_export_keys()


def test_a_pytest_run_inside_this_one_leaves_the_processs_exports_in_the_runs_folder(tmp_path):
    """pytester's runs (``tests/data/test_real_data_gate.py``) import ``conftest.py`` anew, which installs the memo
    again: the worker's later exports must still go to the folder the other worker reads."""
    memo = torch.onnx.export
    folder = getattr(memo, MEMO_FOLDER)
    assert export_each_model_once(tmp_path / "inner") == folder and folder.is_dir()
    assert torch.onnx.export is memo and not (tmp_path / "inner").exists()
