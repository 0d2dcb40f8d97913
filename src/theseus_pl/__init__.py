"""theseus_pl: compress fine-tuned Transformer encoders by progressive module replacing (BERT-of-Theseus)."""
