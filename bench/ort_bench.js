// ONNX Runtime (node, CPU) latency for one model, as JSON on stdout.
//   node bench/ort_bench.js MODEL.onnx --shape 1x3x224x224 --threads T
//        [--iterations N] [--warmup W]
// Session creation is timed apart from the runs (onnxruntime_perf_test does
// the same). Best settings for a latency run: all graph optimisations,
// sequential execution, intra-op threads = T, no inter-op threads.
'use strict';
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const args = {model: argv[0], threads: 1, iterations: 100, warmup: 10, shape: null};
  for (let i = 1; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  args.shape = args.shape.split('x').map(Number);
  for (const k of ['threads', 'iterations', 'warmup']) args[k] = Number(args[k]);
  return args;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p / 100 * sorted.length))];
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const count = a.shape.reduce((x, y) => x * y, 1);
  const data = new Float32Array(count);
  for (let i = 0; i < count; ++i) data[i] = Math.random() * 2 - 1;
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, a.shape)};
  for (let i = 0; i < a.warmup; ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.iterations; ++i) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  ms.sort((x, y) => x - y);
  console.log(JSON.stringify({
    runtime: 'onnxruntime ' + require('onnxruntime-node/package.json').version,
    compile_ms: createMs, p50_ms: percentile(ms, 50), p90_ms: percentile(ms, 90),
    p95_ms: percentile(ms, 95), p99_ms: percentile(ms, 99)}));
}

main().catch((e) => { console.error(e); process.exit(1); });
