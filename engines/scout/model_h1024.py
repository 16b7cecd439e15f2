"""Writes a random-weight Qwen2 big enough for a cold prefill of about a
second on this CPU (hidden 1024, 8 layers, 16 heads, 8 KV heads, vocab 8192,
float32, 425 MB): ``build/venv/vllm/bin/python model_h1024.py OUTDIR``."""

import sys, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.manual_seed(1234)
cfg = Qwen2Config(vocab_size=8192, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                  num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=8192,
                  torch_dtype="float32", tie_word_embeddings=False)
Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(sys.argv[1])
