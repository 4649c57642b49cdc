#!/usr/bin/python3
"""Tiny quantized checkpoints made from the bf16 goldens (../shared/golden) by
each format's own quantization rule, with the bf16 weights each format's rule
dequantizes them to (expected/, the bits as <i4), computed here with numpy and nothing of gen-model's C
(runtime/model/include/gm/quant.h states the rules).

  quant_models.py make GOLDEN_DIR OUT     OUT/<name>/: config.json, the weights
        (model.safetensors, or model.q4nx), and expected/<tensor>.npy: each
        quantized projection's dequantized weight, (out, in), as bf16 bits (<u2)
  quant_models.py break SRC DST MODE      DST: a copy of SRC broken one way
        missing-scales    layer 0's q_proj.scales left out
        wrong-group       config.json's group_size halved
        no-config         config.json's quantization_config left out
        off-by-one        layer 1's k_proj.qweight one row longer
        unknown-method    quant_method "bitsandbytes"
        config-over-bf16  SRC's quantization_config over the bf16 golden GOLDEN (DST's only argument left: GOLDEN)
        g-idx-some-layers a g_idx for layer 1's q_proj alone (a GPTQ model without desc_act, whose layer 0 has none)
        not-convert-quantized  modules_to_not_convert ["mlp"] over quantized MLP projections
        block-size-mismatch    FP8's weight_block_size [64, 64] over scales made for another
        block-size-null   FP8's weight_block_size null
        one-group         GPTQ's group_size -1, each qzeros and scales cut to its first row (a checkpoint of
                          one group of all the inputs, for the scaffolding: the values are not its own)

The models, each from the golden named after it:
  awq_llama3       llama3_tied, AWQ GEMM, group 32, BF16 scales (as mlir-air's AMD Llama-3.2 checkpoint)
  gptq_llama       llama_untied, GPTQ sym, group 32, no desc_act and no g_idx, checkpoint_format gptq
                   (zeros stored minus one), F16 scales, the LM head quantized too ("lm_head": true)
  gptq_mistral     mistral_untied, GPTQ asym, group 16, desc_act with its g_idx, checkpoint_format gptq_v2
  fp8_qwen3        qwen3_tied, FP8 e4m3, weight_block_size [32, 64], BF16 scales (as Qwen3's -FP8 repos)
  q4nx_llama3      llama3_tied, mlir-air's model.q4nx (I8 blocks, w = scale * q + min), with the bundle's
                   own quantized lm_head beside the tied embedding (which the model uses)
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

PROJ = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]

# ---------------------------------------------------------------------------
# safetensors and bf16


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    dt = {"BF16": "<u2", "F16": "<f2", "F32": "<f4", "I32": "<i4", "I8": "i1", "F8_E4M3": "u1", "U8": "u1"}
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt[t["dtype"]]).reshape(t["shape"]))
    return out


def write_st(path, tensors):
    """tensors: name -> (dtype name, array); written in name order, the header padded to 8 bytes."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dtype, a = tensors[name]
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even, every NaN the canonical 0x7FC0 (torch's, and gm/bf16.h's)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, np.uint16(0x7FC0), r)


def golden_weight(t):
    dtype, a = t
    return bf16_to_f32(a) if dtype == "BF16" else a.astype(np.float32)


# ---------------------------------------------------------------------------
# the formats: quantize (as their tools do), pack, and the reference dequantization

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i of a word holds output 8j + AWQ_ORDER[i]


