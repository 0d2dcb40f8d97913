"""A sequence classifier, or the encoder of a sentence-embedding model, as ONNX: exported by ``torch.onnx``, quantised
and run by ONNX Runtime.

Nothing here exports or quantises by itself: the graph comes from PyTorch's exporter (``torch.export`` based, the
one PyTorch maintains; its TorchScript exporter is deprecated), the int8 model from ONNX Runtime's dynamic
quantisation. ``optimum`` is not used: its ONNX exporter now lives in ``optimum-onnx``, which pins transformers 4.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel

log = logging.getLogger(__name__)

# Dynamic int8: the weights of the matrix products and the embedding tables stored as int8 per output channel,
# activations quantised per batch at run time. ONNX Runtime's documentation recommends reduce_range (7-bit weights)
# on AVX2/AVX-512 CPUs without VNNI, where the int8 products can saturate; a CPU with VNNI (avx512_vnni, avx_vnni,
# or AMX's amx_int8) multiplies without that risk and keeps the full 8 bits. Without VNNI, on the demo's successor
# (dev accuracy 75.5 in fp32): per-tensor int8 weights scored 74.3, per-tensor uint8 74.6, per-channel with
# reduce_range 75.3, all at the same speed except uint8 (1.15x slower). Quantising the embeddings (Gather) is what
# makes the file 4x smaller: they hold two thirds of a 3-layer MiniLM's weights.
QUANTIZED_OPS = ("MatMul", "Gather")
ORT_DOMAIN = "com.microsoft"  # ONNX Runtime's own operators, which its fusions produce
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def int8_reduce_range(cpu_flags: frozenset[str]) -> bool:
    """Whether int8 weights keep 7 bits: on a CPU without VNNI only (see above)."""
    return not cpu_flags & VNNI_FLAGS


def quantization_words(reduce_range: bool, attention: bool = False) -> str:
    """How :func:`quantize_int8` made the int8 model, for the deployment record and the model card; ``attention``:
    its fused attention made QAttention (:func:`quantisable_attention`)."""
    weights = "with reduce_range (7 bits: a CPU without VNNI)" if reduce_range else "(8 bits: a CPU with VNNI)"
    fused = "; the fused attention's Q, K, V products as QAttention (7-bit weights)" if attention else ""
    return f"dynamic; int8 weights per channel {weights} (MatMul, Gather){fused}; uint8 activations"


class DeploymentError(RuntimeError):
    """Deployment cannot go on; the message says why and what to do. The PyTorch successor is never touched."""


def require_onnxruntime() -> None:
    """Fail before any work when the deployment extra is missing, naming it."""
    missing = [
        name for name in ("onnx", "onnxruntime", "onnxscript", "onnx_ir") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise DeploymentError(
            f"Deployment needs {', '.join(missing)} (not installed): pip install 'theseus_pl[deploy]'."
        )


LOGITS = "logits"  # a classifier's one output
TOKEN_VECTORS = "last_hidden_state"  # an encoder's: the name sentence-transformers' ONNX backend (optimum) reads


class _OneOutput(torch.nn.Module):
    """The model with positional tensor inputs in a fixed order and one of its outputs, by name, as the graph's one."""

    def __init__(self, model: PreTrainedModel, input_names: Sequence[str], output: str) -> None:
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output = output

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.input_names, inputs, strict=True)))[self.output]


def export_onnx(model: PreTrainedModel, example: Mapping[str, torch.Tensor], path: Path, output: str = LOGITS) -> Path:
    """Write ``model`` as one ONNX file whose inputs are ``example``'s tensors, batch and sequence axes dynamic, and
    whose one output is the model's ``output`` (a classifier's :data:`LOGITS`, an encoder's :data:`TOKEN_VECTORS`).

    ``example`` must have at least 2 rows of at least 2 tokens: the exporter specialises a dimension of size 1.
    """
    names = list(example)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        torch.onnx.export(
            _OneOutput(model, names, output).eval(),  # eval() reaches the wrapped model too
            tuple(example[name] for name in names),
            str(path),
            input_names=names,
            output_names=[output],
            dynamic_shapes=(tuple({0: batch, 1: sequence} for _ in names),),
            external_data=False,
            dynamo=True,
            verbose=False,
        )
    except Exception as error:
        raise DeploymentError(
            f"torch.onnx could not export this {model.config.model_type} model ({type(model).__name__}): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}. The PyTorch successor "
            "is kept as it is."
        ) from error
    return path


