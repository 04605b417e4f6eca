/**
 * Shared test helpers: which backends can start here, and closeness checks.
 * Every backend suite is written once and registered per started backend, as
 * burn and TensorFlow.js run one kernel suite against every backend.
 * @module
 */

import assert from "node:assert/strict";
import {
  backendNames,
  type Device,
  type DType,
  optim,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
} from "../mod.ts";

/**
 * Backends that must start (comma-separated names in MULTIGRAD_REQUIRE_BACKENDS): CI sets it so a
 * webgpu adapter that fails to start fails the run instead of skipping every webgpu test.
 */
const REQUIRED_BACKENDS = new Set(
  (Deno.env.get("MULTIGRAD_REQUIRE_BACKENDS") ?? "").split(",").filter((name) => name !== ""),
);

/**
 * With `MULTIGRAD_TEST_DAWN=1` the suites also run on the dawn plugin
 * (`npm:webgpu`), two devices per adapter; it must then start.
 */
export const TEST_DAWN = Deno.env.get("MULTIGRAD_TEST_DAWN") === "1";
if (TEST_DAWN) {
  // A computed specifier keeps npm:webgpu out of the graph of ordinary runs.
  const plugin = new URL("../src/backends/dawn/mod.ts", import.meta.url).href;
  const { registerDawn } = await import(plugin) as typeof import("../src/backends/dawn/mod.ts");
  registerDawn({ devicesPerAdapter: 2 });
  REQUIRED_BACKENDS.add("dawn");
}

/** Backends that start on this machine, each with `count` devices. */
export async function startedBackends(count = 1): Promise<Map<string, Device[]>> {
  const found = new Map<string, Device[]>();
  for (const name of backendNames()) {
    try {
      found.set(name, await requestDevices({ backend: name, count }));
    } catch (error) {
      if (name === "cpu" || REQUIRED_BACKENDS.has(name)) throw error;
      console.warn(`backend ${name} skipped: ${(error as Error).message}`);
    }
  }
  return found;
}

/** Started backends, computed once per test file. */
export const BACKENDS: Map<string, Device[]> = await startedBackends(2);

/** Registers `fn` once per started backend, named `name [backend]`. */
export function backendTest(
  name: string,
  fn: (device: Device, devices: Device[]) => Promise<void> | void,
): void {
  for (const [backend, devices] of BACKENDS) {
    Deno.test({
      name: `${name} [${backend}]`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(devices[0], devices),
    });
  }
}

/** Options of {@link assertClose}. */
export interface CloseOptions {
  /** Absolute tolerance (default 1e-5). */
  atol?: number;
  /** Relative tolerance (default 1e-5). */
  rtol?: number;
  /** What is compared, for the message. */
  what?: string;
}

/** The values in one flat list; a typed array as it is (a copy of millions took seconds). */
function flat(values: ArrayLike<number> | number | unknown[]): ArrayLike<number> {
  if (typeof values === "number") return [values];
  if (Array.isArray(values)) return (values as unknown[]).flat(Infinity) as number[];
  return values as ArrayLike<number>;
}

/** The first 8 values, as JSON, for a message. */
function head(values: ArrayLike<number>): string {
  return JSON.stringify(Array.from({ length: Math.min(8, values.length) }, (_, i) => values[i]));
}

/** Asserts `|actual - expected| <= atol + rtol * |expected|` elementwise (NaN equals NaN). */
export function assertClose(
  actual: ArrayLike<number> | number | unknown[],
  expected: ArrayLike<number> | number | unknown[],
  options: CloseOptions = {},
): void {
  const { atol = 1e-5, rtol = 1e-5, what = "values" } = options;
  const a = flat(actual);
  const e = flat(expected);
  assert.equal(a.length, e.length, `${what}: ${a.length} elements, expected ${e.length}`);
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(e[i]) && Number.isNaN(a[i])) continue;
    if (e[i] === a[i]) continue;
    // An infinite expected value makes the relative tolerance infinite: only itself is close.
    const tol = Number.isFinite(e[i]) ? atol + rtol * Math.abs(e[i]) : 0;
    if (!(Math.abs(a[i] - e[i]) <= tol)) {
      assert.fail(
        `${what}: element ${i} is ${a[i]}, expected ${e[i]} (tolerance ${tol}); actual starts ${
          head(a)
        }, expected ${head(e)}`,
      );
    }
  }
}

/** Reads a tensor and compares it with `expected` (values and shape). */
export async function assertTensor(
  t: Tensor,
  expected: unknown[] | number,
  options: CloseOptions & { shape?: number[] } = {},
): Promise<void> {
  if (options.shape) {
    assert.deepEqual([...t.shape], options.shape, `${options.what ?? "tensor"}: shape`);
  }
  assertClose(await t.data(), expected, options);
}

/** Column means and (unbiased) variances of a `[n, ...]` draw, its trailing dims flattened. */
export async function sampleMoments(x: Tensor): Promise<{ mean: number[]; variance: number[] }> {
  const [n, cols] = [x.shape[0], x.numel() / x.shape[0]];
  const v = Array.from(await x.reshape([n, cols]).data());
  const mean = Array.from({ length: cols }, (_, j) => {
    let s = 0;
    for (let i = 0; i < n; i++) s += v[i * cols + j];
    return s / n;
  });
  const variance = mean.map((m, j) => {
    let s = 0;
    for (let i = 0; i < n; i++) s += (v[i * cols + j] - m) ** 2;
    return s / (n - 1);
  });
  return { mean, variance };
}

