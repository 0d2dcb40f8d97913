"""A decoder successor as a GGUF file, the format llama.cpp and the tools built on it run.

Written with the ``gguf`` package's writer, its tensor-name map and its quantisers (llama.cpp's own Python library),
so nothing here re-implements the format. Llama-family models only, for now: their GGUF layout is the reference one
llama.cpp's converter writes, and the only one whose query and key rows need reordering (:func:`_rope_rows`).
The tokenizer travels with the weights: copied field by field from the predecessor's GGUF file where the run started
from one (exactly what llama.cpp read before), else built from the successor's ``tokenizer.json`` by gguf's own
vocabulary readers. The file is checked by reading it back with transformers (:func:`gguf_logit_check`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

from theseus_pl.core.decoders import perplexity_of
from theseus_pl.deployment.gguf_reading import read_gguf_model
from theseus_pl.deployment.gguf_types import GGUF_TYPES

log = logging.getLogger(__name__)

# The least top-1 agreement with the PyTorch successor a type may show on the check's tokens: fp copies keep
# the argmax; 8-bit blocks flip near-ties only; 4- and 5-bit ones lose more (llama.cpp's own perplexity tables).
AGREEMENT_FLOORS = {"f32": 0.999, "f16": 0.99, "bf16": 0.97, "q8_0": 0.95, "q5_1": 0.85, "q5_0": 0.85, "q4_1": 0.8,
                    "q4_0": 0.8}  # fmt: skip
ARCHITECTURES = {"llama": "LLAMA"}  # transformers' model_type -> gguf's MODEL_ARCH


class GGUFExportError(ValueError):
    """A GGUF export that cannot be made as asked (the family, the type, the tokenizer, the gguf extra)."""


def gguf_problems(model_type: str, types: list[str]) -> list[str]:
    """What stops a GGUF export of a ``model_type`` model to ``types``, each with its fix; empty when it can go."""
    problems = []
    try:
        import gguf  # noqa: F401  (the lm extra)
    except ImportError:
        problems.append('GGUF export needs the gguf package: pip install "theseus_pl[lm]".')
    if model_type not in ARCHITECTURES:
        problems.append(
            f"GGUF export knows the {', '.join(sorted(ARCHITECTURES))} family, not {model_type!r} "
            "(llama.cpp's convert_hf_to_gguf.py writes the others)."
        )
    unknown = [kind for kind in types if kind not in GGUF_TYPES]
    if unknown:
        problems.append(f"deploy.gguf: {', '.join(unknown)} is not a type the gguf writer quantises to; one of "
                        f"{', '.join(GGUF_TYPES)}.")  # fmt: skip
    return problems


def rope_problem(config: PretrainedConfig) -> str | None:
    """Why the model's rotary embedding cannot be written: the writer gives llama.cpp plain RoPE (its dimension and
    base), and a scaled one (Llama 3.1's ``llama3``, YaRN, ...) would run unscaled there, its logits off while
    transformers, reading the file back, scales it as its config says; None for plain RoPE."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    scaling = rope.get("rope_type") or rope.get("type") or "default"
    if scaling == "default":
        return None
    return (
        f"its RoPE is scaled ({scaling}), which this GGUF writer does not write (llama.cpp would run it unscaled): "
        "llama.cpp's convert_hf_to_gguf.py writes its frequency factors."
    )


def tokenizer_problem(model_dir: Path) -> str | None:
    """Why the tokenizer saved in ``model_dir`` cannot travel in a GGUF file (gguf's readers take byte-level BPE
    ones); None when it can."""
    import gguf

    try:
        gguf.BpeVocab(model_dir)
    except FileNotFoundError:
        return (
            f"the tokenizer of {model_dir} is not a byte-level BPE tokenizer.json (GPT-2, Llama 3, SmolLM), the kind "
            "written into GGUF here; start from a GGUF predecessor (model.gguf=FILE) to copy its tokenizer."
        )
    return None


def export_gguf(model_dir: Path, path: Path, kind: str, tokenizer_gguf: Path | None = None) -> Path:
    """Write the causal LM saved in ``model_dir`` (weights, config, tokenizer) to ``path`` as GGUF of type ``kind``;
    the tokenizer's fields copied from ``tokenizer_gguf`` where given. One-dimensional tensors (the norms) stay F32
    and a matrix whose rows the type's blocks do not divide is written F16, as llama.cpp's converter does."""
    import gguf

    config = AutoConfig.from_pretrained(model_dir)
    if problems := [*gguf_problems(config.model_type, [kind]), *filter(None, [rope_problem(config)])]:
        raise GGUFExportError(" ".join(problems))
    arch = getattr(gguf.MODEL_ARCH, ARCHITECTURES[config.model_type])
    qtype = getattr(gguf.GGMLQuantizationType, GGUF_TYPES[kind])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    file_type = "ALL_F32" if kind == "f32" else f"MOSTLY_{GGUF_TYPES[kind]}"
    _write_hyperparameters(writer, config, model_dir.name, getattr(gguf.LlamaFileType, file_type))
    if tokenizer_gguf is not None:
        _copy_tokenizer(writer, tokenizer_gguf)
    else:
        _write_tokenizer(writer, model_dir, config.vocab_size)
    names = gguf.get_tensor_name_map(arch, config.num_hidden_layers)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # llama.cpp reads the tied output matrix from token_embd
        data = tensor.detach().numpy()
        if name.endswith("self_attn.q_proj.weight"):
            data = _rope_rows(data, heads)
        elif name.endswith("self_attn.k_proj.weight"):
            data = _rope_rows(data, kv_heads)
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise GGUFExportError(f"{name}: gguf's tensor-name map of {config.model_type} has no name for it.")
        tensor_type = _tensor_type(data, qtype)
        writer.add_tensor(gguf_name, gguf.quants.quantize(data, tensor_type), raw_dtype=tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return path


def _tensor_type(data: np.ndarray, qtype: object) -> object:
    """``qtype`` for a matrix its blocks divide; F32 for vectors; F16 for a matrix a block type cannot cut."""
    import gguf

    if data.ndim == 1:
        return gguf.GGMLQuantizationType.F32
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    return qtype if data.shape[-1] % block == 0 else gguf.GGMLQuantizationType.F16


def _rope_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """The query or key projection's rows in llama.cpp's rotary layout: transformers rotates the two halves of each
    head's dimensions, llama.cpp interleaved pairs; transformers' GGUF reader undoes exactly this on load."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _write_hyperparameters(writer: object, config: PretrainedConfig, name: str, file_type: int) -> None:
    """The ``llama.*`` keys llama.cpp builds the model from."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    rope = getattr(config, "rope_parameters", None) or {}
    writer.add_name(name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    if head_dim != config.hidden_size // config.num_attention_heads:  # else llama.cpp derives it, and without these
        writer.add_key_length(head_dim)  # keys refused to load the file
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(rope.get("rope_theta", getattr(config, "rope_theta", 10_000.0))))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(file_type)


def _copy_tokenizer(writer: object, source: Path) -> None:
    """Every ``tokenizer.*`` field of the GGUF file ``source``, with its types, as llama.cpp read it there."""
    import gguf

    reader = gguf.GGUFReader(source)
    for field in reader.fields.values():
        if field.name.startswith("tokenizer."):
            value_type = field.types[0]
            sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)


def _write_tokenizer(writer: object, model_dir: Path, vocab_size: int) -> None:
    """The tokenizer from ``model_dir``'s ``tokenizer.json`` by gguf's readers: a byte-level BPE one (GPT-2, Llama 3,
    SmolLM) with its merges, special tokens and chat template. llama.cpp's pre-tokenizer name is only known from a
    GGUF file (its converter recognises tokenizers by a hash of their output), so it is written as ``default``."""
    import gguf

    if problem := tokenizer_problem(model_dir):
        raise GGUFExportError(problem)
    vocab = gguf.BpeVocab(model_dir)
    tokens, scores, types = [], [], []
    for text, score, token_type in vocab.all_tokens():
        tokens.append(text)
        scores.append(score)
        types.append(token_type)
    for index in range(len(tokens), vocab_size):  # rows of the embedding no token uses
        tokens.append(f"[PAD{index}]")
        scores.append(-1000.0)
        types.append(gguf.TokenType.UNUSED)
    writer.add_tokenizer_model(vocab.tokenizer_model)
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=vocab_size).add_to_gguf(writer, quiet=True)
    log.warning("%s: llama.cpp's pre-tokenizer written as 'default' (not read from a GGUF predecessor).", model_dir)


