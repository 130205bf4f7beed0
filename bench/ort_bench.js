#!/usr/bin/env node
// ort-bench: ONNX Runtime (onnxruntime-node, CPU) on one model, with the flags
// and output of kiln-bench, so compare_models.py can put the two side by side.
//
//   node bench/ort_bench.js MODEL.onnx [--batch B] [--threads T] [--iterations N]
//        [--warmup W] [--json]
//
// Session creation (graph optimisation included) is timed apart, as
// onnxruntime_perf_test does. Settings: graphOptimizationLevel 'all',
// executionMode 'sequential', intraOpNumThreads = T, interOpNumThreads = 1.
// --batch sets the leading dim through freeDimensionOverrides (the model's
// leading dim must be symbolic); other symbolic dims become 1, as in Kiln.
// Inputs: the same pseudorandom float32 values kiln-bench feeds (int64: zeros).
// Latency is the wall time of `await session.run()`, which includes the
// binding's cost (a few tens of microseconds).
'use strict';
const path = require('path');
const {performance} = require('perf_hooks');
let ort;
try {
  ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
} catch (e) {
  console.error('ort-bench: onnxruntime-node is missing; run bench/setup.sh');
  process.exit(1);
}

const USAGE = 'usage: node bench/ort_bench.js MODEL.onnx [--batch B] [--threads T] ' +
              '[--iterations N] [--warmup W] [--json]';

function parseArgs(argv) {
  const a = {model: null, batch: 0, threads: require('os').cpus().length, iterations: 100,
             warmup: 10, json: false};
  for (let i = 0; i < argv.length; ++i) {
    let word = argv[i];
    if (!word.startsWith('--')) {
      if (a.model !== null) throw new Error(USAGE);
      a.model = word;
      continue;
    }
    let value = null;
    const eq = word.indexOf('=');
    if (eq >= 0) {
      value = word.slice(eq + 1);
      word = word.slice(0, eq);
    }
    const name = word.slice(2);
    if (name === 'json') {
      a.json = true;
      continue;
    }
    if (!['batch', 'threads', 'iterations', 'warmup'].includes(name)) {
      throw new Error(`unknown flag --${name}\n${USAGE}`);
    }
    if (value === null) value = argv[++i];
    const n = Number(value);
    if (!Number.isInteger(n) || n < (name === 'warmup' ? 0 : 1)) {
      throw new Error(`--${name} takes a positive integer, got '${value}'`);
    }
    a[name] = n;
  }
  if (a.model === null) throw new Error(USAGE);
  return a;
}

// kiln-bench's FillPseudorandom: uniform in [-0.5, 0.5) from the same LCG.
function fillPseudorandom(array, seed) {
  let s = seed >>> 0;
  for (let i = 0; i < array.length; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    array[i] = (s >>> 8) / (1 << 24) - 0.5;
  }
}

function summarize(ms) {
  const v = [...ms].sort((x, y) => x - y);
  const pct = (q) => v[Math.min(v.length, Math.max(1, Math.ceil(q * v.length))) - 1];
  return {p50: pct(0.5), p90: pct(0.9), p95: pct(0.95), p99: pct(0.99),
          mean: v.reduce((x, y) => x + y, 0) / v.length, min: v[0], max: v[v.length - 1]};
}

async function createSession(a, overrides) {
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: a.threads, interOpNumThreads: 1, freeDimensionOverrides: overrides});
  return {session, ms: performance.now() - t0};
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let {session, ms: createMs} = await createSession(a, {});
  if (a.batch) {
    // The leading dims' names are known now: create again with the batch fixed.
    const overrides = {};
    for (const m of session.inputMetadata) {
      const lead = m.shape[0];
      if (typeof lead === 'string') {
        overrides[lead] = a.batch;
      } else if (lead !== a.batch) {
        throw new Error(`input '${m.name}' has a fixed leading dim ${lead}; cannot run batch ${a.batch}`);
      }
    }
    if (Object.keys(overrides).length > 0) {
      await session.release();
      ({session, ms: createMs} = await createSession(a, overrides));
    }
  }
  const feeds = {};
  const shapes = [];
  let seed = 12345;
  for (const m of session.inputMetadata) {
    const shape = m.shape.map((d, i) =>
        typeof d === 'number' && d > 0 ? d : (i === 0 && a.batch ? a.batch : 1));
    const count = shape.reduce((x, y) => x * y, 1);
    let tensor;
    if (m.type === 'float32') {
      const data = new Float32Array(count);
      fillPseudorandom(data, seed++);
      tensor = new ort.Tensor('float32', data, shape);
    } else if (m.type === 'int64') {
      tensor = new ort.Tensor('int64', new BigInt64Array(count), shape);
    } else {
      throw new Error(`input '${m.name}' has type ${m.type}; only float32 and int64 are fed`);
    }
    feeds[m.name] = tensor;
    shapes.push(`${m.type}[${shape.join(',')}]`);
  }
  // Throughput counts the first input's leading dim as the batch.
  const first = feeds[session.inputNames[0]];
  const batch = first && first.dims.length ? first.dims[0] : 1;

  const first0 = performance.now();
  await session.run(feeds);
  const firstMs = performance.now() - first0;
  for (let i = 1; i < a.warmup; ++i) await session.run(feeds);
  const ms = [];
  const start = performance.now();
  for (let i = 0; i < a.iterations; ++i) {
    const t0 = performance.now();
    await session.run(feeds);
    ms.push(performance.now() - t0);
  }
  const wallS = (performance.now() - start) / 1e3;
  const s = summarize(ms);
  const throughput = a.iterations * batch / wallS;
  const version = require(path.join(__dirname, 'node_modules', 'onnxruntime-node', 'package.json')).version;
  if (a.json) {
    console.log(JSON.stringify({
      tool: 'ort', runtime: `onnxruntime-node ${version}`, model: a.model, inputs: shapes.join(' '),
      batch, threads: a.threads, iterations: a.iterations, warmup: a.warmup, compile_ms: createMs,
      first_run_ms: firstMs, p50_ms: s.p50, p90_ms: s.p90, p95_ms: s.p95, p99_ms: s.p99,
      mean_ms: s.mean, min_ms: s.min, max_ms: s.max, throughput_per_s: throughput}));
    return;
  }
  const f = (x, d = 3) => x.toFixed(d);
  console.log(`ort-bench ${a.model}  inputs ${shapes.join(' ')}  threads ${a.threads}  (onnxruntime-node ${version})`);
  console.log(`  session creation: ${f(createMs, 1)} ms`);
  console.log(`  first run: ${f(firstMs)} ms`);
  console.log(`  ${a.iterations} inferences after ${a.warmup} warm-up:`);
  console.log(`    latency  p50 ${f(s.p50)} ms  p90 ${f(s.p90)} ms  p95 ${f(s.p95)} ms  p99 ${f(s.p99)} ms` +
              `  (mean ${f(s.mean)}, min ${f(s.min)}, max ${f(s.max)})`);
  console.log(`    throughput  ${f(throughput, 1)} inferences/s`);
}

main().catch((e) => {
  console.error(`ort-bench: ${e.message || e}`);
  process.exit(e.message && e.message.startsWith('usage') ? 2 : 1);
});
