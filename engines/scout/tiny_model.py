"""Writes a tiny random-weight Qwen2 model (float32, fixed seed) for the
engine scouting runs: ``build/venv/vllm/bin/python tiny_model.py OUTDIR``.
Nothing is downloaded: config and weights are made here."""

import sys

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

torch.manual_seed(1234)
cfg = Qwen2Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  torch_dtype="float32", tie_word_embeddings=False)
Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(sys.argv[1])
print("saved", sys.argv[1])
