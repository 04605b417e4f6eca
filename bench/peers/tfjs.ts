/**
 * TensorFlow.js peer: `cpu` backend (pure JS, from `@tensorflow/tfjs`) and
 * `webgpu` backend (`@tensorflow/tfjs-backend-webgpu`).
 *
 * Pinned packages (both from npm, imported lazily so that a package that does
 * not load in Deno becomes a `NaN` row instead of a crash):
 * - `npm:@tensorflow/tfjs@4.22.0`
 * - `npm:@tensorflow/tfjs-backend-webgpu@4.22.0`
 *
 * @module
 */

import {
  CASE_TIMEOUT_MS,
  type CaseOutcome,
  checkMatmul,
  CONV_MEASURE,
  CONV_SPEC,
  type ConvSpec,
  convStepFlops,
  convSuite,
  DEFAULT_SIZES,
  DEFAULT_STEPS,
  errorMessage,
  failedRows,
  MATMUL_MEASURE,
  matmulGflops,
  matmulInputs,
  matmulSuite,
  measure,
  median,
  MLP_MEASURE,
  MLP_SPEC,
  MLP_SUITE,
  mlpData,
  type PeerOptions,
  type PeerResult,
  quietly,
  runCase,
  timingNote,
  withTimeout,
} from "./common.ts";

/** Version of `@tensorflow/tfjs` and `@tensorflow/tfjs-backend-webgpu` used. */
export const TFJS_VERSION = "4.22.0";

/** Peer name used in result rows. */
export const TFJS_PEER = "tfjs";

/** Backends benchmarked for TensorFlow.js. */
export const TFJS_BACKENDS: readonly string[] = ["cpu", "webgpu"];

type Tf = typeof import("npm:@tensorflow/tfjs@4.22.0");

async function loadTf(): Promise<Tf> {
  // deno-lint-ignore no-import-prefix -- pinned peer, no root import map
  const tf = await import("npm:@tensorflow/tfjs@4.22.0");
  // Production mode: skips debug checks and the "use tfjs-node" banner that
  // tfjs prints because Deno looks like Node.js to it.
  tf.enableProdMode();
  return tf;
}

async function initBackend(tf: Tf, backend: string): Promise<string> {
  if (backend === "webgpu") {
    if (!("gpu" in navigator) || !navigator.gpu) {
      throw new Error("navigator.gpu is not available");
    }
    // Side-effect import: registers the "webgpu" backend with tfjs-core.
    // deno-lint-ignore no-import-prefix -- pinned peer, no root import map
    await import("npm:@tensorflow/tfjs-backend-webgpu@4.22.0");
  }
  const ok = await tf.setBackend(backend);
  await tf.ready();
  if (!ok || tf.getBackend() !== backend) {
    throw new Error(`tf.setBackend("${backend}") failed`);
  }
  return backend;
}

async function matmulCase(tf: Tf, n: number): Promise<CaseOutcome> {
  const { a, b } = matmulInputs(n);
  const ta = tf.tensor2d(a, [n, n], "float32");
  const tb = tf.tensor2d(b, [n, n], "float32");
  try {
    let out: ArrayLike<number> = [];
    const times = await measure(async () => {
      const c = tf.matMul(ta, tb);
      out = await c.data(); // read back: forces the GPU work to finish
      c.dispose();
    }, MATMUL_MEASURE);
    checkMatmul(a, b, n, out);
    return { value: matmulGflops(n, median(times)), note: timingNote(times) };
  } finally {
    ta.dispose();
    tb.dispose();
  }
}

/**
 * The conv case in tfjs's layout (NHWC input, [k, k, cin, cout] filter):
 * `tf.grads` of sum(conv2d(x, w) · g) gives the forward and both gradients,
 * which are read back.
 */
async function convCase(tf: Tf, spec: ConvSpec): Promise<CaseOutcome> {
  // tfjs's cpu convolution gradients are slow enough that one full step can
  // outlast the case's time box (and, being synchronous, block the timer):
  // time one image first and skip the case when the batch would not fit.
  const one = await convSteps(tf, { ...spec, n: 1 }, { ...CONV_MEASURE, minIters: 1, maxIters: 1 });
  const estimateMs = median(one) * spec.n;
  if (estimateMs > CASE_TIMEOUT_MS / 2) {
    return {
      value: NaN,
      note: `skipped: one step would take about ${(estimateMs / 1000).toFixed(0)} s (${
        (convStepFlops({ ...spec, n: 1 }) / (median(one) * 1e6)).toFixed(3)
      } GFLOP/s on one image)`,
    };
  }
  // A slow peer gets one timed step without warm-up (the image above warmed it).
  const slow = estimateMs > CASE_TIMEOUT_MS / 8;
  const times = await convSteps(
    tf,
    spec,
    slow ? { ...CONV_MEASURE, warmup: 0, minIters: 1, maxIters: 1 } : CONV_MEASURE,
  );
  return { value: convStepFlops(spec) / (median(times) * 1e6), note: timingNote(times) };
}

