// The reference side of bench_tokenizer: Hugging Face tokenizers (npm
// `tokenizers`, the Rust library's official Node binding) on the same files
// and text. Usage: node bench_tokenizers_ref.js TOKENIZERS_DIR TEXT_FILE NAME...
// Prints one line per tokenizer:
//   ref NAME load_ms=.. encode_mbs=.. batch_mbs=.. ids=.. rss_mb=..
// encode_mbs: one encode() of the whole text (the library runs it on one thread);
// batch_mbs: encodeBatch() of ~64 KB line-aligned chunks, on RAYON_NUM_THREADS threads.
'use strict';
const path = require('path');
const fs = require('fs');
const { Tokenizer } = require(path.join(__dirname, 'ref', 'node_modules', 'tokenizers'));

function chunks(text, size) {
  const out = [];
  let pos = 0;
  while (pos < text.length) {
    let cut = Math.min(text.length, pos + size);
    const nl = text.indexOf('\n', cut);
    cut = nl < 0 ? text.length : nl + 1;
    out.push(text.slice(pos, cut));
    pos = cut;
  }
  return out;
}

async function main() {
  const [dir, textFile, ...names] = process.argv.slice(2);
  const text = fs.readFileSync(textFile, 'utf8');
  const mb = Buffer.byteLength(text, 'utf8') / 1e6;
  const parts = chunks(text, 65536);
  for (const name of names) {
    const file = path.join(dir, name, 'tokenizer.json');
    const rss0 = process.memoryUsage().rss;
    let best = Infinity, tok = null;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      tok = Tokenizer.fromFile(file);
      best = Math.min(best, performance.now() - t0);
    }
    const rss = (process.memoryUsage().rss - rss0) / 1e6;
    let enc = Infinity, ids = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const e = await tok.encode(text, null, { addSpecialTokens: true });
      enc = Math.min(enc, performance.now() - t0);
      ids = e.getIds().length;
    }
    let batch = Infinity;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      await tok.encodeBatch(parts, { addSpecialTokens: true });
      batch = Math.min(batch, performance.now() - t0);
    }
    console.log(`ref ${name} load_ms=${best.toFixed(1)} encode_mbs=${(mb / (enc / 1000)).toFixed(2)} ` +
                `batch_mbs=${(mb / (batch / 1000)).toFixed(2)} ids=${ids} rss_mb=${rss.toFixed(0)}`);
  }
}

main().catch((e) => { console.error(`bench_tokenizers_ref: ${e.message}`); process.exit(1); });
