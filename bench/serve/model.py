"""The serving benchmark's model: a random-weight Llama made here, with a
word-level tokenizer, so nothing is downloaded.

Shape (``SHAPES``): hidden 768, 12 query heads of 64, one KV head (GQA
12:1), MLP 3072, 4 layers, vocabulary 8192, bfloat16. Its KV cache is 1 KiB
per token (4 layers x K,V x 64 x 2 B) and a prefill costs about 0.067 GFLOP
per token (2 x 33 M non-embedding weights): 15.0 KiB of KV per prefill
GFLOP, 1.6x Llama-3-8B's (128 KiB per token over about 14 GFLOP, 9.2 KiB
per GFLOP), so publishing a block costs what it would in production
relative to the compute it saves (within the 2x the method allows). A
2,048-token prefill takes about 2 s on one core of the 2.6 GHz Xeon VM the
README's figures come from (about 70 GFLOP/s in bfloat16). ``kv_bytes_per_gflop`` computes the figure from the
config, and the report prints it.

The tokenizer maps token id i to the word ``t<i>`` (whitespace split), so
vLLM's benchmark client can sample prompts from its vocabulary and count
output tokens.

``python model.py OUTDIR [--shape NAME]`` writes config, weights and
tokenizer into OUTDIR (nothing when OUTDIR already holds the same shape).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

#: name -> Llama config fields. ``bench`` is the benchmark's model; ``tiny``
#: is the harness smoke test's (seconds to start, no figures from it).
SHAPES = {
    "bench": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=4, num_attention_heads=12,
                  num_key_value_heads=1, vocab_size=8192, torch_dtype="bfloat16"),
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=1, vocab_size=1024, torch_dtype="bfloat16"),
}
LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256, torch_dtype="bfloat16")
MAX_MODEL_LEN = 8192


def kv_bytes_per_token(c: dict) -> int:
    """KV cache bytes of one token: layers x (K and V) x KV heads x head dim x dtype size."""
    head = c["hidden_size"] // c["num_attention_heads"]
    size = 2 if c["torch_dtype"] in ("bfloat16", "float16") else 4
    return c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head * size


def prefill_gflop_per_token(c: dict) -> float:
    """Matrix FLOPs of one prefill token (2 x non-embedding weights; the
    attention's own FLOPs, which grow with the context, left out for both)."""
    h, m = c["hidden_size"], c["intermediate_size"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * m
    return 2 * c["num_hidden_layers"] * per_layer / 1e9


def kv_bytes_per_gflop(c: dict) -> float:
    return kv_bytes_per_token(c) / prefill_gflop_per_token(c)


def write(outdir: str, shape: str = "bench") -> str:
    """Write the model of ``shape`` into ``outdir`` (skipped when a stamp
    says it is there already); returns ``outdir``."""
    stamp = os.path.join(outdir, "orbitkv-shape.json")
    want = dict(SHAPES[shape], shape=shape)
    try:
        with open(stamp) as f:
            if json.load(f) == want:
                return outdir
    except (OSError, ValueError):
        pass
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    c = SHAPES[shape]
    torch.manual_seed(1234)
    cfg = LlamaConfig(max_position_embeddings=MAX_MODEL_LEN, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=1, **c)
    os.makedirs(outdir, exist_ok=True)
    LlamaForCausalLM(cfg).to(getattr(torch, c["torch_dtype"])).save_pretrained(outdir)
    vocab = {f"t{i}": i for i in range(c["vocab_size"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t2"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="t0", eos_token="t1", unk_token="t2",
                                   model_max_length=MAX_MODEL_LEN)
    fast.save_pretrained(outdir)
    with open(stamp, "w") as f:
        json.dump(want, f)
    return outdir


def main() -> None:
    p = argparse.ArgumentParser(description="Write the serving benchmark's random-weight Llama and its tokenizer.")
    p.add_argument("outdir", help="directory to write (created)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="bench", help="model shape (default bench)")
    a = p.parse_args()
    write(a.outdir, a.shape)
    c = SHAPES[a.shape]
    print(f"{a.outdir}: {a.shape}: {kv_bytes_per_token(c)} B KV/token, {prefill_gflop_per_token(c):.3f} GFLOP/token, "
          f"{kv_bytes_per_gflop(c) / 1024:.1f} KiB KV per prefill GFLOP (Llama-3-8B: "
          f"{kv_bytes_per_gflop(LLAMA3_8B) / 1024:.1f})", file=sys.stderr)


if __name__ == "__main__":
    main()
