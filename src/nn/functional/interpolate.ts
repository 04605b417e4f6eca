/**
 * `interpolate` (resampling to a new spatial size), as
 * `torch.nn.functional.interpolate` of PyTorch 1.13, for 3-D [N, C, L]
 * (`"nearest"`, `"nearest-exact"`, `"linear"`), 4-D [N, C, H, W]
 * (`"nearest"`, `"nearest-exact"`, `"bilinear"`, `"bicubic"`, both with
 * `antialias`) and 5-D [N, C, D, H, W] (`"nearest"`, `"nearest-exact"`,
 * `"trilinear"`) inputs, and `"area"` for all three.
 *
 * Composed from existing ops, so it runs and differentiates on every
 * backend: `"nearest"` and `"nearest-exact"` are an `indexSelect` per
 * spatial dim; `"linear"` and `"bilinear"`/`"trilinear"` (and `"bicubic"`,
 * `"area"` and the antialiased modes: see bicubic.ts) separate into one
 * small [out, in] interpolation matrix per dim, built on the host and
 * applied by `matmul`.
 * The source positions follow PyTorch's CPU kernels bit for bit where they
 * round (see `nearestIndex` and `linearMatrix`).
 * @module
 */

import { tensor } from "../../ops/factory.ts";
import { cachedConstant } from "../../ops/util.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";
import { antialiasMatrix, areaMatrix, bicubicMatrix, resampleSetup } from "./bicubic.ts";
import { owned } from "../../ops_composite/owned.ts";

/** How {@link interpolate} computes an output element. */
export type InterpolateMode =
  | "nearest"
  | "nearest-exact"
  | "linear"
  | "bilinear"
  | "trilinear"
  | "bicubic"
  | "area";

const MODES: readonly InterpolateMode[] = [
  "nearest",
  "nearest-exact",
  "linear",
  "bilinear",
  "trilinear",
  "bicubic",
  "area",
];

/** Options of {@link interpolate}: exactly one of `size` and `scaleFactor`. */
export interface InterpolateOptions {
  /** Output spatial size: a number for every spatial dim, or one per dim. */
  size?: number | readonly number[] | null;
  /**
   * Multiplier of each spatial size: the output has floor(size · factor)
   * elements, and (unless `recomputeScaleFactor`) the source positions use
   * 1 / factor, as PyTorch 1.13's default.
   */
  scaleFactor?: number | readonly number[] | null;
  /**
   * `"nearest"` (default; PyTorch's legacy rule: source index
   * floor(i · scale)), `"nearest-exact"` (3-D, 4-D, 5-D: source index
   * floor((i + 0.5) · scale), the pixel centres, as PIL and scikit-image),
   * `"linear"` (3-D), `"bilinear"` (4-D), `"trilinear"` (5-D), `"bicubic"`
   * (4-D; PyTorch's A = -0.75, taps outside the input read its border; a
   * scale factor that keeps a size still resamples at 1 / factor, as PyTorch,
   * and the gradient is that output's, where PyTorch 1.13's backward copies
   * the gradient when both sizes stay) or `"area"` (any of them: adaptive
   * average pooling to the output size).
   */
  mode?: InterpolateMode;
  /**
   * Linear modes only: true maps the corner elements of input and output
   * onto each other; false (default) maps pixel centres (half-pixel
   * offsets, clamped at 0).
   */
  alignCorners?: boolean | null;
  /**
   * With `scaleFactor`: the source positions use input / output size
   * instead of 1 / factor (default false).
   */
  recomputeScaleFactor?: boolean | null;
  /**
   * `"bilinear"` and `"bicubic"` (4-D) only (default false): PyTorch
   * 1.13's PIL-style resampling. When downsampling, the filter widens by
   * the downscale factor so that every input pixel contributes; weights are
   * normalized at the borders instead of reading clamped taps, and bicubic
   * uses A = -0.5 (PIL's) instead of -0.75, at any scale. So upsampling
   * with it equals plain bilinear (without `alignCorners`), not plain
   * bicubic. With `alignCorners` the scale is (in - 1) / (out - 1) but the
   * filter stays centred on pixel centres, as in PyTorch.
   */
  antialias?: boolean | null;
}

/**
 * Resamples the spatial dims of `input` ([N, C, L], [N, C, H, W] or
 * [N, C, D, H, W]) to a
 * new size, as `torch.nn.functional.interpolate` of PyTorch 1.13.
 */
export function interpolate(input: Tensor, options: InterpolateOptions = {}): Tensor {
  return owned(() => {
    // Intermediates go with the graph at backward, not with the GC.
    return forwardScope(() => interpolateUnscoped(input, options));
  }, input);
}

