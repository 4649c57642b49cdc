#!/usr/bin/python3
"""The ops a `phase0 capture --ops` bundle holds, against a float64 NumPy forward
of the same model, written here from the maths (../shared/golden/README.md, "What
HF computes in bf16"), not from the C code.

  ops_reference.py MODEL_DIR BUNDLE [MODEL_DIR BUNDLE ...]

For every prompt, captured layer and op:
  - bf16 bundles: the op computed in float64 from the bundle's own inputs of it
    (attn_norm from input, attention from q_rope, k_rope and v_proj, ...) differs
    from the captured output by no more than the bf16 roundings HF makes in it
    allow, element by element (the bound of each op is written at it);
  - f32 bundles: every op against the float64 forward from the prompt's tokens,
    max |captured - float64| <= 1e-4 of max |float64|;
  - both: a layer's input is the embedding (layer 0) or the previous layer's
    output where both were captured, bit for bit.
Prints one JSON object: {"ok": bool, "checked": n, "failures": [...]} (at most 20).
"""
import json
import math
import os
import struct
import sys

import numpy as np

U = 2.0 ** -8    # bf16's unit roundoff: rounding to nearest moves a value by at most U of it
E32 = 2.0 ** -24  # fp32's


def bf16(x):
    """x rounded to the nearest bf16, ties to even, as float32 (finite values)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return r.view(np.float32)


def read_tensors(model_dir):
    """Every tensor of the folder's safetensors, as float64 of its bf16 values (an F32 file rounded to bf16)."""
    files = [f for f in os.listdir(model_dir) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        raw = open(os.path.join(model_dir, f), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            if t["dtype"] == "BF16":
                v = (np.frombuffer(raw[base + a:base + b], dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif t["dtype"] == "F32":
                v = bf16(np.frombuffer(raw[base + a:base + b], dtype=np.float32))
            else:
                sys.exit("%s: %s: dtype %s" % (f, name, t["dtype"]))
            out[name] = v.reshape(t["shape"]).astype(np.float64)
    return out


class Model:
    def __init__(self, model_dir):
        c = json.load(open(os.path.join(model_dir, "config.json")))
        self.H = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        self.eps = c["rms_norm_eps"]
        self.w = read_tensors(model_dir)
        self.inv_freq = np.load(os.path.join(model_dir, "golden", "inv_freq.npy"))  # HF's, fp32, scaling applied

    def layer(self, l, name):
        return self.w.get("model.layers.%d.%s" % (l, name))


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def rope_tables(m, T, rounded):
    """cos and sin [T][hd/2] as the runner and HF make them: fp32 angle, fp32 cos and sin, then bf16 in bf16."""
    a = np.arange(T, dtype=np.float32)[:, None] * m.inv_freq.astype(np.float32)[None, :]
    c, s = np.cos(a.astype(np.float64)).astype(np.float32), np.sin(a.astype(np.float64)).astype(np.float32)
    if rounded:
        c, s = bf16(c), bf16(s)
    return c.astype(np.float64), s.astype(np.float64)


def rope(x, heads, hd, c, s):
    """rotate-half RoPE of x [T][heads*hd]; also |x c| + |rot(x) s|, what the three roundings scale with."""
    h = hd // 2
    x = x.reshape(len(x), heads, hd)
    a, b = x[..., :h], x[..., h:]
    cc, ss = c[:, None, :], s[:, None, :]
    out = np.concatenate([a * cc - b * ss, b * cc + a * ss], axis=-1)
    mag = np.concatenate([np.abs(a * cc) + np.abs(b * ss), np.abs(b * cc) + np.abs(a * ss)], axis=-1)
    return out.reshape(len(x), -1), mag.reshape(len(x), -1)


def attention(m, q, k, v):
    """causal GQA attention in float64, and each output's bound: what bf16's roundings of the scores, the
    probabilities and probs . v, and fp32's sums, allow it to move (the comment below)."""
    T, hd, g = len(q), m.hd, m.nh // m.nkv
    scale = float(np.float32(1.0 / math.sqrt(hd)))
    out, bound = np.zeros((T, m.nh * hd)), np.zeros((T, m.nh * hd))
    mask = np.tril(np.ones((T, T), dtype=bool))
    for h in range(m.nh):
        qh, kh, vh = q[:, h * hd:(h + 1) * hd], k[:, (h // g) * hd:(h // g + 1) * hd], v[:, (h // g) * hd:(h // g + 1) * hd]
        s = qh @ kh.T * scale
        acc = np.abs(qh) @ np.abs(kh).T * scale * hd * E32   # fp32 accumulation of q . k
        delta = np.where(mask, (2 * U + U * U) * np.abs(s) + acc, 0).max(axis=1, keepdims=True)
        s = np.where(mask, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        o = p @ vh
        pv = p @ np.abs(vh)
        # scores rounded twice move each by at most delta, so each probability by a factor within e^(+-2 delta);
        # then p is rounded once (U), exp and the sum in fp32 (eta), p . v summed in fp32 and rounded once
        eta = (T + 4) * E32
        rho = np.exp(2 * delta) * (1 + U) * (1 + eta) - 1
        b = rho * pv + T * E32 * (1 + rho) * pv + U * (np.abs(o) + rho * pv)
        out[:, h * hd:(h + 1) * hd], bound[:, h * hd:(h + 1) * hd] = o, b
    return out, bound


def linear(x, w, b=None):
    """x @ w.T (+ b) in float64, and the bound of bf16(the fp32 sum): U of it, plus fp32 accumulation."""
    y = x @ w.T + (b if b is not None else 0)
    acc = (np.abs(x) @ np.abs(w).T + (np.abs(b) if b is not None else 0)) * (x.shape[1] + 1) * E32
    return y, U * np.abs(y) + acc


NAMES = ["input", "attn_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "q_rope", "k_rope", "attn", "o_proj",
         "attn_residual", "ffn_norm", "gate", "up", "swiglu", "down", "output"]


def op(m, l, got, T, name, tables):
    """Op `name` of layer l in float64 from the ops before it in `got`, and the bound of bf16's roundings in it."""
    L = lambda n: m.layer(l, n)
    two = 2 * U + U * U + 1e-6  # two roundings: bf(w * bf(normed)), bf(bf(silu(g)) * u)
    if name in ("attn_norm", "ffn_norm"):
        y = rms(got["input" if name == "attn_norm" else "attn_residual"],
                L("input_layernorm.weight" if name == "attn_norm" else "post_attention_layernorm.weight"), m.eps)
        return y, two * np.abs(y)
    if name in ("q_proj", "k_proj", "v_proj"):  # the bias inside the one rounding (Qwen2)
        return linear(got["attn_norm"], L("self_attn.%s.weight" % name), L("self_attn.%s.bias" % name))
    if name in ("q_norm", "k_norm"):  # per head, over head_dim (Qwen3)
        src, heads = ("q_proj", m.nh) if name == "q_norm" else ("k_proj", m.nkv)
        y = rms(got[src].reshape(T, heads, m.hd), L("self_attn.%s.weight" % name), m.eps).reshape(T, -1)
        return y, two * np.abs(y)
    if name in ("q_rope", "k_rope"):  # bf(bf(x c) + bf(rot(x) s)): three roundings
        src = name[0] + ("_norm" if L("self_attn.q_norm.weight") is not None else "_proj")
        y, mag = rope(got[src], m.nh if name == "q_rope" else m.nkv, m.hd, *tables)
        return y, 1.001 * (U * mag * (1 + U) + U * np.abs(y)) + 1e-30
    if name == "attn":
        return attention(m, got["q_rope"], got["k_rope"], got["v_proj"])
    if name == "o_proj":
        return linear(got["attn"], L("self_attn.o_proj.weight"))
    if name in ("gate", "up", "down"):
        return linear(got["swiglu" if name == "down" else "ffn_norm"], L("mlp.%s_proj.weight" % name))
    if name == "swiglu":
        g = got["gate"]
        y = g / (1 + np.exp(-g)) * got["up"]
        return y, (two + 4 * E32) * np.abs(y)
    if name in ("attn_residual", "output"):  # bf(x + y) of two bf16 values: one rounding
        y = got["input"] + got["o_proj"] if name == "attn_residual" else got["attn_residual"] + got["down"]
        return y, (U + E32) * np.abs(y)
    raise KeyError(name)


def has(m, l, name):
    return name not in ("q_norm", "k_norm") or m.layer(l, "self_attn.q_norm.weight") is not None


def chain(m, tokens, last):
    """The float64 forward from the tokens: every op of layers 0..last, in the order they are made."""
    T = len(tokens)
    a = np.arange(T, dtype=np.float64)[:, None] * m.inv_freq.astype(np.float64)[None, :]
    tables = (np.cos(a), np.sin(a))
    x, out = m.w["model.embed_tokens.weight"][tokens], {}
    for l in range(last + 1):
        got = {"input": x}
        for name in NAMES[1:]:
            if has(m, l, name):
                got[name] = op(m, l, got, T, name, tables)[0]
        out[l], x = got, got["output"]
    return out


def check(model_dir, bundle, failures, counts):
    m = Model(model_dir)
    man = json.load(open(os.path.join(bundle, "manifest.json")))
    rounded = man["precision"] == "bf16"
    layers, names = man["ops"]["layers"], [o["name"] for o in man["ops"]["list"]]
    label = os.path.basename(model_dir.rstrip("/")) + " " + man["precision"]
    for p in man["prompts"]:
        d = os.path.join(bundle, p["name"])
        tokens = np.load(os.path.join(d, "tokens.npy"))
        T = len(tokens)
        got = {l: {n: np.load(os.path.join(d, "ops", str(l), n + ".npy")).astype(np.float64) for n in names}
               for l in layers}
        ref = None if rounded else chain(m, tokens, max(layers))
        tables = rope_tables(m, T, True) if rounded else None
        for l in layers:
            prev = m.w["model.embed_tokens.weight"][tokens] if l == 0 else got.get(l - 1, {}).get("output")
            if prev is not None:
                counts[0] += 1
                if not np.array_equal(got[l]["input"], prev):
                    failures.append("%s %s layer %d: input is not %s" % (label, p["name"], l,
                                                                           "the embedding" if l == 0 else "layer %d's output" % (l - 1)))
            if rounded:  # each op from the bundle's own inputs of it, within HF's bf16 roundings
                for name in names[1:]:
                    want, bound = op(m, l, got[l], T, name, tables)
                    counts[0] += 1
                    err = np.abs(got[l][name] - want)
                    worst = float((err / np.maximum(bound, 1e-300)).max())
                    if not worst <= 1.0:
                        failures.append("%s %s layer %d %s: error %.3g times its bf16 bound (max |err| %.3g)" % (
                            label, p["name"], l, name, worst, float(err.max())))
            else:  # every op against the float64 forward from the tokens
                for name in names:
                    if name == "input" and l == 0:
                        continue
                    counts[0] += 1
                    want = ref[l][name]
                    rel = float(np.abs(got[l][name] - want).max() / max(np.abs(want).max(), 1e-30))
                    if not rel <= 1e-4:
                        failures.append("%s %s layer %d %s: max error %.3g of max |x| (float64 forward)" % (
                            label, p["name"], l, name, rel))


if __name__ == "__main__":
    failures, counts = [], [0]
    args = sys.argv[1:]
    for i in range(0, len(args), 2):
        check(args[i], args[i + 1], failures, counts)
    print(json.dumps({"ok": not failures and counts[0] > 0, "checked": counts[0], "failures": failures[:20]}))