def fuse_for_ort(
    path: Path, example: Mapping[str, torch.Tensor], tolerance: float, output: str = LOGITS
) -> dict[str, int]:
    """onnxscript's ONNX Runtime fusions on the exported graph at ``path``, kept only when ONNX Runtime runs the fused
    graph and its ``output`` on ``example`` stays within ``tolerance`` of the unfused graph's; returns the fused
    operators (ONNX Runtime's own: ``Attention``, ``SkipLayerNormalization``, ``BiasGelu``, ...) and how many of each
    ({} when the unfused graph is kept).

    Attention fuses in BERT, RoBERTa, ELECTRA and DistilBERT; MPNet and DeBERTa-v2, whose attention adds a relative
    position bias, get the layer-norm and GELU fusions only (tests/deployment). On the demo's 3-layer MiniLM successor
    (2 threads, 128 tokens) the fused fp32 graph ran 1.10x faster at batch 1 and 1.15x at batch 32 with the same
    logits (within 4e-7). The int8 model is quantised from the fused graph where its attention can be made
    QAttention, else from the unfused graph (:func:`fused_and_quantized`)."""
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    with tempfile.TemporaryDirectory() as staging:
        fused_path = Path(staging) / "fused.onnx"
        try:
            fused, _ = optimize_for_ort(ir.load(path))
            operators = Counter(node.op_type for node in fused.graph.all_nodes() if node.domain == ORT_DOMAIN)
            ir.save(fused, fused_path)
            plain, candidate = inference_session(path, 1), inference_session(fused_path, 1)
            outputs = [session_logits(session, example, output) for session in (candidate, plain)]
            difference = float((outputs[0] - outputs[1]).abs().max())
        except Exception:  # any family the rewriter or ONNX Runtime cannot take: the unfused graph is kept
            return {}
        if not operators or not difference <= tolerance:
            return {}
        fused_path.replace(path)
    return dict(sorted(operators.items()))


def fused_and_quantized(
    fp32_path: Path,
    int8_path: Path | None,
    reduce_range: bool,
    example: Mapping[str, torch.Tensor],
    tolerance: float,
    output: str = LOGITS,
) -> tuple[dict[str, int], str | None]:
    """The exported graph at ``fp32_path`` fused for ONNX Runtime in place (:func:`fuse_for_ort`) and, where
    ``int8_path`` is given, quantised to it (:func:`quantize_int8`) from the fused graph or the unfused one, kept
    aside: the fusions, and how the int8 model was made (None without one). Each step runs once."""
    if int8_path is None:
        return fuse_for_ort(fp32_path, example, tolerance, output), None
    with tempfile.TemporaryDirectory() as folder:
        unfused = shutil.copyfile(fp32_path, Path(folder) / "unfused.onnx")
        fusions = fuse_for_ort(fp32_path, example, tolerance, output)
        log.info("Quantising it to int8: %s", int8_path)
        fused = fp32_path if fusions.get("Attention") else None
        return fusions, quantize_int8(unfused, int8_path, reduce_range, example, tolerance, output, fused)


def quantize_int8(
    fp32_path: Path,
    int8_path: Path,
    reduce_range: bool,
    example: Mapping[str, torch.Tensor],
    tolerance: float,
    output: str = LOGITS,
    fused: Path | None = None,
) -> str:
    """ONNX Runtime's dynamic int8 quantisation of the exported (unfused) graph at ``fp32_path``, after its recommended
    pre-processing; ``reduce_range``: 7-bit weights (:func:`int8_reduce_range` decides by the CPU). Where ``fused``
    (the same graph after :func:`fuse_for_ort`) holds attention that can be made QAttention
    (:func:`quantisable_attention`, checked on ``example`` within ``tolerance``), that graph so rewritten is quantised,
    its attention included; else the unfused graph (a fused ``Attention`` the quantiser leaves alone would keep its Q,
    K and V products in fp32). Returns how the model was made, in words (:func:`quantization_words`)."""
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    def quantized(source: Path, operators: list[str], staging: Path) -> None:
        prepared = staging / "prepared.onnx"
        # Symbolic shape inference is skipped: it does not take the exporter's graphs, and ONNX's own runs anyway.
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_dynamic(prepared, int8_path, op_types_to_quantize=operators, weight_type=QuantType.QInt8,
                         per_channel=True, reduce_range=reduce_range)  # fmt: skip

    with tempfile.TemporaryDirectory() as folder:
        staging = Path(folder)
        rewritten = fused and quantisable_attention(fused, staging / "attention.onnx", example, tolerance, output)
        if rewritten:
            try:
                quantized(rewritten, [*QUANTIZED_OPS, "Attention"], staging)
                return quantization_words(reduce_range, attention=True)
            except Exception:  # a graph the quantiser will not take so: the unfused one, as before
                log.warning("Quantising the attention as QAttention failed; the unfused graph is quantised.")
        quantized(fp32_path, list(QUANTIZED_OPS), staging)
    return quantization_words(reduce_range)


