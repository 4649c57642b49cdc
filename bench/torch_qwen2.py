#!/usr/bin/python3
"""PyTorch's side of bench_runner: a bf16 forward pass of a Qwen2 decoder.

The same shapes as the model bench_runner measures (read from its config.json),
random bf16 weights, and the operations Hugging Face's Qwen2 runs in eager mode,
in the same dtypes: embedding; per layer RMSNorm (variance in f32, cast back),
q/k/v projections with bias, RoPE (rotate-half), grouped-query attention
(k and v repeated), eager attention (q @ k^T * scale in bf16, causal mask,
softmax in f32 cast to bf16, @ v), o_proj, residual, RMSNorm, SwiGLU MLP,
residual; the final norm and the LM head at the last position only.

Only the benchmark uses this; nothing in the build or the tests does.

  torch_qwen2.py --tokens T --threads N [--reps R] [--decode S]
      one warm-up prefill of T tokens, then R timed ones (a line each, in
      seconds); with --decode, one warm-up step then S timed decode steps
      with the KV cache after the last prefill (a line each).
  torch_qwen2.py --serve
      prints "ready <torch version>" once the weights are made, then reads
      commands from stdin, answering each timed run with a line of seconds:
        threads N        torch.set_num_threads(N); answers "ok"
        prefill T R      R prefills of T tokens (the caller discards a warm-up)
        decode P R       R decode steps continuing the cache of the last
                         P-token prefill (one is run first, untimed, if the
                         last prefill was not of P tokens)
        quit
If torch cannot be imported it prints one line "error: ..." and exits 3.
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 (the reason is the message)
    print("error: cannot import torch: %s" % e, flush=True)
    sys.exit(3)

BF16 = torch.bfloat16
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(HERE, "..", "models", "qwen2_1_5b", "snapshot", "config.json")


class Qwen2:
    """Random bf16 weights of a Qwen2 config, in nn.Linear's (out, in) layout."""

    def __init__(self, cfg, seed=1):
        self.H = cfg["hidden_size"]
        self.F = cfg["intermediate_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg["num_key_value_heads"]
        self.hd = cfg.get("head_dim", self.H // self.nh)
        self.L = cfg["num_hidden_layers"]
        self.V = cfg["vocab_size"]
        self.eps = cfg["rms_norm_eps"]
        self.theta = cfg.get("rope_theta", 10000.0)
        g = torch.Generator().manual_seed(seed)
        # One pool of uniform values in [-1, 1) for each scale, each tensor a slice
        # of it from a random offset: random enough for timing, and quick to make.
        base = torch.rand(1 << 24, generator=g) * 2 - 1
        pools = {}

        def rand(shape, scale, offset=0.0):
            key = (scale, offset)
            if key not in pools:
                pools[key] = (base * scale + offset).to(BF16)
            pool = pools[key]
            n = math.prod(shape)
            start = int(torch.randint(0, pool.numel(), (1,), generator=g))
            size = pool.numel()
            if start + n <= size:
                return pool[start:start + n].reshape(shape).clone()
            if n <= size:
                return torch.cat((pool[start:], pool[:start + n - size])).reshape(shape)
            return pool.repeat((start + n + size - 1) // size)[start:start + n].reshape(shape).clone()

        def linear(n_out, n_in):
            return rand((n_out, n_in), 1.7320508 / math.sqrt(n_in))

        H, Fd, q_w, kv_w = self.H, self.F, self.nh * self.hd, self.nkv * self.hd
        self.embed = rand((self.V, H), 1.7320508 / math.sqrt(H))  # tied: also the LM head
        self.layers = []
        for _ in range(self.L):
            self.layers.append({
                "in_norm": rand((H,), 0.1, 1.0), "post_norm": rand((H,), 0.1, 1.0),
                "q": linear(q_w, H), "bq": rand((q_w,), 0.2),
                "k": linear(kv_w, H), "bk": rand((kv_w,), 0.2),
                "v": linear(kv_w, H), "bv": rand((kv_w,), 0.2),
                "o": linear(H, q_w),
                "gate": linear(Fd, H), "up": linear(Fd, H), "down": linear(H, Fd),
            })
        self.norm = rand((H,), 0.1, 1.0)
        # RoPE tables as HF makes them: f32 angles, cos and sin cast to the activations' dtype
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        self.inv_freq = inv_freq
        self._cos = self._sin = None
        self._rope_len = 0
        self.cache = None      # per layer [k, v], (1, nkv, S, hd), after RoPE, before the repeat
        self.prompt_len = 0    # the prompt the cache continues
        self.last = 0          # the last position's greedy token

    def rope(self, n):
        if n > self._rope_len:
            n2 = max(n, 2 * self._rope_len, 4096)
            t = torch.arange(n2, dtype=torch.int64).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self._cos, self._sin = emb.cos().to(BF16), emb.sin().to(BF16)
            self._rope_len = n2
        return self._cos, self._sin

    def rms_norm(self, x, w):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return w * x.to(dtype)

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, ids, past):
        """ids: (1, T) int64 at positions past .. past+T; uses and extends self.cache. Returns the greedy token."""
        T = ids.shape[1]
        S = past + T
        nh, nkv, hd = self.nh, self.nkv, self.hd
        rep = nh // nkv
        cos_t, sin_t = self.rope(S)
        pos = torch.arange(past, S)
        cos = cos_t[pos].unsqueeze(0).unsqueeze(1)  # (1, 1, T, hd)
        sin = sin_t[pos].unsqueeze(0).unsqueeze(1)
        # the causal mask, as eager attention adds it: 0 where a query sees a key, the dtype's least value elsewhere
        mask = torch.full((T, S), torch.finfo(BF16).min, dtype=BF16)
        mask = torch.triu(mask, diagonal=past + 1)[None, None]
        scale = 1.0 / math.sqrt(hd)
        x = F.embedding(ids, self.embed)
        for i, w in enumerate(self.layers):
            h = self.rms_norm(x, w["in_norm"])
            q = F.linear(h, w["q"], w["bq"]).view(1, T, nh, hd).transpose(1, 2)
            k = F.linear(h, w["k"], w["bk"]).view(1, T, nkv, hd).transpose(1, 2)
            v = F.linear(h, w["v"], w["bv"]).view(1, T, nkv, hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if past:
                k = torch.cat((self.cache[i][0], k), dim=2)
                v = torch.cat((self.cache[i][1], v), dim=2)
                self.cache[i] = [k, v]
            else:
                self.cache[i] = [k, v]
            # grouped-query attention: each k/v head serves rep query heads
            kr = k[:, :, None].expand(1, nkv, rep, S, hd).reshape(1, nh, S, hd)
            vr = v[:, :, None].expand(1, nkv, rep, S, hd).reshape(1, nh, S, hd)
            a = torch.matmul(q, kr.transpose(2, 3)) * scale
            a = a + mask
            a = torch.softmax(a, dim=-1, dtype=torch.float32).to(BF16)
            o = torch.matmul(a, vr).transpose(1, 2).reshape(1, T, nh * hd)
            x = x + F.linear(o, w["o"])
            h = self.rms_norm(x, w["post_norm"])
            x = x + F.linear(F.silu(F.linear(h, w["gate"])) * F.linear(h, w["up"]), w["down"])
        h = self.rms_norm(x[:, -1:, :], self.norm)
        logits = F.linear(h, self.embed).float()
        return int(torch.argmax(logits[0, -1]))

    def prefill(self, ids):
        self.cache = [None] * self.L
        t0 = time.perf_counter()
        top = self.forward(ids, 0)
        dt = time.perf_counter() - t0
        self.prompt_len, self.last = ids.shape[1], top
        return dt

    def decode(self):
        past = self.cache[0][0].shape[2]
        ids = torch.tensor([[self.last]], dtype=torch.int64)
        t0 = time.perf_counter()
        self.last = self.forward(ids, past)
        return time.perf_counter() - t0


def prompt(model, n, seed=7):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.V, (1, n), generator=g, dtype=torch.int64)


def serve(model):
    print("ready %s" % torch.__version__, flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "threads":
            torch.set_num_threads(int(cmd[1]))
            print("ok", flush=True)
        elif cmd[0] == "prefill":
            T, R = int(cmd[1]), int(cmd[2])
            ids = prompt(model, T)
            for _ in range(R):
                print("%.6f" % model.prefill(ids), flush=True)
        elif cmd[0] == "decode":
            P, R = int(cmd[1]), int(cmd[2])
            if model.prompt_len != P or model.cache is None:
                model.prefill(prompt(model, P))
            for _ in range(R):
                print("%.6f" % model.decode(), flush=True)
        else:
            print("error: unknown command %r" % line.strip(), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--decode", type=int, default=0)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    torch.set_num_threads(a.threads)
    with torch.inference_mode():
        model = Qwen2(cfg)
        if a.serve:
            serve(model)
            return
        ids = prompt(model, a.tokens)
        model.prefill(ids)  # warm-up
        for _ in range(a.reps):
            print("%.6f" % model.prefill(ids), flush=True)
        if a.decode:
            model.decode()  # warm-up
            for _ in range(a.decode):
                print("%.6f" % model.decode(), flush=True)


if __name__ == "__main__":
    main()