function interpolateUnscoped(input: Tensor, options: InterpolateOptions): Tensor {
  const op = "interpolate";
  checkFloatInput(op, input);
  const mode = options.mode ?? "nearest";
  if (!MODES.includes(mode)) {
    throw new RangeError(
      `${op}: mode must be one of ${MODES.map((m) => `"${m}"`).join(", ")}, got ${
        JSON.stringify(mode)
      }`,
    );
  }
  const alignCorners = options.alignCorners ?? null;
  const nearest = mode === "nearest" || mode === "nearest-exact";
  if ((nearest || mode === "area") && alignCorners !== null) {
    throw new RangeError(
      `${op}: alignCorners can only be set with the interpolating modes "linear", "bilinear", "bicubic" and "trilinear" (mode is "${mode}")`,
    );
  }
  const rank = input.ndim;
  const antialias = options.antialias ?? false;
  if (antialias && !((mode === "bilinear" || mode === "bicubic") && rank === 4)) {
    throw new RangeError(
      `${op}: antialias is only supported for modes "bilinear" and "bicubic" on 4-D [N, C, H, W] inputs, got mode "${mode}" and a ${rank}-D input of shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const needs = {
    nearest: [3, 4, 5],
    "nearest-exact": [3, 4, 5],
    linear: [3],
    bilinear: [4],
    trilinear: [5],
    bicubic: [4],
    area: [3, 4, 5],
  }[mode];
  if (!needs.includes(rank)) {
    const layouts: Record<number, string> = {
      3: "3-D [N, C, L]",
      4: "4-D [N, C, H, W]",
      5: "5-D [N, C, D, H, W]",
    };
    const names = needs.map((r) => layouts[r]);
    const what = names.length === 1
      ? names[0]
      : `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;
    throw new RangeError(
      `${op}: mode "${mode}" needs a ${what} input, got shape ${formatShape(input.shape)}`,
    );
  }
  const spatial = input.shape.slice(2);
  if (spatial.some((s) => s < 1)) {
    throw new RangeError(
      `${op}: input of shape ${
        formatShape(input.shape)
      } has an empty spatial dim; every spatial size must be positive, as in PyTorch`,
    );
  }
  const { size, scales } = outputSize(op, spatial, options);
  let y = input;
  for (const [i, inSize] of spatial.entries()) {
    const dim = 2 + i;
    const out = size[i];
    const key = `${input.device}|${input.dtype}|${mode}|${inSize}|${out}|${
      scales?.[i]
    }|${alignCorners}|${antialias}`;
    // Linear modes copy a dim whose size stays (PyTorch's kernels too); its
    // bicubic kernel, and the antialiased ones, still resample such a dim at
    // 1 / scaleFactor (without a factor they are the identity there).
    const resamples = scales?.[i] !== undefined &&
      (antialias || (mode === "bicubic" && !alignCorners));
    if (!nearest && out === inSize && !resamples) continue;
    if (nearest) {
      const index = cachedConstant(
        indexCache,
        64,
        key,
        input.device,
        () =>
          tensor(nearestIndex(inSize, out, scales?.[i], mode === "nearest-exact"), {
            dtype: "int32",
            device: input.device,
          }),
      );
      y = y.indexSelect(dim, index);
    } else {
      const matrix = cachedConstant(
        matrixCache,
        64,
        key,
        input.device,
        () =>
          tensor(
            matrixOf(mode, inSize, out, scales?.[i], alignCorners ?? false, antialias, input.dtype),
            {
              shape: [out, inSize],
              dtype: input.dtype,
              device: input.device,
            },
          ),
      );
      // The last dim multiplies from the right; another from the left, the dims after it
      // flattened into one.
      if (dim === rank - 1) y = y.matmul(matrix.t());
      else {
        const after = y.shape.slice(dim + 1);
        const flat = after.reduce((a, b) => a * b, 1);
        y = matrix.matmul(y.reshape([...y.shape.slice(0, dim), inSize, flat]))
          .reshape([...y.shape.slice(0, dim), out, ...after]);
      }
    }
  }
  return y === input ? input.clone() : y;
}

const indexCache = new Map<string, Tensor>();

/** The [out, in] resampling matrix of one dim for a matrix mode. */
function matrixOf(
  mode: InterpolateMode,
  inSize: number,
  out: number,
  factor: number | undefined,
  alignCorners: boolean,
  antialias: boolean,
  dtype: string,
): number[] {
  if (antialias && (mode === "bilinear" || mode === "bicubic")) {
    return antialiasMatrix(mode, inSize, out, factor, alignCorners, dtype);
  }
  if (mode === "bicubic") return bicubicMatrix(inSize, out, factor, alignCorners, dtype);
  // Adaptive average pooling: the scale factor only sets the output size.
  if (mode === "area") return areaMatrix(inSize, out);
  return linearMatrix(inSize, out, factor, alignCorners, dtype);
}
const matrixCache = new Map<string, Tensor>();

/**
 * The output size per spatial dim and, when the source positions use them,
 * the scale factors.
 */
function outputSize(
  op: string,
  spatial: readonly number[],
  options: InterpolateOptions,
): { size: number[]; scales: number[] | null } {
  const { size = null, scaleFactor = null } = options;
  const perDim = (name: string, v: number | readonly number[]): number[] => {
    const list = typeof v === "number" ? spatial.map(() => v) : [...v];
    if (list.length !== spatial.length) {
      throw new RangeError(
        `${op}: ${name} ${JSON.stringify(v)} must have one entry per spatial dim of the input (${
          formatShape(spatial)
        })`,
      );
    }
    return list;
  };
  if ((size === null) === (scaleFactor === null)) {
    throw new RangeError(
      `${op}: give exactly one of size and scaleFactor, got ${
        size === null
          ? "neither"
          : `both (size ${JSON.stringify(size)}, scaleFactor ${JSON.stringify(scaleFactor)})`
      }`,
    );
  }
  let out: number[];
  let scales: number[] | null = null;
  if (size !== null) {
    if (options.recomputeScaleFactor) {
      throw new RangeError(`${op}: recomputeScaleFactor has no meaning with an explicit size`);
    }
    out = perDim("size", size);
    if (out.some((s) => !Number.isInteger(s) || s < 1)) {
      throw new RangeError(`${op}: size must be positive integers, got ${JSON.stringify(size)}`);
    }
  } else {
    scales = perDim("scaleFactor", scaleFactor!);
    if (scales.some((s) => !(s > 0 && Number.isFinite(s)))) {
      throw new RangeError(
        `${op}: scaleFactor must be positive finite numbers, got ${JSON.stringify(scaleFactor)}`,
      );
    }
    // PyTorch: floor(size · factor) in double precision.
    out = spatial.map((s, i) => Math.floor(s * scales![i]));
    if (out.some((s) => s < 1)) {
      throw new RangeError(
        `${op}: scaleFactor ${JSON.stringify(scaleFactor)} gives an empty output ${
          formatShape(out)
        } for the spatial size ${formatShape(spatial)}`,
      );
    }
    if (options.recomputeScaleFactor) scales = null;
  }
  return { size: out, scales };
}

/**
 * PyTorch 1.13's nearest source index of each output element: legacy
 * min(floor(dst · scale), in - 1), or with `exact` ("nearest-exact")
 * min(floor((dst + 0.5) · scale), in - 1), in float32 arithmetic, with
 * scale = float32(1 / factor) when a scale factor is given, else
 * float32(in / out) (whatever the input's dtype). (PyTorch's legacy 4-D and
 * 5-D kernels for a one-channel input, channels-last, and their backward
 * special-case out = in and out = 2·in to the identity and dst / 2 even when
 * a factor says otherwise; their general forward, followed here, does not.
 * Its nearest-exact kernels have no such cases.)
 */
function nearestIndex(
  inSize: number,
  out: number,
  factor: number | undefined,
  exact: boolean,
): number[] {
  const scale = Math.fround(factor !== undefined ? 1 / factor : inSize / out);
  const offset = exact ? 0.5 : 0;
  return Array.from(
    { length: out },
    (_, i) => Math.min(Math.floor(Math.fround((i + offset) * scale)), inSize - 1),
  );
}

/**
 * The [out, in] matrix of PyTorch 1.13's linear interpolation along one
 * dim, row-major. Source position of output element i: scale · i with
 * alignCorners (scale = (in - 1) / (out - 1)), else scale · (i + 0.5) - 0.5
 * clamped at 0 (scale = 1 / factor, or in / out); the scale is rounded to
 * the dtype (float32 kernels keep it in float32), the position is not (the
 * CPU kernels accumulate in double). Its two neighbours get weights 1 - λ
 * and λ (both on the last element at the end). (out = in is a copy: the
 * caller skips the dim.)
 */
function linearMatrix(
  inSize: number,
  out: number,
  factor: number | undefined,
  alignCorners: boolean,
  dtype: string,
): number[] {
  const { round, values, scale } = resampleSetup(inSize, out, factor, alignCorners, dtype);
  for (let i = 0; i < out; i++) {
    const src = alignCorners ? scale * i : Math.max(scale * (i + 0.5) - 0.5, 0);
    const i0 = Math.trunc(src);
    const i1 = i0 < inSize - 1 ? i0 + 1 : i0;
    const lambda = round(src - i0);
    values[i * inSize + i0] += round(1 - lambda);
    values[i * inSize + i1] += lambda;
  }
  return values;
}