def quantisable_attention(
    path: Path, target: Path, example: Mapping[str, torch.Tensor], tolerance: float, output: str = LOGITS
) -> Path | None:
    """``path``'s graph with each fused ``Attention`` node in the form ONNX Runtime's quantiser makes a QAttention of,
    written to ``target``; None where the graph has no such node or the form changes its ``output`` on ``example``
    (its last row's second half masked, to test the mask) beyond ``tolerance``.

    The fusions give ``Attention`` the padding mask as an additive bias and the Q, K and V sizes as an attribute;
    QAttention takes neither, so ONNX Runtime's quantiser leaves such a node in fp32 and the int8 model quantised
    the attention's products one by one, with a transpose around each. Here the mask is passed as ``mask_index``
    (``attention_mask`` as int32, ONNX Runtime's raw 2-D mask), the sizes attribute dropped where the three are equal,
    and the packed weights folded into one initializer. On the demo's 3-layer MiniLM successor on a 2-core Zen 4
    with VNNI (2 threads), the int8 model so made ran 1.26x faster at 128 tokens (batch 1 and 32) and 1.08x (sorted
    batches of 32) to 1.16x (single rows) at the dev rows' own lengths, with the same dev accuracy (75.6 on 1,000
    rows, both; docs/results/deployment.md)."""
    import onnx
    import onnx_ir as ir
    import onnxscript.optimizer

    model = onnx.load(path)
    nodes = [node for node in model.graph.node if node.op_type == "Attention" and node.domain == ORT_DOMAIN]
    if not nodes or "attention_mask" not in {value.name for value in model.graph.input}:
        return None
    mask = "attention_mask_int32"
    for node in nodes:
        sizes = [list(attribute.ints) for attribute in node.attribute if attribute.name == "qkv_hidden_sizes"]
        if any(len(set(each)) != 1 for each in sizes) or any(node.input[3:5]):  # its own mask or past state
            return None
        kept = [attribute for attribute in node.attribute if attribute.name != "qkv_hidden_sizes"]
        del node.attribute[:]
        node.attribute.extend(kept)
        inputs = [*node.input[:3], mask]
        del node.input[:]
        node.input.extend(inputs)
    model.graph.node.insert(0, onnx.helper.make_node("Cast", ["attention_mask"], [mask], to=onnx.TensorProto.INT32))
    probe = {name: tensor.clone() for name, tensor in example.items()}
    probe["attention_mask"][-1, probe["attention_mask"].shape[1] // 2 :] = 0  # a padded row, whatever the example
    try:
        graph = ir.from_proto(model)
        onnxscript.optimizer.fold_constants(graph, input_size_limit=2**31, output_size_limit=2**31)
        onnxscript.optimizer.remove_unused_nodes(graph)
        ir.save(graph, target)
        plain, candidate = inference_session(path, 1), inference_session(target, 1)
        outputs = [session_logits(session, probe, output) for session in (candidate, plain)]
    except Exception:  # any graph the rewriter or ONNX Runtime will not take so: the unfused graph is quantised
        return None
    return target if float((outputs[0] - outputs[1]).abs().max()) <= tolerance else None


def inference_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session on ``threads`` threads, run sequentially, as one would serve it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy waiting between calls
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def session_logits(session: Any, batch: Mapping[str, torch.Tensor], output: str = LOGITS) -> torch.Tensor:
    """The session's logits (or its other ``output``) for a model batch (labels and any input the graph does not take
    are left out)."""
    feed = {node.name: np.ascontiguousarray(batch[node.name].numpy()) for node in session.get_inputs()}
    return torch.from_numpy(session.run([output], feed)[0])
