#!/usr/bin/env python3
"""Seed corpora for the fuzz/ harnesses, made from ../shared into a folder
given on the command line (one sub-folder per harness). Nothing here is
committed: the seeds are rebuilt from the shared data on every run, and the
small regression inputs in fuzz/regress/ are added on top."""
import glob
import json
import os
import struct
import sys

SEP = b"\n#GMFUZZ#\n"


def put(root, harness, name, data):
    d = os.path.join(root, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def header_bytes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return struct.pack("<Q", n) + f.read(n)


def model_dirs(shared):
    dirs = sorted(glob.glob(os.path.join(shared, "hub", "*", "*")))
    dirs += sorted(glob.glob(os.path.join(shared, "golden", "*")))
    # and the quantized repos' header-only snapshots kept with the tests
    dirs += sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hub",
                                          "*", "*")))
    return [d for d in dirs if os.path.isfile(os.path.join(d, "config.json"))]


def shard_header(d, name):
    for p in (os.path.join(d, name), os.path.join(d, name + ".head")):
        if os.path.isfile(p):
            return header_bytes(p)
    return None


def small_tokenizer(path, keep=400):
    """The tokenizer with its vocab cut to `keep` ids (plus the 256 byte
    tokens SentencePiece-style vocabularies start with) and only the merges
    among them: a seed of kilobytes with every real section."""
    t = json.load(open(path, encoding="utf-8"))
    m = t["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < keep}
    merges = []
    for mg in m["merges"]:
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(mg)
    m["vocab"], m["merges"] = vocab, merges
    t["added_tokens"] = t["added_tokens"][:6]
    return json.dumps(t, ensure_ascii=False).encode()


def main():
    shared, root = sys.argv[1], sys.argv[2]
    for d in model_dirs(shared):
        tag = os.path.relpath(d, shared)
        if tag.startswith(".."):  # tests/data/hub/<org>/<name>
            tag = "data_" + "_".join(d.split(os.sep)[-2:])
        tag = tag.replace("/", "_")
        config = open(os.path.join(d, "config.json"), "rb").read()
        put(root, "fuzz_config", tag, config)
        index_path = os.path.join(d, "model.safetensors.index.json")
        if os.path.isfile(index_path):
            index = open(index_path, "rb").read()
            put(root, "fuzz_st_index", tag, index)
            shards = sorted(set(json.loads(index)["weight_map"].values()))
        else:  # one file: model.safetensors, or a Q4NX bundle's model.q4nx
            index = b""
            shards = ["model.q4nx"] if shard_header(d, "model.safetensors") is None and shard_header(
                d, "model.q4nx") is not None else ["model.safetensors"]
        heads = [shard_header(d, s) for s in shards]
        for s, h in zip(shards, heads):
            if h is not None:
                put(root, "fuzz_st_header", tag + "_" + s, h)
        if all(h is not None for h in heads):
            put(root, "fuzz_generate", tag, SEP.join([config, index] + heads))
    for tok in sorted(glob.glob(os.path.join(shared, "tokenizers", "*", "tokenizer.json"))):
        name = os.path.basename(os.path.dirname(tok))
        put(root, "fuzz_tokenizer_json", name, small_tokenizer(tok))
        if name == "mistral7b_spm":  # SentencePiece as newer converters spell it: Metaspace, no normalizer
            t = json.loads(small_tokenizer(tok))
            t["normalizer"] = None
            for k in ("pre_tokenizer", "decoder"):
                t[k] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": k == "decoder"}
            put(root, "fuzz_tokenizer_json", name + "_metaspace", json.dumps(t, ensure_ascii=False).encode())
    texts = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(shared, "prompts", "*.txt")))]
    inputs = os.path.join(shared, "tokenizers", "inputs.json")
    if os.path.isfile(inputs):
        texts += [x["text"].encode() for x in json.load(open(inputs, encoding="utf-8"))]
    for i, text in enumerate(texts):
        text = text[:4096]
        for mode in (0, 1, 6, 7, 16, 17):
            put(root, "fuzz_tokenizer_codec", "t%03d_%d" % (i, mode), bytes([mode]) + text)
    put(root, "fuzz_tokenizer_codec", "decode", bytes([8]) + struct.pack("<8i", 0, 1, 2, 100, 151643, 151645, 31999, 5))
    for i, p in enumerate(sorted(glob.glob(os.path.join(shared, "golden", "**", "*.npy"), recursive=True))):
        if os.path.getsize(p) <= 16384:
            put(root, "fuzz_npy", "read%03d" % i, b"\x80" + open(p, "rb").read())
    for rank in range(10):
        put(root, "fuzz_npy", "rt%d" % rank, bytes([rank & 1, rank]) + bytes([2, 3, 1, 0, 4, 1, 1, 2, 1])[:rank] + bytes(range(64)))

    hub_responses(root, shared)


def hub_responses(root, shared):
    """What the Hub answers, as raw responses: config.json with its commit,
    a redirect to the CDN then the body, a ranged safetensors header, the
    error answers the client tells apart."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    sha = "a" * 64
    heads = sorted(glob.glob(os.path.join(shared, "hub", "*", "*", "*.head")))
    head = header_bytes(heads[0])[:2048] if heads else struct.pack("<Q", 2) + b"{}"

    def resp(status, reason, headers, body=b""):
        lines = ["HTTP/1.1 %d %s" % (status, reason)] + ["%s: %s" % kv for kv in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    seeds = {
        "config": (0, resp(200, "OK", [("X-Repo-Commit", commit), ("ETag", '"4b1c3e"'),
                                       ("Content-Length", "2")], b"{}")),
        "redirect": (4, resp(302, "Found", [("Location", "https://cdn-lfs.hf.co/repos/x/y?X-Amz=1"),
                                            ("X-Linked-Size", "1234"), ("X-Linked-Etag", '"%s"' % sha),
                                            ("X-Repo-Commit", commit)]) +
                     resp(200, "OK", [("Content-Length", "10")], b"0123456789")),
        "relative": (0, resp(307, "Temporary Redirect", [("Location", "/api/resolve-cache/models/x/y/main/a")]) +
                     resp(200, "OK", [], b"{}")),
        "range": (3, resp(206, "Partial Content", [("Content-Range", "bytes 0-%d/999999" % (len(head) - 1))], head)),
        "resume": (12, resp(206, "Partial Content", [("Content-Range", "bytes 10-19/20")], b"abcdefghij")),
        "restart": (12, resp(200, "OK", [], b"abcdefghijklmnopqrst")),
        "gated": (0, resp(401, "Unauthorized", [("X-Error-Code", "GatedRepo"),
                                                ("X-Error-Message", "Access to model x/y is restricted.")])),
        "entry": (0, resp(404, "Not Found", [("X-Error-Code", "EntryNotFound")])),
        "revision": (0, resp(404, "Not Found", [("X-Error-Code", "RevisionNotFound")])),
        "busy": (0, resp(429, "Too Many Requests", [("Retry-After", "3")])),
        "continue": (0, resp(100, "Continue", []) + resp(200, "OK", [("X-Repo-Commit", commit)], b"{}")),
    }
    for name, (mode, data) in seeds.items():
        for piece in (0, 7):
            put(root, "fuzz_hub_response", "%s_%d" % (name, piece), bytes([mode, piece]) + data)


if __name__ == "__main__":
    main()
