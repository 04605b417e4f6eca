/**
 * One dispatch over several tensors of an elementwise in-place update (the
 * optimizers' "foreach"): each tensor gets its own bindings and a run of
 * workgroups; a workgroup finds its tensor by comparing its index with the
 * runs' first workgroups. The kernels hand consecutive calls to it through
 * {@link Runtime.defer}.
 * @module
 */

import { groups2d, type Runtime } from "./runtime.ts";
import { main1d, PARAMS_WGSL, storage } from "./wgsl.ts";

const WG = 256;

/** One array of each tensor's bindings. */
export interface ForeachArray {
  /** The WGSL name; tensor `t`'s is `<name><t>`. */
  readonly name: string;
  /** Written as well as read. */
  readonly write: boolean;
}

/** What {@link dispatchForeach} records. */
export interface ForeachSpec {
  /** The kernel name in errors. */
  readonly name: string;
  /** Names the generated code among cached pipelines (the tensor count is added). */
  readonly key: string;
  /** Each tensor's arrays, in binding order. */
  readonly arrays: readonly ForeachArray[];
  /**
   * The update of element `i` of tensor `t`, its arrays named with suffix
   * `t` (`param0`, `grad0`, ...); parameter words 1 to `scalars.length` are
   * the scalars.
   */
  readonly body: (suffix: string) => string;
  /** Parameter words shared by every tensor (u32 bit patterns), from word 1. */
  readonly scalars: readonly number[];
}

/** The most tensors one dispatch of `spec` can bind on `rt`'s device. */
export function foreachCapacity(
  rt: Runtime,
  spec: Pick<ForeachSpec, "arrays" | "scalars">,
): number {
  // A CPU adapter (llvmpipe) runs every tensor's branch of the multi-tensor
  // kernel for every invocation, masked: the small step's Adam over 6
  // tensors took 685 µs as one dispatch against 266 µs as 6 (raw WebGPU,
  // 10 repetitions each, interleaved). Each tensor gets its own dispatch there.
  if (rt.isCpuAdapter) return 1;
  // Binding 0 is the parameter block; each tensor needs two words of it.
  const bindings = rt.device.limits.maxStorageBuffersPerShaderStage - 1;
  const words = Math.floor((64 - 1 - spec.scalars.length) / 2);
  return Math.max(1, Math.min(Math.floor(bindings / spec.arrays.length), words));
}

/** Records `spec.body` over one tensor, four elements per invocation when its size allows. */
export function dispatchSingle(
  rt: Runtime,
  spec: ForeachSpec,
  buffers: readonly GPUBuffer[],
  numel: number,
): void {
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const t = vec ? "vec4<f32>" : "f32";
  rt.dispatch({
    name: spec.name,
    key: `${spec.key}_${vec}`,
    wgsl: () =>
      PARAMS_WGSL + spec.arrays.map((a, k) => storage(k + 1, a.name, t, a.write)).join("") +
      main1d(WG) + spec.body("").replace(/\[i\]/g, "[idx]") + "}\n",
    signature: spec.arrays.map((a) => (a.write ? "w" : "r")).join(""),
    buffers,
    params: [count, ...spec.scalars],
    groups: groups2d(Math.ceil(count / WG)),
  });
}

/**
 * Records `spec.body` over every element of every tensor in `tensors` (each
 * its buffers in `spec.arrays` order, and its element count) in one dispatch.
 */
export function dispatchForeach(
  rt: Runtime,
  spec: ForeachSpec,
  tensors: readonly { readonly buffers: readonly GPUBuffer[]; readonly numel: number }[],
): void {
  const count = tensors.length;
  const first = 1 + spec.scalars.length;
  // Words: the invocations (main1d's bound), the scalars, then per tensor
  // its element count and its first workgroup.
  const params = [0, ...spec.scalars];
  let groups = 0;
  for (const t of tensors) {
    params.push(t.numel, groups);
    groups += Math.ceil(t.numel / WG);
  }
  params[0] = groups * WG;
  if (groups === 0) return;
  rt.dispatch({
    name: spec.name,
    key: `foreach_${spec.key}_${count}`,
    wgsl: () => foreachWgsl(spec, count, first),
    signature: tensors.flatMap(() => spec.arrays.map((a) => (a.write ? "w" : "r"))).join(""),
    buffers: tensors.flatMap((t) => t.buffers),
    params,
    groups: groups2d(groups),
  });
}

function foreachWgsl(spec: ForeachSpec, count: number, first: number): string {
  let s = PARAMS_WGSL;
  let binding = 1;
  for (let t = 0; t < count; t++) {
    for (const a of spec.arrays) s += storage(binding++, `${a.name}${t}`, "f32", a.write);
  }
  // main1d's idx is the linear invocation; its workgroup is idx / WG.
  s += main1d(WG) + `  let w = idx / ${WG}u;\n`;
  for (let t = count - 1; t >= 0; t--) {
    const numel = first + 2 * t;
    s += `  if (w >= pu(${numel + 1}u)) {
    let i = idx - pu(${numel + 1}u) * ${WG}u;
    if (i < pu(${numel}u)) {
${spec.body(String(t))}    }
    return;
  }
`;
  }
  return s + "}\n";
}