/** The cpu reference device every backend is compared with. */
export const REF: Device = BACKENDS.get("cpu")![0];

function numel(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** float32-exact values in [low, high), deterministic per seed. */
export function floats(shape: number[], seed: number, low = -3, high = 3): number[] {
  const next = seededRandom(seed);
  const out: number[] = [];
  for (let i = numel(shape); i > 0; i--) out.push(Math.fround(low + (high - low) * next()));
  return out;
}

/** Integers in [low, high), deterministic per seed. */
export function ints(shape: number[], seed: number, low = -5, high = 6): number[] {
  const next = seededRandom(seed);
  return Array.from({ length: numel(shape) }, () => low + Math.floor((high - low) * next()));
}

/** A tensor of `shape` from host values on `d`. */
export function on(d: Device, shape: number[], vals: number[], dtype: DType = "float32"): Tensor {
  return tensor(vals, { shape, dtype, device: d });
}

/** Builds the tensors one check compares: the same computation on any device. */
export type Build = (d: Device) => Tensor | Tensor[];

/**
 * Runs `build` on the cpu reference device and on `d`; the results must have
 * the same shapes and dtypes and close values (exact with `exact`).
 */
export async function matchesCpu(
  d: Device,
  build: Build,
  options: CloseOptions & { exact?: boolean } = {},
): Promise<Tensor[]> {
  const expected = [build(REF)].flat();
  const actual = [build(d)].flat();
  assert.equal(actual.length, expected.length, "number of outputs");
  const closeness = options.exact ? { atol: 0, rtol: 0 } : options;
  for (let i = 0; i < actual.length; i++) {
    const what = `${options.what ?? "output"} ${i} on ${d}`;
    assert.deepEqual([...actual[i].shape], [...expected[i].shape], `${what}: shape`);
    assert.equal(actual[i].dtype, expected[i].dtype, `${what}: dtype`);
    assert.equal(actual[i].device, d, `${what}: device`);
    assertClose(await actual[i].data(), await expected[i].data(), { ...closeness, what });
  }
  return actual;
}

/** Nested fixture values: numbers, or "NaN" / "Infinity" / "-Infinity" (JSON has no such numbers). */
export type FixtureValues = number | string | FixtureValues[];

/** The numbers of nested fixture values, flat, with the special strings decoded. */
export function decodeFixture(values: FixtureValues): number[] {
  if (Array.isArray(values)) return values.flatMap(decodeFixture);
  return [typeof values === "string" ? Number(values) : values];
}

/**
 * Asserts each element close to PyTorch's float32 value or to its float64
 * value of the same input (rounded to float32): where PyTorch's float32 is
 * itself off (erfinv near 1, sin of a large argument, a recurrence that
 * cancels), the true value is an honest answer too.
 */
export function assertNear(
  actual: ArrayLike<number>,
  torch32: FixtureValues,
  torch64: FixtureValues,
  options: { atol: number; rtol: number; what: string },
): void {
  const [a, e32, e64] = [Array.from(actual), decodeFixture(torch32), decodeFixture(torch64)];
  const picked = a.map((v, i) => {
    // An infinite e is near only itself (its relative tolerance would be infinite).
    const near = (e: number) =>
      Object.is(v, e) || (Number.isNaN(v) && Number.isNaN(e)) ||
      (Number.isFinite(e) && Math.abs(v - e) <= options.atol + options.rtol * Math.abs(e));
    return near(e32[i]) ? e32[i] : near(Math.fround(e64[i])) ? Math.fround(e64[i]) : e32[i];
  });
  assertClose(a, picked, options);
}

/** The shape of nested fixture values (`[]` for a number). */
export function shapeOf(values: FixtureValues): number[] {
  return Array.isArray(values) ? [values.length, ...shapeOf(values[0])] : [];
}

/** Asserts that `t` exists and has the shape and (within `options`) the values of `expected`. */
export async function assertFixture(
  t: Tensor | null,
  expected: FixtureValues,
  options: CloseOptions = {},
): Promise<void> {
  assert.ok(t, `${options.what ?? "tensor"}: missing`);
  await assertTensor(t, decodeFixture(expected), { ...options, shape: shapeOf(expected) });
}

/** A tensor of nested fixture values on `device` (float32 unless told). */
export function fixtureTensor(
  values: FixtureValues,
  device: Device,
  options: { requiresGrad?: boolean; dtype?: DType } = {},
): Tensor {
  return tensor(decodeFixture(values), {
    shape: shapeOf(values),
    device,
    requiresGrad: options.requiresGrad,
    dtype: options.dtype,
  });
}

/** The optimizer PyTorch calls `kind` (`"SGD"`, `"Adam"`, ...) over `params`, with `options`. */
export function optimizerByName(
  kind: string,
  params: Tensor[],
  options: Record<string, unknown>,
): optim.Optimizer<object> {
  switch (kind) {
    case "SGD":
      return new optim.SGD(params, options as unknown as optim.SGDOptions);
    case "Adam":
      return new optim.Adam(params, options as optim.AdamOptions);
    case "AdamW":
      return new optim.AdamW(params, options as optim.AdamOptions);
    case "RMSprop":
      return new optim.RMSprop(params, options as optim.RMSpropOptions);
    case "Adagrad":
      return new optim.Adagrad(params, options as optim.AdagradOptions);
  }
  throw new Error(`unknown optimizer ${kind}`);
}