/** Times forward + both gradients of the conv case; returns ms per step. */
async function convSteps(tf: Tf, spec: ConvSpec, options: typeof CONV_MEASURE): Promise<number[]> {
  const { n, cin, cout, size, k } = spec;
  const x = tf.randomNormal([n, size, size, cin], 0, 1, "float32", 1);
  const w = tf.randomNormal([k, k, cin, cout], 0, 0.05, "float32", 2);
  const g = tf.randomNormal([n, size, size, cout], 0, 1, "float32", 3);
  type X = Parameters<Tf["conv2d"]>[0];
  type W = Parameters<Tf["conv2d"]>[1];
  const grads = tf.grads((a, b) => tf.sum(tf.mul(tf.conv2d(a as X, b as W, 1, "same"), g)));
  try {
    return await measure(async () => {
      const [dx, dw] = grads([x, w]);
      await dx.data();
      await dw.data();
      dx.dispose();
      dw.dispose();
    }, options);
  } finally {
    x.dispose();
    w.dispose();
    g.dispose();
  }
}

async function mlpCase(tf: Tf, steps: number): Promise<CaseOutcome> {
  const data = mlpData();
  const { batch, dims, lr } = MLP_SPEC;
  const params = data.layers.map((l) => ({
    w: tf.variable(tf.tensor2d(l.w, [l.fanIn, l.fanOut], "float32")),
    b: tf.variable(tf.tensor1d(l.b, "float32")),
  }));
  const vars = params.flatMap((p) => [p.w, p.b]);
  const x = tf.tensor2d(data.x, [batch, dims[0]], "float32");
  const y = tf.tensor2d(data.y, [batch, dims[dims.length - 1]], "float32");
  const optimizer = tf.train.sgd(lr);
  const lossFn = () => {
    let h = x;
    params.forEach((p, i) => {
      h = tf.add(tf.matMul(h, p.w), p.b);
      if (i + 1 < params.length) h = tf.relu(h);
    });
    return tf.losses.softmaxCrossEntropy(y, h) as ReturnType<Tf["scalar"]>;
  };
  const losses: number[] = [];
  try {
    const times = await measure(async () => {
      // forward + backward + SGD update of every variable, loss read back
      const cost = optimizer.minimize(lossFn, true, vars);
      if (!cost) throw new Error("minimize returned no cost");
      losses.push((await cost.data())[0]);
      cost.dispose();
    }, { ...MLP_MEASURE, maxIters: steps });
    if (!losses.every(Number.isFinite)) throw new Error("non-finite loss");
    return {
      value: median(times),
      note: `${timingNote(times)}; loss ${losses[0].toFixed(4)} -> ${
        losses[losses.length - 1].toFixed(4)
      }`,
    };
  } finally {
    quietly(() => optimizer.dispose());
    for (const v of vars) quietly(() => v.dispose());
    quietly(() => x.dispose());
    quietly(() => y.dispose());
  }
}

/**
 * Runs the requested suites on every TensorFlow.js backend, in order.
 * Never throws: failures become rows with `value: NaN` and a `note`.
 */
export async function runTfjs(opts: PeerOptions): Promise<PeerResult[]> {
  const log = opts.log ?? (() => {});
  let tf: Tf;
  try {
    tf = await loadTf();
  } catch (e) {
    const note = `import npm:@tensorflow/tfjs@${TFJS_VERSION} failed: ${errorMessage(e)}`;
    log(`tfjs: ${note}`);
    return TFJS_BACKENDS.flatMap((b) => failedRows(TFJS_PEER, b, opts, note));
  }
  const rows: PeerResult[] = [];
  for (const backend of TFJS_BACKENDS) {
    log(`tfjs@${TFJS_VERSION} backend ${backend}`);
    try {
      await withTimeout(initBackend(tf, backend), 60_000, `tfjs ${backend}`);
    } catch (e) {
      const note = `backend init failed: ${errorMessage(e)}`;
      log(`  ${note}`);
      rows.push(...failedRows(TFJS_PEER, backend, opts, note));
      continue;
    }
    const base = { peer: TFJS_PEER, backend };
    for (const suite of opts.suites) {
      if (suite === "matmul") {
        for (const n of opts.sizes ?? DEFAULT_SIZES) {
          rows.push(
            await runCase(
              { ...base, suite: matmulSuite(n), unit: "GFLOP/s" },
              log,
              () => matmulCase(tf, n),
            ),
          );
        }
      } else if (suite === "conv") {
        const spec = opts.conv ?? CONV_SPEC;
        rows.push(
          await runCase(
            { ...base, suite: convSuite(spec), unit: "GFLOP/s" },
            log,
            () => convCase(tf, spec),
          ),
        );
      } else {
        rows.push(
          await runCase(
            { ...base, suite: MLP_SUITE, unit: "ms/step" },
            log,
            () => mlpCase(tf, opts.steps ?? DEFAULT_STEPS),
          ),
        );
      }
    }
  }
  return rows;
}
