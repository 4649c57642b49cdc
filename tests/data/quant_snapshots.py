#!/usr/bin/python3
"""Writes tests/data/hub/: header-only snapshots of one real repo of each quantized
format gen-model reads, laid out as ../shared/hub's (config.json, the safetensors
header copy, .hub.json), from the shapes and dtypes their documentation gives
(README.md beside this script says where each fact comes from). No weights: each
header is what the format's rule makes of the model's dimensions, with offsets
that tile the data section in name order, as a writer of the format lays it out.

  quant_snapshots.py [OUT]      (default: the hub/ folder beside this script)

Run once; its output is checked in. The facts are data here, so a review reads them.
"""
import hashlib
import json
import os
import struct
import sys

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I8": 1, "F8_E4M3": 1}
PROJ = [("self_attn.q_proj", "q", "h"), ("self_attn.k_proj", "kv", "h"), ("self_attn.v_proj", "kv", "h"),
        ("self_attn.o_proj", "h", "q"), ("mlp.gate_proj", "f", "h"), ("mlp.up_proj", "f", "h"),
        ("mlp.down_proj", "h", "f")]


def cdiv(a, b):
    return -(-a // b)


def dims(cfg):
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    return {"h": cfg["hidden_size"], "q": heads * hd, "kv": kv * hd, "f": cfg["intermediate_size"]}


def awq_parts(out, inp, g):
    return {"qweight": ("I32", [inp, out // 8]), "qzeros": ("I32", [inp // g, out // 8]),
            "scales": ("F16", [inp // g, out])}


def gptq_parts(out, inp, g):
    return {"qweight": ("I32", [inp // 8, out]), "qzeros": ("I32", [cdiv(inp, g), out // 8]),
            "scales": ("F16", [cdiv(inp, g), out]), "g_idx": ("I32", [inp])}


def fp8_parts(out, inp, b):
    return {"weight": ("F8_E4M3", [out, inp]), "weight_scale_inv": ("BF16", [cdiv(out, b[0]), cdiv(inp, b[1])])}


def q4nx_parts(out, inp, _):
    return {"weight": ("I8", [cdiv(out, 32) * cdiv(inp, 256), 5120])}


def tensors(cfg, parts, arg, float_dtype, bias, qk_norm, lm_head_parts=False):
    d, t = dims(cfg), {}
    t["model.embed_tokens.weight"] = (float_dtype, [cfg["vocab_size"], d["h"]])
    t["model.norm.weight"] = (float_dtype, [d["h"]])
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        t[p + "input_layernorm.weight"] = (float_dtype, [d["h"]])
        t[p + "post_attention_layernorm.weight"] = (float_dtype, [d["h"]])
        for name, out, inp in PROJ:
            for suffix, v in parts(d[out], d[inp], arg).items():
                t[p + name + "." + suffix] = v
        if bias:
            for name, out in (("q_proj", "q"), ("k_proj", "kv"), ("v_proj", "kv")):
                t[p + "self_attn." + name + ".bias"] = (float_dtype, [d[out]])
        if qk_norm:
            hd = cfg["head_dim"]
            t[p + "self_attn.q_norm.weight"] = (float_dtype, [hd])
            t[p + "self_attn.k_norm.weight"] = (float_dtype, [hd])
    if lm_head_parts:
        for suffix, v in parts(cfg["vocab_size"], d["h"], arg).items():
            t["lm_head." + suffix] = v
    return t


def header(ts):
    head, off = {}, 0
    for name in sorted(ts):
        dtype, shape = ts[name]
        n = DTYPE_BYTES[dtype]
        for s in shape:
            n *= s
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text, off


QWEN2_1_5B_INSTRUCT = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "hidden_size": 1536, "initializer_range": 0.02, "intermediate_size": 8960,
    "max_position_embeddings": 32768, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 12,
    "num_hidden_layers": 28, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "float16", "transformers_version": "4.41.1",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}

QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936}

LLAMA_3_2_1B_INSTRUCT = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256}

REPOS = [
    ("Qwen/Qwen2-1.5B-Instruct-AWQ",
     dict(QWEN2_1_5B_INSTRUCT, quantization_config={"bits": 4, "group_size": 128, "modules_to_not_convert": None,
                                                    "quant_method": "awq", "version": "gemm", "zero_point": True}),
     "model.safetensors", lambda c: tensors(c, awq_parts, 128, "F16", True, False),
     "AutoAWQ GEMM layout: qweight I32 [in, out/8], qzeros I32 [in/128, out/8], scales F16 [in/128, out]; "
     "embeddings, norms and the q/k/v biases F16 (torch_dtype float16); tied, no lm_head"),
    ("Qwen/Qwen2-1.5B-Instruct-GPTQ-Int4",
     dict(QWEN2_1_5B_INSTRUCT, quantization_config={
         "bits": 4, "damp_percent": 0.01, "desc_act": False, "group_size": 128, "is_marlin_format": False,
         "model_file_base_name": "model", "model_name_or_path": None, "quant_method": "gptq", "static_groups": False,
         "sym": True, "true_sequential": True}),
     "model.safetensors", lambda c: tensors(c, gptq_parts, 128, "F16", True, False),
     "AutoGPTQ layout: qweight I32 [in/8, out], qzeros I32 [in/128, out/8], scales F16 [in/128, out], g_idx I32 [in]; "
     "embeddings, norms and the q/k/v biases F16; tied, no lm_head"),
    ("Qwen/Qwen3-0.6B-FP8",
     dict(QWEN3_0_6B, quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                           "weight_block_size": [128, 128]}),
     "model.safetensors", lambda c: tensors(c, fp8_parts, (128, 128), "BF16", False, True),
     "fine-grained FP8: weight F8_E4M3 [out, in], weight_scale_inv BF16 [ceil(out/128), ceil(in/128)]; embeddings, "
     "norms and q_norm/k_norm BF16; tied, no lm_head"),
    ("FastFlowLM/Llama-3.2-1B-NPU2", LLAMA_3_2_1B_INSTRUCT,
     "model.q4nx", lambda c: tensors(c, q4nx_parts, None, "BF16", False, False, lm_head_parts=True),
     "mlir-air's model.q4nx (FastFlowLM's I8 encoding): each projection's weight I8 [blocks, 5120], 32 x 256 blocks; "
     "embeddings and norms BF16; a Q4NX lm_head beside the tied embedding, which the model uses; config.json is "
     "Llama-3.2-1B-Instruct's Hugging Face configuration, which mlir-air's example reads the bundle with"),
]


def main(out):
    for repo, cfg, file, make, layout in REPOS:
        d = os.path.join(out, *repo.split("/"))
        os.makedirs(d, exist_ok=True)
        text = (json.dumps(cfg, indent=2, sort_keys=True) + "\n").encode()
        with open(os.path.join(d, "config.json"), "wb") as f:
            f.write(text)
        head, data = header(make(cfg))
        with open(os.path.join(d, file + ".head"), "wb") as f:
            f.write(head)
        meta = {
            "repo": repo,
            "commit": hashlib.sha1(repo.encode()).hexdigest(),
            "gated": False,
            "provenance": "reconstructed, not copied: config.json and the header from the shapes and dtypes the "
                          "format's documentation gives for this model (tests/data/README.md), the data offsets "
                          "tiling in name order; the commit is sha1(repo id), not the Hub's. " + layout,
            "files": {"config.json": {"size": len(text)},
                      file: {"size": len(head) + data, "lfs": True, "head": file + ".head"}},
        }
        with open(os.path.join(d, ".hub.json"), "w") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
        print(f"{repo}: {file}.head {len(head)} bytes, the file {len(head) + data} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub"))
