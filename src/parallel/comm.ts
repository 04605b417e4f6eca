/**
 * Collective copies between devices (`torch.cuda.comm`): broadcast,
 * reduceAdd, scatter and gather. None of them waits: each copy is queued on
 * the streams of the devices involved (see `src/stream.ts`).
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";
import { chunkSizes, formatShape, normalizeDim, sameShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { cat } from "../ops/view.ts";
import { copyRegions, type Region, sumRegions } from "../ops/transfer.ts";
import { empty } from "../ops/util.ts";
import { noGrad, record } from "../autograd.ts";
import { type DeviceLike, resolveDevices } from "./devices.ts";

/** `t` on each device: `t` itself where it already is, a copy elsewhere. */
export function broadcast(t: Tensor, devices: readonly DeviceLike[]): Tensor[] {
  return resolveDevices(devices, "broadcast").map((d) => t.to(d));
}

/** The sum of equal-shaped tensors from several devices, on `destination`. */
export function reduceAdd(tensors: readonly Tensor[], destination?: DeviceLike): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw new RangeError("reduceAdd: expected a non-empty array of tensors");
  }
  const first = tensors[0];
  tensors.forEach((t, i) => {
    if (!sameShape(t.shape, first.shape)) {
      throw new RangeError(
        `reduceAdd: tensor ${i} on ${t.device} has shape ${
          formatShape(t.shape)
        }, but tensor 0 on ${first.device} has shape ${formatShape(first.shape)}`,
      );
    }
  });
  const target = destination === undefined ? first.device : resolveDevice(destination);
  let sum = first.to(target);
  for (let i = 1; i < tensors.length; i++) sum = sum.add(tensors[i].to(target));
  return sum;
}

/** Options of {@link scatter}. */
export interface ScatterOptions {
  /** The dim to split (default 0; negative counts from the end). */
  dim?: number;
  /** One size per device, summing to the dim's length; default torch.chunk's sizes. */
  chunkSizes?: readonly number[];
}

/** `dim` of `t` made non-negative; a 0-dimensional `t` has no dim to split. */
function scatterDim(t: Tensor, dim: number): number {
  if (t.ndim === 0) {
    throw new RangeError(
      "scatter: a 0-dimensional tensor cannot be scattered (it has no dim to split); pass it inside a tensor of shape [n] or as a non-tensor value",
    );
  }
  return normalizeDim(dim, t.ndim, "scatter");
}

/** The sizes `t` splits into along `dim` (from {@link scatterDim}) over `count` devices, checked. */
function scatterSizes(
  t: Tensor,
  count: number,
  dim: number,
  sizes: readonly number[] | undefined,
): number[] {
  const n = t.shape[dim];
  if (!sizes) return chunkSizes(n, count);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (
    sizes.length !== count || total !== n || sizes.some((s) => !Number.isInteger(s) || s < 0)
  ) {
    throw new RangeError(
      `scatter: chunkSizes ${
        JSON.stringify(sizes)
      } must have one non-negative entry per device (${count}) and sum to ${n} (dim ${dim} of shape ${
        formatShape(t.shape)
      })`,
    );
  }
  return [...sizes];
}

/**
 * Splits `t` along `dim` and puts piece i on device i (torch.chunk's sizes
 * unless `chunkSizes`). There may be fewer pieces than devices.
 */
export function scatter(
  t: Tensor,
  devices: readonly DeviceLike[],
  options: ScatterOptions = {},
): Tensor[] {
  const list = resolveDevices(devices, "scatter", true);
  const dim = scatterDim(t, options.dim ?? 0);
  const sizes = scatterSizes(t, list.length, dim, options.chunkSizes);
  if (t.shape.slice(0, dim).some((n) => n !== 1)) {
    return t.split(sizes, dim).map((piece, i) => piece.to(list[i]));
  }
  // Each piece is one range of `t`: the pieces for other devices are cut
  // out of ONE read of `t` (no device copy per piece, no read per piece).
  const inner = t.shape.slice(dim + 1).reduce((a, b) => a * b, 1);
  const shapeOf = (size: number) => t.shape.map((n, d) => (d === dim ? size : n));
  const starts = sizes.map((_, i) => sizes.slice(0, i).reduce((a, b) => a + b, 0));
  const regions: Region[] = [];
  const pieces = sizes.map((size, i) => {
    if (list[i] === t.device) return t.narrow(dim, starts[i], size);
    const to = empty(shapeOf(size), t.dtype, list[i]);
    regions.push({ from: starts[i] * inner, numel: size * inner, to, at: 0 });
    return to;
  });
  copyRegions(t, regions);
  const remote = pieces.filter((_, i) => list[i] !== t.device);
  if (remote.length === 0) return pieces;
  record("scatter", [t], remote, (grads) => {
    let next = 0;
    const parts = pieces.map((piece, i) => {
      const g = list[i] === t.device ? null : grads[next++];
      return g ? g.to(t.device) : empty(piece.shape, t.dtype, t.device).zerosLike();
    });
    return [cat(parts, dim)];
  });
  return pieces;
}

