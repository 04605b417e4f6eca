/**
 * Anomaly mode (`torch.autograd.detect_anomaly` / `set_detect_anomaly`):
 * each node recorded while it is on keeps the stack where its forward ran;
 * a backward function that throws gets that stack appended to its error,
 * and one that returns NaN makes backward fail naming the node.
 *
 * Reading gradients back to look for NaN costs a round trip on a GPU, so
 * the check is made where the values are: on a host-memory device (cpu)
 * synchronously, node by node, so that `backward()` itself throws as in
 * PyTorch; elsewhere (WebGPU) each gradient gets a NaN flag computed on the
 * device, and once the backward pass is over the flags are read back in one
 * read per device, never delaying a kernel: the first node (in the order
 * backward ran) that produced NaN is named by an error that the next read
 * on that device rejects with (and that an async {@link detectAnomaly}
 * rejects with). While anomaly mode is off the engine's hooks are unset and
 * cost nothing.
 * @module
 */

import { anomaly, type BackwardFn, type Node, noGrad, queueBackwardCallback } from "../autograd.ts";
import type { Device } from "../device.ts";
import { keep } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { stack } from "../ops/view.ts";

let enabled = false;
let checkNan = true;
// The mode set outside any detectAnomaly, then one entry per detectAnomaly running now (async ones
// may overlap and settle in any order): the newest entry in force is the mode, and each call removes
// only its own, so overlapping calls cannot leave the mode on.
const outside: Mode = { mode: false, checkNan: true };
const scopes: Mode[] = [];
interface Mode {
  mode: boolean;
  checkNan: boolean;
}
// Errors already given a forward trace: a nested backward (createGraph) must not add a second.
const traced = new WeakSet<Error>();

/** Options of {@link detectAnomaly} and {@link setDetectAnomaly}. */
export interface AnomalyOptions {
  /** Fail when a backward function returns NaN (default true), as PyTorch's `check_nan`. */
  checkNan?: boolean;
}

/** Whether anomaly mode is on (`torch.is_anomaly_enabled`). */
export function isAnomalyEnabled(): boolean {
  return enabled;
}

/** Whether anomaly mode checks backward results for NaN (`torch.is_anomaly_check_nan_enabled`). */
export function isAnomalyCheckNanEnabled(): boolean {
  return enabled && checkNan;
}

/**
 * Turns anomaly mode on or off for everything that runs after it, as
 * `torch.autograd.set_detect_anomaly(mode, check_nan)`. Nodes recorded
 * while it is on keep their forward stack (a cost per operation: use it to
 * debug, not to train). A backward function's NaN is found where its values
 * are: on the cpu at once (backward throws, naming the node, as PyTorch);
 * on a GPU by one read per device once the pass is over, reported by the
 * next read on that device (no kernel waits for it). Off, it costs nothing.
 */
export function setDetectAnomaly(mode: boolean, options: AnomalyOptions = {}): void {
  if (typeof mode !== "boolean") {
    throw new TypeError(`setDetectAnomaly: mode must be a boolean, got ${typeof mode}`);
  }
  // Inside detectAnomaly it holds until that call ends, as PyTorch's inside `with detect_anomaly()`.
  const target = scopes.at(-1) ?? outside;
  target.mode = mode;
  target.checkNan = options.checkNan ?? true;
  apply();
}

function apply(): void {
  const { mode, checkNan: nan } = scopes.at(-1) ?? outside;
  enabled = mode;
  checkNan = nan;
  if (mode) {
    anomaly.trace = forwardTrace;
    anomaly.wrap = wrap;
  } else {
    delete anomaly.trace;
    delete anomaly.wrap;
  }
}

/**
 * Runs `fn` in anomaly mode and restores the previous mode after it, as
 * `with torch.autograd.detect_anomaly():`. `fn` may be async: the mode then
 * stays on until its promise settles (the mode is global, so other code
 * running meanwhile sees it too; calls that overlap end in any order and
 * the mode is then the one set outside them all), and the returned promise also rejects
 * with a NaN found on a GPU during `fn` that no read has reported yet.
 * With a synchronous `fn`, a NaN found on a GPU is reported by the next
 * read on that device.
 *
 * @example
 * ```ts
 * import { autograd, tensor } from "@multigrad/core";
 * const x = tensor([0, 1], { requiresGrad: true });
 * // Throws: Function 'MulBackward' returned nan values in its 0th output.
 * autograd.detectAnomaly(() => x.sqrt().mul(0).sum().backward());
 * ```
 */
