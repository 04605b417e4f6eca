/**
 * Peer benchmarks: the same matmul and MLP-training cases as multigrad's own
 * benchmark, run on TensorFlow.js and jax-js in the same process, on the same
 * machine and the same WebGPU adapter.
 *
 * Peers and pinned npm versions:
 * - TensorFlow.js `npm:@tensorflow/tfjs@4.22.0` (backend `cpu`) and
 *   `npm:@tensorflow/tfjs-backend-webgpu@4.22.0` (backend `webgpu`)
 * - jax-js `npm:@jax-js/jax@0.1.25` (backends `wasm` and `webgpu`; the MLP step
 *   is compiled with `jit`)
 *
 * Suites:
 * - `matmul`: f32 N×N by N×N, GFLOP/s (2·N³ / median seconds), each timed
 *   call including the read back of the full result.
 * - `mlp`: 784-512-512-10 ReLU MLP, batch 256, mean softmax cross-entropy,
 *   one plain SGD step (lr 0.01) per call with the loss read back; median
 *   ms per step.
 * - `conv` (TensorFlow.js only): a 3x3 "same" Conv2d of [32, 64, 28, 28] to
 *   64 channels, forward and both gradients read back, GFLOP/s.
 *
 * @example
 * ```ts
 * import { runPeers } from "./mod.ts";
 * const rows = await runPeers({ suites: ["matmul"], sizes: [256] });
 * ```
 *
 * @module
 */

import {
  CONV_SPEC,
  DEFAULT_SIZES,
  DEFAULT_STEPS,
  errorMessage,
  type PeerOptions,
  type PeerResult,
} from "./common.ts";
import { runJaxjs } from "./jaxjs.ts";
import { runTfjs } from "./tfjs.ts";

export type { PeerOptions, PeerResult, PeerSuite } from "./common.ts";
export { JAXJS_VERSION } from "./jaxjs.ts";
export { TFJS_VERSION } from "./tfjs.ts";

/**
 * Describes the WebGPU adapter that `navigator.gpu` hands out (the one both
 * peers' webgpu backends get), or why there is none.
 */
export async function describeAdapter(): Promise<string> {
  try {
    if (!("gpu" in navigator) || !navigator.gpu) return "no navigator.gpu";
    const adapter = await navigator.gpu.requestAdapter({
      powerPreference: "high-performance",
    });
    if (!adapter) return "requestAdapter() returned null";
    const info = adapter.info;
    return [info.vendor, info.architecture, info.device, info.description]
      .filter((s) => s).join(" / ") || "unknown adapter";
  } catch (e) {
    return `adapter query failed: ${errorMessage(e)}`;
  }
}

/**
 * Runs the requested suites on every peer and backend (tfjs cpu, tfjs webgpu,
 * jax-js wasm, jax-js webgpu), one after another. Never rejects: a peer or
 * backend that cannot run yields rows with `value: NaN` and a `note`.
 *
 * @param options.suites suites to run
 * @param options.sizes matmul sizes (default `[256, 512, 1024]`)
 * @param options.steps maximum timed MLP steps (default 10; time-boxed)
 * @param options.log progress sink (default silent)
 */
export async function runPeers(options: PeerOptions): Promise<PeerResult[]> {
  const opts: PeerOptions = {
    suites: [...new Set(options.suites)],
    sizes: options.sizes ?? [...DEFAULT_SIZES],
    steps: options.steps ?? DEFAULT_STEPS,
    conv: options.conv ?? CONV_SPEC,
    log: options.log ?? (() => {}),
  };
  opts.log?.(`webgpu adapter: ${await describeAdapter()}`);
  const rows: PeerResult[] = [];
  rows.push(...await runTfjs(opts));
  rows.push(...await runJaxjs(opts));
  return rows;
}