/** Options of {@link gather}. */
export interface GatherOptions {
  /** The dim to concatenate along (default 0). */
  dim?: number;
  /** Where the result goes (default: the first tensor's device). */
  destination?: DeviceLike;
}

/** Concatenates tensors from several devices along `dim` on `destination`. */
export function gather(tensors: readonly Tensor[], options: GatherOptions = {}): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw new RangeError("gather: expected a non-empty array of tensors");
  }
  const target: Device = options.destination === undefined
    ? tensors[0].device
    : resolveDevice(options.destination);
  return cat(tensors.map((t) => t.to(target)), options.dim ?? 0);
}

/** The indices of `tensors` grouped by dtype, in order. */
function groupByDType(tensors: readonly Tensor[]): number[][] {
  const groups = new Map<string, number[]>();
  tensors.forEach((t, i) => groups.set(t.dtype, [...(groups.get(t.dtype) ?? []), i]));
  return [...groups.values()];
}

/** Tensors flattened into one vector per dtype, in order, to move in one copy. */
function flattenByDType(tensors: readonly Tensor[]): { flat: Tensor; members: number[] }[] {
  return groupByDType(tensors).map((members) => ({
    members,
    flat: members.length === 1
      ? tensors[members[0]].reshape([-1])
      : cat(members.map((i) => tensors[i].reshape([-1])), 0),
  }));
}

/** Where each member of a flattened group starts in it. */
function offsetsOf(members: number[], like: readonly Tensor[]): number[] {
  let at = 0;
  return members.map((i) => {
    const start = at;
    at += like[i].numel();
    return start;
  });
}

/**
 * `tensors` (all on one device) on every device of `devices`, with one host
 * round trip per dtype instead of one per tensor (PyTorch's
 * `broadcast_coalesced`). On the tensors' own device the originals are
 * returned. No graph is recorded (Broadcast records its own).
 */
export function broadcastCoalesced(
  tensors: readonly Tensor[],
  devices: readonly DeviceLike[],
): Tensor[][] {
  const targets = resolveDevices(devices, "broadcastCoalesced");
  if (tensors.length === 0) return targets.map(() => []);
  const source = tensors[0].device;
  tensors.forEach((t, i) => {
    if (t.device !== source) {
      throw new Error(
        `broadcastCoalesced: tensor ${i} is on ${t.device}, tensor 0 on ${source}; all must be on one device`,
      );
    }
  });
  return noGrad(() => {
    const remote = targets.filter((d) => d !== source);
    const perDevice = remote.map(() => new Array<Tensor>(tensors.length));
    for (const { flat, members } of flattenByDType(tensors)) {
      // One read of the flat vector; each device writes every tensor of
      // the group straight from it (no split copies on the devices).
      const starts = offsetsOf(members, tensors);
      const regions = remote.flatMap((d, r) =>
        members.map((i, j) => {
          const to = empty(tensors[i].shape, tensors[i].dtype, d);
          perDevice[r][i] = to;
          return { from: starts[j], numel: to.numel(), to, at: 0 };
        })
      );
      copyRegions(flat, regions);
    }
    return targets.map((d) => (d === source ? [...tensors] : perDevice[remote.indexOf(d)]));
  });
}

/**
 * For groups of tensors on different devices (group g on its own device,
 * the same shapes in every group), the elementwise sums of the groups on
 * `destination`, with one host round trip per group and dtype (PyTorch's
 * `reduce_add_coalesced`). No graph is recorded.
 */
export function reduceAddCoalesced(
  groups: readonly (readonly Tensor[])[],
  destination: DeviceLike,
): Tensor[] {
  const target = resolveDevice(destination);
  if (groups.length === 0) throw new RangeError("reduceAddCoalesced: expected at least one group");
  const like = groups[0];
  groups.forEach((g, gi) => {
    if (g.length !== like.length || g.some((t, i) => !sameShape(t.shape, like[i].shape))) {
      throw new RangeError(
        `reduceAddCoalesced: group ${gi} (${
          g.map((t) => formatShape(t.shape)).join(", ")
        }) does not match group 0 (${like.map((t) => formatShape(t.shape)).join(", ")})`,
      );
    }
  });
  return noGrad(() => {
    const out = new Array<Tensor>(like.length);
    // Remote groups are summed on the host from one read each (of their
    // flat vector), and each sum lands in its own tensor (no flat sum to
    // split with device copies); a group already on `destination` is added
    // there, tensor by tensor.
    const local = groups.findIndex((g) => g[0]?.device === target);
    const remote = groups.filter((_, g) => g !== local).map((g) => flattenByDType(g));
    for (const [k, members] of groupByDType(like).entries()) {
      const starts = offsetsOf(members, like);
      const landed = members.map((i) => empty(like[i].shape, like[i].dtype, target));
      if (remote.length > 0) {
        sumRegions(
          remote.map((flats) => flats[k].flat),
          members.map((i, j) => ({
            from: starts[j],
            numel: like[i].numel(),
            to: landed[j],
            at: 0,
          })),
        );
      }
      members.forEach((i, j) => {
        if (local < 0) out[i] = landed[j];
        else if (remote.length === 0) out[i] = groups[local][i].clone();
        else out[i] = groups[local][i].add(landed[j]);
      });
    }
    return out;
  });
}