def pack_cols(q, order):
    """(rows, cols) of 4-bit values into (rows, cols/8) int32, nibble i of word j = column 8j + order[i]."""
    r, c = q.shape
    w = np.zeros((r, c // 8), dtype=np.uint32)
    for i in range(8):
        w |= q[:, order[i]::8].astype(np.uint32) << (4 * i)
    return w.view(np.int32)


def unpack_cols(w, order):
    w = w.view(np.uint32)
    q = np.zeros((w.shape[0], w.shape[1] * 8), dtype=np.int32)
    for i in range(8):
        q[:, order[i]::8] = (w >> (4 * i)) & 15
    return q


def awq(W, g, bf16_scales):
    """W (out, in) f32 -> qweight, qzeros, scales (F16, or BF16), and the bf16 bits of (q - z) * s, (out, in)."""
    K = W.T.copy()  # (in, out)
    n_in, n_out = K.shape
    G = K.reshape(n_in // g, g, n_out)
    lo, hi = G.min(axis=1), G.max(axis=1)
    if bf16_scales:
        s = f32_to_bf16((hi - lo) / 15)
        s = np.where(s == 0, f32_to_bf16(np.float32(1e-3)), s)
        sf = bf16_to_f32(s)
    else:
        s = ((hi - lo) / 15).astype(np.float16)
        s = np.where(s == 0, np.float16(1e-3), s)
        sf = s.astype(np.float32)
    z = np.clip(np.round(-lo / sf), 0, 15).astype(np.int32)
    q = np.clip(np.round(G / sf[:, None, :]) + z[:, None, :], 0, 15).astype(np.int32).reshape(n_in, n_out)
    qweight, qzeros = pack_cols(q, AWQ_ORDER), pack_cols(z, AWQ_ORDER)
    # the reference, from the packed tensors alone
    qq, zz = unpack_cols(qweight, AWQ_ORDER), unpack_cols(qzeros, AWQ_ORDER)
    sz = np.repeat(bf16_to_f32(s) if bf16_scales else s.astype(np.float32), g, axis=0)
    deq = (qq.astype(np.float32) - np.repeat(zz, g, axis=0).astype(np.float32)) * sz
    return ({"qweight": ("I32", qweight), "qzeros": ("I32", qzeros), "scales": ("BF16" if bf16_scales else "F16", s)},
            f32_to_bf16(deq.T))


def gptq(W, g, sym, desc_act, v2, rng):
    """GPTQ's packing: qweight (in/8, out), qzeros (G, out/8), scales (G, out) F16, g_idx (in) when desc_act."""
    K = W.T.copy()
    n_in, n_out = K.shape
    n_groups = n_in // g
    if desc_act:  # groups in an activation order: each input's group from a permutation
        perm = rng.permutation(n_in)
        g_idx = np.empty(n_in, dtype=np.int32)
        g_idx[perm] = np.arange(n_in) // g
    else:
        g_idx = (np.arange(n_in) // g).astype(np.int32)
    s = np.zeros((n_groups, n_out), dtype=np.float16)
    z = np.zeros((n_groups, n_out), dtype=np.int32)
    q = np.zeros((n_in, n_out), dtype=np.int32)
    for gi in range(n_groups):
        rows = np.where(g_idx == gi)[0]
        blk = K[rows]
        lo, hi = blk.min(axis=0), blk.max(axis=0)
        if sym:
            sc = (2 * np.maximum(np.abs(lo), np.abs(hi)) / 15).astype(np.float16)
            zp = np.full(n_out, 8, dtype=np.int32)
        else:
            sc = ((hi - lo) / 15).astype(np.float16)
        sc = np.where(sc == 0, np.float16(1e-3), sc)
        if not sym:
            zp = np.clip(np.round(-lo / sc.astype(np.float32)), 1 if not v2 else 0, 15).astype(np.int32)
        s[gi], z[gi] = sc, zp
        q[rows] = np.clip(np.round(blk / sc.astype(np.float32)) + zp, 0, 15)
    stored = z if v2 else z - 1  # checkpoint_format gptq stores the zero point minus one
    qweight = np.zeros((n_in // 8, n_out), dtype=np.uint32)
    for i in range(8):
        qweight |= q[i::8].astype(np.uint32) << (4 * i)
    qweight = qweight.view(np.int32)
    qzeros = pack_cols(stored, list(range(8)))
    parts = {"qweight": ("I32", qweight), "qzeros": ("I32", qzeros), "scales": ("F16", s)}
    if desc_act:
        parts["g_idx"] = ("I32", g_idx)
    # the reference, from the packed tensors alone
    qq = np.zeros((n_in, n_out), dtype=np.int32)
    for i in range(8):
        qq[i::8] = (qweight.view(np.uint32) >> (4 * i)) & 15
    zz = unpack_cols(qzeros, list(range(8))) + (0 if v2 else 1)
    gk = g_idx if desc_act else np.arange(n_in) // g
    deq = (qq.astype(np.float32) - zz[gk].astype(np.float32)) * s.astype(np.float32)[gk]
    return parts, f32_to_bf16(deq.T)


def e4m3_table():
    """Every e4m3fn byte's value: bias 7, subnormals, no infinities, S.1111.111 NaN."""
    v = np.zeros(256, dtype=np.float32)
    for b in range(256):
        e, m = (b >> 3) & 15, b & 7
        x = np.float32(m / 8 * 2.0 ** -6) if e == 0 else np.float32((1 + m / 8) * 2.0 ** (e - 7))
        if e == 15 and m == 7:
            x = np.float32(np.nan)
        v[b] = -x if b & 0x80 else x
    return v


E4M3 = e4m3_table()


def to_e4m3(x):
    """Nearest e4m3 byte (ties to the even code), saturating at 448."""
    pos = E4M3[:0x7F]  # 0x00..0x7E: 0 .. 448, increasing
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(pos, a), 1, 0x7E)
    lo, hi = pos[i - 1], pos[i]
    pick = np.where((a - lo < hi - a) | ((a - lo == hi - a) & ((i - 1) % 2 == 0)), i - 1, i)
    return (pick | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def fp8(W, bo, bi):
    """W (out, in) -> weight F8_E4M3, weight_scale_inv BF16 [ceil(out/bo), ceil(in/bi)], and e4m3(w) * s."""
    n_out, n_in = W.shape
    SO, SI = -(-n_out // bo), -(-n_in // bi)
    sinv = np.zeros((SO, SI), dtype=np.uint16)
    w8 = np.zeros(W.shape, dtype=np.uint8)
    for i in range(SO):
        for j in range(SI):
            blk = W[i * bo:(i + 1) * bo, j * bi:(j + 1) * bi]
            sb = f32_to_bf16(np.float32(max(np.abs(blk).max(), 1e-12) / 448.0))
            sinv[i, j] = sb
            w8[i * bo:(i + 1) * bo, j * bi:(j + 1) * bi] = to_e4m3(blk / bf16_to_f32(sb))
    sf = bf16_to_f32(sinv)
    deq = E4M3[w8] * np.repeat(np.repeat(sf, bo, axis=0), bi, axis=1)[:n_out, :n_in]
    return {"weight": ("F8_E4M3", w8), "weight_scale_inv": ("BF16", sinv)}, f32_to_bf16(deq)


def q4nx(W):
    """W (out, in) -> model.q4nx's I8 blocks [ceil(out/32) * ceil(in/256), 5120], and scale * q + min."""
    n_out, n_in = W.shape
    RB, CB = -(-n_out // 32), -(-n_in // 256)
    P = np.zeros((RB * 32, CB * 256), dtype=np.float32)
    P[:n_out, :n_in] = W
    grp = P.reshape(RB * 32, CB * 8, 32)
    lo, hi = grp.min(axis=2), grp.max(axis=2)
    s = f32_to_bf16((hi - lo) / 15)
    s = np.where(s == 0, f32_to_bf16(np.float32(1e-3)), s)
    m = f32_to_bf16(lo)
    q = np.clip(np.round((grp - bf16_to_f32(m)[..., None]) / bf16_to_f32(s)[..., None]), 0, 15).astype(np.uint8)
    q = q.reshape(RB * 32, CB * 256)
    blocks = np.zeros((RB * CB, 5120), dtype=np.uint8)
    for rb in range(RB):
        for cb in range(CB):
            blk = blocks[rb * CB + cb]
            rows = slice(rb * 32, rb * 32 + 32)
            # scale[g][r] and min[g][r]: group g of 32 inputs, row r of the block
            blk[0:512] = s[rows, cb * 8:cb * 8 + 8].T.copy().view(np.uint8).reshape(-1)
            blk[512:1024] = m[rows, cb * 8:cb * 8 + 8].T.copy().view(np.uint8).reshape(-1)
            qb = q[rows, cb * 256:cb * 256 + 256]  # (32, 256)
            nib = np.zeros((2, 256, 8), dtype=np.uint8)
            for h in range(2):
                for b in range(8):
                    nib[h, :, b] = qb[16 * h + 2 * b] | (qb[16 * h + 2 * b + 1] << 4)
            blk[1024:] = nib.reshape(-1)
    # the reference, from the blocks alone
    deq = np.zeros((RB * 32, CB * 256), dtype=np.float32)
    for rb in range(RB):
        for cb in range(CB):
            blk = blocks[rb * CB + cb]
            sc = bf16_to_f32(blk[0:512].view(np.uint16).reshape(8, 32))
            mn = bf16_to_f32(blk[512:1024].view(np.uint16).reshape(8, 32))
            nib = blk[1024:].reshape(2, 256, 8)
            for r in range(32):
                byte = nib[r // 16, :, (r % 16) // 2]
                qv = (byte >> 4 if r % 2 else byte & 15).astype(np.float32)
                deq[rb * 32 + r, cb * 256:cb * 256 + 256] = np.repeat(sc[:, r], 32) * qv + np.repeat(mn[:, r], 32)
    return {"weight": ("I8", blocks.view(np.int8))}, f32_to_bf16(deq[:n_out, :n_in])


# ---------------------------------------------------------------------------


def make_one(golden, out, name, source, qconfig, quantize, file="model.safetensors", lm_head=False):
    rng = np.random.default_rng(24)
    src = os.path.join(golden, source)
    cfg = json.load(open(os.path.join(src, "config.json")))
    g = read_st(os.path.join(src, "model.safetensors"))
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    tensors, expected = {}, {}
    targets = {f"model.layers.{l}.{p}" for l in range(cfg["num_hidden_layers"]) for p in PROJ}
    if lm_head:
        targets.add("lm_head")
    for tname, t in g.items():
        base = tname[:-len(".weight")] if tname.endswith(".weight") else None
        if base in targets:
            parts, deq = quantize(golden_weight(t), rng)
            for suffix, part in parts.items():
                tensors[base + "." + suffix] = part
            expected[tname] = deq
        else:
            tensors[tname] = t
    if lm_head and "lm_head.weight" not in g:  # a tied model's bundle that ships a quantized LM head all the same
        parts, _ = quantize(golden_weight(g["model.embed_tokens.weight"]), rng)
        for suffix, part in parts.items():
            tensors["lm_head." + suffix] = part
    if qconfig is not None:
        cfg["quantization_config"] = qconfig
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    write_st(os.path.join(d, file), tensors)
    for tname, bits in expected.items():
        np.save(os.path.join(d, "expected", tname + ".npy"), bits.astype("<i4"))


def make(golden, out):
    make_one(golden, out, "awq_llama3", "llama3_tied",
             {"bits": 4, "group_size": 32, "modules_to_not_convert": None, "quant_method": "awq",
              "version": "gemm", "zero_point": True},
             lambda W, rng: awq(W, 32, True))
    make_one(golden, out, "gptq_llama", "llama_untied",
             {"bits": 4, "group_size": 32, "desc_act": False, "sym": True, "lm_head": True,
              "quant_method": "gptq", "checkpoint_format": "gptq", "damp_percent": 0.01, "true_sequential": True},
             lambda W, rng: gptq(W, 32, True, False, False, rng), lm_head=True)
    make_one(golden, out, "gptq_mistral", "mistral_untied",
             {"bits": 4, "group_size": 16, "desc_act": True, "sym": False, "quant_method": "gptq",
              "checkpoint_format": "gptq_v2"},
             lambda W, rng: gptq(W, 16, False, True, True, rng))
    make_one(golden, out, "fp8_qwen3", "qwen3_tied",
             {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [32, 64]},
             lambda W, rng: fp8(W, 32, 64))
    make_one(golden, out, "q4nx_llama3", "llama3_tied", None, lambda W, rng: q4nx(W), file="model.q4nx",
             lm_head=True)


def brk(src, dst, mode):
    shutil.rmtree(dst, ignore_errors=True)
    if mode == "config-over-bf16":  # src: a quantized model's folder; dst gets the bf16 golden named after argv[5]
        shutil.copytree(sys.argv[5], dst)
        q = json.load(open(os.path.join(src, "config.json")))["quantization_config"]
        cfg = json.load(open(os.path.join(dst, "config.json")))
        cfg["quantization_config"] = q
        json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2, sort_keys=True)
        return
    shutil.copytree(src, dst)
    cfg_path, st_path = os.path.join(dst, "config.json"), os.path.join(dst, "model.safetensors")
    cfg = json.load(open(cfg_path))
    t = read_st(st_path)
    tensors = {k: v for k, v in t.items()}
    if mode == "missing-scales":
        del tensors["model.layers.0.self_attn.q_proj.scales"]
    elif mode == "wrong-group":
        cfg["quantization_config"]["group_size"] //= 2
    elif mode == "no-config":
        del cfg["quantization_config"]
    elif mode == "off-by-one":
        dtype, a = tensors["model.layers.1.self_attn.k_proj.qweight"]
        tensors["model.layers.1.self_attn.k_proj.qweight"] = (dtype, np.vstack([a, a[:1]]))
    elif mode == "unknown-method":
        cfg["quantization_config"]["quant_method"] = "bitsandbytes"
    elif mode == "g-idx-out-of-range":  # a desc_act checkpoint whose g_idx names a group past the last
        dtype, a = tensors["model.layers.0.self_attn.q_proj.g_idx"]
        tensors["model.layers.0.self_attn.q_proj.g_idx"] = (dtype, a + 100)
    elif mode == "g-idx-some-layers":  # groups the generated loader would never read: refused, not ignored
        n_in = tensors["model.layers.1.self_attn.q_proj.qweight"][1].shape[0] * 8
        groups = tensors["model.layers.1.self_attn.q_proj.scales"][1].shape[0]
        tensors["model.layers.1.self_attn.q_proj.g_idx"] = ("I32", (np.arange(n_in) % groups).astype(np.int32))
    elif mode == "not-convert-quantized":
        cfg["quantization_config"]["modules_to_not_convert"] = ["mlp"]
    elif mode == "block-size-mismatch":
        cfg["quantization_config"]["weight_block_size"] = [64, 64]
    elif mode == "block-size-zero":
        cfg["quantization_config"]["weight_block_size"] = [0, 64]
    elif mode == "block-size-null":
        cfg["quantization_config"]["weight_block_size"] = None
    elif mode == "one-group":
        cfg["quantization_config"]["group_size"] = -1
        for name, (dtype, a) in list(tensors.items()):
            if name.endswith(".qzeros") or name.endswith(".scales"):
                tensors[name] = (dtype, a[:1].copy())
    elif mode == "one-layer-plain":  # layer 1's q_proj kept in bf16, named in modules_to_not_convert (transformers loads it)
        p = "model.layers.1.self_attn.q_proj."
        cols = tensors[p + "qweight"][1].shape[0]
        for part in ("qweight", "qzeros", "scales"):
            del tensors[p + part]
        tensors[p + "weight"] = ("BF16", np.zeros((cols, cols), dtype="<u2"))
        cfg["quantization_config"]["modules_to_not_convert"] = [p[:-1]]
    else:
        sys.exit("quant_models.py: unknown mode " + mode)
    json.dump(cfg, open(cfg_path, "w"), indent=2, sort_keys=True)
    write_st(st_path, tensors)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "break":
        brk(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