export function detectAnomaly<T>(fn: () => T, options: AnomalyOptions = {}): T {
  const scope: Mode = { mode: true, checkNan: options.checkNan ?? true };
  scopes.push(scope);
  apply();
  const mine = new Set<Device>();
  collectors.add(mine);
  const restore = () => {
    collectors.delete(mine);
    scopes.splice(scopes.indexOf(scope), 1);
    apply();
  };
  let out: T;
  try {
    out = fn();
  } catch (error) {
    restore();
    throw error;
  }
  if (!(out instanceof Promise)) {
    restore();
    return out;
  }
  const settle = async () => {
    try {
      const value = await out;
      // A read on each device that had deferred checks raises the first failed one, if any.
      for (const device of mine) await device.stream.read(() => Promise.resolve(null));
      return value;
    } finally {
      restore();
    }
  };
  return settle() as T;
}

// The devices given deferred NaN checks, one set per detectAnomaly call running now.
const collectors = new Set<Set<Device>>();

function forwardTrace(): string {
  const stack = new Error().stack ?? "";
  // The frames of this hook and of the engine's recording say nothing about the user's code.
  return stack.split("\n").slice(1).filter((line) =>
    !/\/src\/autograd(\.ts|\/anomaly\.ts)/.test(line)
  ).join("\n");
}

/** PyTorch's name of a node's backward: `mul` is `MulBackward`, a Function `Square` `SquareBackward`. */
function backwardName(node: Node): string {
  return `${node.name.charAt(0).toUpperCase()}${node.name.slice(1)}Backward`;
}

function traceOf(node: Node): string {
  return node.trace === undefined
    ? "No forward pass information available. Enable anomaly mode during the forward pass for more information."
    : `Traceback of forward call that caused the error:\n${node.trace}`;
}

function nanError(node: Node, index: number): Error {
  return new Error(
    `Function '${backwardName(node)}' returned nan values in its ${index}th output.\n${
      traceOf(node)
    }`,
  );
}

function wrap(node: Node, backward: BackwardFn): BackwardFn {
  return (grads) => {
    let out: (Tensor | null)[];
    try {
      out = backward(grads);
    } catch (error) {
      throw annotate(error, node);
    }
    if (checkNan) out.forEach((g, i) => g && checkGradient(node, i, g));
    return out;
  };
}

function annotate(error: unknown, node: Node): unknown {
  if (!(error instanceof Error) || traced.has(error)) return error;
  traced.add(error);
  const note = `\nError detected in ${backwardName(node)}. ${traceOf(node)}`;
  error.message += note;
  if (error.stack) error.stack += note;
  return error;
}

interface Pending {
  readonly flags: Tensor[];
  readonly names: { node: Node; index: number }[];
}

// Per backward pass (the queue callback's closure), the deferred flags of each device.
let pass: Map<Device, Pending> | null = null;

function checkGradient(node: Node, index: number, g: Tensor): void {
  const { device } = g;
  const backend = device.backendDevice;
  if (backend.readSync && device.stream.idle) {
    // Host memory with nothing queued ahead: the values are readable now, at no round trip.
    const values = backend.readSync(g.storage.buffer("detectAnomaly"), 0, g.numel(), g.dtype);
    for (const v of values) if (v !== v) throw nanError(node, index);
    return;
  }
  if (!pass) {
    const mine = new Map<Device, Pending>();
    pass = mine;
    let done = false;
    const flush = () => {
      if (done) return;
      done = true;
      if (pass === mine) pass = null;
      for (const [dev, pending] of mine) report(dev, pending);
    };
    queueBackwardCallback(flush);
    // A pass that throws drops its callbacks: its flags then go out once the synchronous
    // backward is over, and the next pass does not add to a map nobody reads.
    queueMicrotask(flush);
  }
  const pending = pass.get(device) ?? { flags: [], names: [] };
  pass.set(device, pending);
  // Kept: the pass's scope frees what backward made before its callbacks run.
  pending.flags.push(keep(noGrad(() => g.ne(g).sum().to("float32"))));
  pending.names.push({ node, index });
}

function report(device: Device, { flags, names }: Pending): void {
  const all = noGrad(() => stack(flags));
  for (const flag of flags) flag.dispose();
  const n = all.numel();
  const buffer = all.storage.buffer("detectAnomaly");
  const host = new Promise<ArrayLike<number>>((resolve, reject) => {
    device.stream.submit(() => {
      try {
        device.backendDevice.read(buffer, 0, n, "float32").then(resolve, reject);
      } catch (error) {
        reject(error);
      }
    });
  });
  device.stream.check(host.then((values) => {
    all.dispose();
    for (let i = 0; i < names.length; i++) {
      if (values[i] !== 0) return nanError(names[i].node, names[i].index);
    }
    return null;
  }));
  for (const devices of collectors) devices.add(device);
}
