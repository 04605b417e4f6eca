/**
 * Shared pieces of generated WGSL: the parameter block, buffer bindings and
 * the linear invocation index.
 * @module
 */

import type { DType } from "../../dtype.ts";

/** The WGSL scalar type of a dtype this backend stores. */
export function wgslType(dtype: DType): "f32" | "i32" {
  if (dtype === "float32") return "f32";
  if (dtype === "int32") return "i32";
  throw new Error(`webgpu does not support dtype ${dtype}`);
}

/**
 * The parameter block (binding 0) and accessors `pu`, `pi`, `pf` reading
 * word `i` as u32, i32 or f32. It is a read-only storage binding, not a
 * uniform: Mesa's lavapipe (22.x) inlines uniform values that steer loops into
 * a shader variant compiled at every dispatch and never freed (about 190 KB
 * of process memory and 1.3 ms per matmul dispatch); it inlines nothing from
 * storage buffers. The vec4 words keep the uniform-compatible layout.
 */
export const PARAMS_WGSL = `
struct Params { v: array<vec4<u32>, 16> }
@group(0) @binding(0) var<storage, read> prm: Params;
fn pu(i: u32) -> u32 { return prm.v[i >> 2u][i & 3u]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(pu(i)); }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
`;

/** A storage binding declaration. */
export function storage(
  binding: number,
  name: string,
  elem: string,
  writable: boolean,
): string {
  const access = writable ? "read_write" : "read";
  return `@group(0) @binding(${binding}) var<storage, ${access}> ${name}: array<${elem}>;\n`;
}

/**
 * The entry point header of a 1-d kernel with `wg` invocations per
 * workgroup: defines `idx`, the linear invocation index over a 2-d grid,
 * and returns at once for `idx >= pu(0u)` (parameter word 0 is the count).
 */
export function main1d(wg: number): string {
  return `
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.y * nwg.x + wid.x) * ${wg}u + lid;
  if (idx >= pu(0u)) { return; }
`;
}

/**
 * The entry point header of a kernel giving one workgroup of `wg`
 * invocations to each item: defines `g`, the workgroup's linear index over
 * a 2-d grid, and `lid`, the invocation's index in it.
 */
export function mainPerWorkgroup(wg: number): string {
  return `
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = wid.y * nwg.x + wid.x;
`;
}

/**
 * The entry point header of a kernel over a 3-d grid of invocations in
 * `wgX` x `wgY` workgroups: defines `gid`, the global invocation id.
 */
export function mainGrid(wgX: number, wgY: number): string {
  return `
@compute @workgroup_size(${wgX}, ${wgY})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
`;
}

/**
 * The entry point header of a kernel whose `wg`-invocation workgroups tile
 * a 3-d grid: defines `wid`, the workgroup id, and `lid`.
 */
export function mainTiles(wg: number): string {
  return `
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
`;
}

/**
 * WGSL statements splitting the linear u32 `index` into row-major
 * coordinates: `names` outermost first, `extents` the sizes of every name
 * but the first (WGSL u32 expressions). `coordinates("idx", ["o", "j",
 * "i"], ["count", "inner"])` defines `o`, `j` and `i` with
 * `idx = (o * count + j) * inner + i`.
 */
export function coordinates(
  index: string,
  names: readonly string[],
  extents: readonly string[],
): string {
  if (extents.length !== names.length - 1) {
    throw new Error(`coordinates: ${names.length} names need ${names.length - 1} extents`);
  }
  if (names.length === 1) {
    return `  let ${names[0]} = ${index};
`;
  }
  const rest = `${index}Rest`;
  let code = `  var ${rest} = ${index};
`;
  for (let k = names.length - 1; k >= 1; k--) {
    const extent = extents[k - 1];
    code += `  let ${names[k]} = ${rest} % (${extent}); ${rest} = ${rest} / (${extent});
`;
  }
  return code + `  let ${names[0]} = ${rest};
`;
}

/** The literal zero and one of a WGSL scalar type. */
export function literals(t: "f32" | "i32"): { zero: string; one: string } {
  return t === "f32" ? { zero: "0.0", one: "1.0" } : { zero: "0", one: "1" };
}

/**
 * `isNan(x)` for f32, and `nanF32()`, a quiet NaN. Compilers may assume floats
 * are never NaN (WGSL allows it) and fold `x != x` to false, so the test
 * looks at the bits; and Tint rejects a NaN constant (`bitcast<f32>` of a
 * literal is constant-evaluated), so the NaN comes from a private variable.
 */
export const IS_NAN_WGSL = `
fn isNan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
var<private> nanBits: u32 = 0x7fc00000u;
fn nanF32() -> f32 { return bitcast<f32>(nanBits); }
`;

/**
 * `isFinite(x)` by bits and `infF32()` (from a private variable, as
 * `nanF32()`: Tint rejects non-finite constants); needs {@link IS_NAN_WGSL}.
 */
export const FLOAT_SPECIALS_WGSL = `
fn isFinite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
var<private> infBits: u32 = 0x7f800000u;
fn infF32() -> f32 { return bitcast<f32>(infBits); }
`;

/** One operand of {@link stridedOffsets}: its offset variable and where its strides start. */
export interface StridedOperand {
  /** Name of the `var` (i32) that receives the operand's element offset. */
  readonly name: string;
  /** Parameter word of the operand's stride for dim 0 (dims follow). */
  readonly stridesAt: number;
}

/**
 * WGSL statements that decode the linear `idx` over a row-major shape of
 * `rank` dims (sizes in parameter words `shapeAt..shapeAt+rank-1`) into one
 * element offset per operand: `var <name> = Σ coord_d * stride_d` (strides
 * as i32 words; 0 broadcasts).
 */
export function stridedOffsets(
  rank: number,
  shapeAt: number,
  operands: readonly StridedOperand[],
): string {
  let code = "  var rem = idx;\n";
  for (const { name } of operands) code += `  var ${name} = 0i;\n`;
  for (let d = rank - 1; d >= 0; d--) {
    code += `  { let s = pu(${shapeAt + d}u); let c = i32(rem % s); rem = rem / s;\n`;
    for (const { name, stridesAt } of operands) {
      code += `    ${name} += c * pi(${stridesAt + d}u);\n`;
    }
    code += "  }\n";
  }
  return code;
}

/**
 * `maxNan(m, v)`: the maximum, NaN winning; NaN is decided by bits before
 * the comparison, which GL drivers fold as if NaN never occurs.
 */
export const MAX_NAN_WGSL: string = IS_NAN_WGSL + `
fn maxNan(m: f32, v: f32) -> f32 { return select(m, v, isNan(v) || (!isNan(m) && v > m)); }
`;