@dataclass(frozen=True)
class GGUFCheck:
    """The GGUF file read back by transformers against the PyTorch model on the same tokens."""

    max_logit_diff: float
    agreement: float  # top-1 agreement of the two models' next-token predictions
    perplexity: float  # the GGUF model's, on the check's tokens
    reference_perplexity: float  # the PyTorch model's, on the same tokens


@torch.no_grad()
def gguf_logit_check(reference: torch.Tensor, path: Path, windows: torch.Tensor) -> GGUFCheck:
    """Compare the GGUF file's logits on ``windows`` (token ids, batch x length) with ``reference``, the PyTorch
    model's logits there (computed once by the caller for every file it checks)."""
    logits = read_gguf_model(path)(windows).logits
    return GGUFCheck(
        max_logit_diff=float((logits - reference).abs().max()),
        agreement=float((logits.argmax(-1) == reference.argmax(-1)).float().mean()),
        perplexity=_perplexity(logits, windows),
        reference_perplexity=_perplexity(reference, windows),
    )


def _perplexity(logits: torch.Tensor, windows: torch.Tensor) -> float:
    """exp of the mean next-token cross-entropy over the windows (:func:`perplexity_of`: in float64, as the training's
    and llama.cpp's, not float32's, whose exp is ``inf`` from 88.7)."""
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
    return perplexity_of(float(loss))
