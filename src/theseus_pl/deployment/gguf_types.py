"""The GGUF types a decoder LM's successor is written in, by the names users give them: apart from the export, so
that the settings and the command's parser read them without importing torch."""

# The GGUF type names users give (lower case, as llama.cpp's tools print them) -> gguf's quantisation type name and
# llama.cpp's file type. Those gguf's numpy quantisers write; the k-quants need llama.cpp's own quantize tool.
GGUF_TYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q5_1": "Q5_1", "q5_0": "Q5_0",
              "q4_1": "Q4_1", "q4_0": "Q4_0"}  # fmt: skip
