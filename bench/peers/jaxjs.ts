/**
 * jax-js peer: `wasm` backend (multi-threaded WebAssembly when
 * `SharedArrayBuffer` and `Worker` exist, as in Deno) and `webgpu` backend.
 *
 * Pinned package (npm, imported lazily so that a failure to load becomes a
 * `NaN` row instead of a crash): `npm:@jax-js/jax@0.1.25`.
 *
 * jax-js arrays are reference counted: every function (including `jit`-ed
 * ones) consumes its array arguments, so arrays that are used again are
 * passed as `a.ref`, and `Array.data()` consumes the array it reads.
 *
 * @module
 */

import {
  type CaseOutcome,
  checkMatmul,
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

/** Version of `@jax-js/jax` used. */
export const JAXJS_VERSION = "0.1.25";

/** Peer name used in result rows. */
export const JAXJS_PEER = "jax-js";

/** Backends ("devices") benchmarked for jax-js. */
export const JAXJS_BACKENDS: readonly ("wasm" | "webgpu")[] = [
  "wasm",
  "webgpu",
];

type Jax = typeof import("npm:@jax-js/jax@0.1.25");
type JaxArray = InstanceType<Jax["Array"]>;
/** A jax-js backend benchmarked here. */
export type Device = "wasm" | "webgpu";

async function initDevice(jax: Jax, device: Device): Promise<void> {
  // Only the requested device, so that a failure is attributed to it.
  const available = await jax.init(device);
  if (!available.includes(device)) {
    throw new Error(
      `jax.init("${device}") did not provide it (available: ${available.join(", ")})`,
    );
  }
  jax.defaultDevice(device);
}

/** One product of two fixed n×n operands with its read, run after run; then dispose. */
export interface PeerRunner {
  /** One timed unit of work, ending with a read of its result. */
  run(): Promise<void>;
  /** What the last run gave (the product, or the loss), for checks. */
  last(): ArrayLike<number> | number;
  /** Releases the peer's arrays. */
  dispose(): void;
}

function matmulRunner(jax: Jax, device: Device, n: number): PeerRunner & {
  a: Float32Array;
  b: Float32Array;
} {
  const np = jax.numpy;
  const { a, b } = matmulInputs(n);
  const ja = np.array(a, { shape: [n, n], dtype: np.float32, device });
  const jb = np.array(b, { shape: [n, n], dtype: np.float32, device });
  let out: ArrayLike<number> = [];
  return {
    a,
    b,
    async run() {
      // `data()` reads the result back (and disposes it).
      out = await np.matmul(ja.ref, jb.ref).data();
    },
    last: () => out,
    dispose() {
      quietly(() => ja.dispose());
      quietly(() => jb.dispose());
    },
  };
}

async function matmulCase(
  jax: Jax,
  device: Device,
  n: number,
): Promise<CaseOutcome> {
  const runner = matmulRunner(jax, device, n);
  try {
    const times = await measure(() => runner.run(), MATMUL_MEASURE);
    checkMatmul(runner.a, runner.b, n, runner.last() as ArrayLike<number>);
    return { value: matmulGflops(n, median(times)), note: timingNote(times) };
  } finally {
    runner.dispose();
  }
}

function mlpRunner(jax: Jax, device: Device): PeerRunner {
  const { numpy: np, nn } = jax;
  const data = mlpData();
  const { batch, dims, lr } = MLP_SPEC;
  const nLayers = data.layers.length;
  // Parameters as a flat pytree [w0, b0, w1, b1, w2, b2].
  let params: JaxArray[] = data.layers.flatMap((l) => [
    np.array(l.w, { shape: [l.fanIn, l.fanOut], dtype: np.float32, device }),
    np.array(l.b, { shape: [l.fanOut], dtype: np.float32, device }),
  ]);
  const x = np.array(data.x, { shape: [batch, dims[0]], device });
  const y = np.array(data.y, {
    shape: [batch, dims[dims.length - 1]],
    device,
  });

  // Mean softmax cross-entropy; each argument array is used exactly once.
  const loss = (p: JaxArray[], xb: JaxArray, yb: JaxArray): JaxArray => {
    let h = xb;
    for (let i = 0; i < nLayers; i++) {
      h = np.matmul(h, p[2 * i]).add(p[2 * i + 1]);
      if (i + 1 < nLayers) h = nn.relu(h);
    }
    return nn.logSoftmax(h, -1).mul(yb).sum().mul(-1 / batch);
  };
  // One plain SGD step, forward + backward + update, compiled by jit.
  const step = jax.jit((p: JaxArray[], xb: JaxArray, yb: JaxArray) => {
    const [value, grads] = jax.valueAndGrad(loss)(jax.tree.ref(p), xb, yb);
    const next = p.map((w, i) => w.sub(grads[i].mul(lr)));
    return [value, next] as [JaxArray, JaxArray[]];
  });
  let lossValue = NaN;
  return {
    async run() {
      const [value, next] = step(params, x.ref, y.ref);
      params = next;
      // Wait for the updated parameters too, not only for the loss kernel.
      await jax.blockUntilReady(params);
      lossValue = (await value.data())[0];
    },
    last: () => lossValue,
    dispose() {
      quietly(() => jax.tree.dispose(params));
      quietly(() => x.dispose());
      quietly(() => y.dispose());
      quietly(() => step.dispose());
    },
  };
}

async function mlpCase(
  jax: Jax,
  device: Device,
  steps: number,
): Promise<CaseOutcome> {
  const runner = mlpRunner(jax, device);
  const losses: number[] = [];
  try {
    const times = await measure(async () => {
      await runner.run();
      losses.push(runner.last() as number);
    }, { ...MLP_MEASURE, maxIters: steps });
    if (!losses.every(Number.isFinite)) throw new Error("non-finite loss");
    return {
      value: median(times),
      note: `jit; ${timingNote(times)}; loss ${losses[0].toFixed(4)} -> ${
        losses[losses.length - 1].toFixed(4)
      }`,
    };
  } finally {
    runner.dispose();
  }
}

/** jax-js on one backend, ready to give runners (for round-robin timing beside multigrad). */
export interface JaxjsPeer {
  /** One n×n product with its read per run. */
  matmul(n: number): PeerRunner;
  /** One jit-compiled SGD step of the MLP (784-512-512-10 b256), loss read, per run. */
  mlp(): PeerRunner;
}

/**
 * Loads jax-js and initializes `device` (`"wasm"` or `"webgpu"`), or
 * resolves with why it cannot run here.
 */
export async function startJaxjs(device: Device): Promise<JaxjsPeer | string> {
  try {
    // deno-lint-ignore no-import-prefix -- pinned peer, no root import map
    const jax: Jax = await import("npm:@jax-js/jax@0.1.25");
    await withTimeout(initDevice(jax, device), 60_000, `jax-js ${device}`);
    return { matmul: (n) => matmulRunner(jax, device, n), mlp: () => mlpRunner(jax, device) };
  } catch (e) {
    return errorMessage(e);
  }
}

/** `opts` without the conv suite, which jax-js does not run here. */
function withoutConv(opts: PeerOptions): PeerOptions {
  return { ...opts, suites: opts.suites.filter((s) => s !== "conv") };
}

/**
 * Runs the requested suites on every jax-js backend, in order.
 * Never throws: failures become rows with `value: NaN` and a `note`.
 */
export async function runJaxjs(opts: PeerOptions): Promise<PeerResult[]> {
  const log = opts.log ?? (() => {});
  let jax: Jax;
  try {
    // deno-lint-ignore no-import-prefix -- pinned peer, no root import map
    jax = await import("npm:@jax-js/jax@0.1.25");
  } catch (e) {
    const note = `import npm:@jax-js/jax@${JAXJS_VERSION} failed: ${errorMessage(e)}`;
    log(`jax-js: ${note}`);
    return JAXJS_BACKENDS.flatMap((b) => failedRows(JAXJS_PEER, b, withoutConv(opts), note));
  }
  const rows: PeerResult[] = [];
  for (const device of JAXJS_BACKENDS) {
    log(`jax-js@${JAXJS_VERSION} device ${device}`);
    try {
      await withTimeout(initDevice(jax, device), 60_000, `jax-js ${device}`);
    } catch (e) {
      const note = `backend init failed: ${errorMessage(e)}`;
      log(`  ${note}`);
      rows.push(...failedRows(JAXJS_PEER, device, withoutConv(opts), note));
      continue;
    }
    const base = { peer: JAXJS_PEER, backend: device };
    for (const suite of opts.suites) {
      if (suite === "matmul") {
        for (const n of opts.sizes ?? DEFAULT_SIZES) {
          rows.push(
            await runCase(
              { ...base, suite: matmulSuite(n), unit: "GFLOP/s" },
              log,
              () => matmulCase(jax, device, n),
            ),
          );
        }
      } else if (suite === "mlp") {
        rows.push(
          await runCase(
            { ...base, suite: MLP_SUITE, unit: "ms/step" },
            log,
            () => mlpCase(jax, device, opts.steps ?? DEFAULT_STEPS),
          ),
        );
      }
      // No conv case for jax-js: the comparison the issue asks for is tfjs.
    }
  }
  return rows;
}
