/**
 * Nested checkpoints in one safetensors file: an object of state dicts and
 * plain values (`{ model, optimizer, epoch }`) becomes flat tensor entries
 * named by their dotted paths (`model.0.weight`,
 * `optimizer.state.0.exp_avg`) plus one metadata entry holding the rest as
 * JSON, with each tensor replaced by a reference to its entry; loading
 * rebuilds the same shape. A flat state dict (tensors only) needs no
 * structure and is written exactly as before.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { isPlainObject } from "../util.ts";

/** The metadata key that holds a nested checkpoint's structure (JSON). */
export const STRUCTURE_KEY = "multigrad.checkpoint";

// Tags in the structure JSON. A plain object that has a key starting with
// "$" is wrapped in {"$object": ...} so that it cannot be mistaken for a tag.
const TENSOR = "$tensor";
const NUMBER = "$number";
const OBJECT = "$object";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Whether `value` is a state dict in the flat sense: a plain object of tensors only. */
export function isFlatStateDict(value: unknown): value is Record<string, Tensor> {
  return isPlainObject(value) && Object.values(value).every((v) => v instanceof Tensor);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return Array.isArray(value) ? "an array" : `a ${value.constructor?.name ?? "object"}`;
}

/**
 * Throws where `t` has no shape to write: an uninitialized lazy parameter or
 * buffer (nn's, whose `shape` throws), named by `where` (`for "key"`, `at
 * "path"`). serialization does not import nn, so it asks the tensor itself.
 */
export function checkHasShape(op: string, t: Tensor, where: string): void {
  try {
    void t.shape;
  } catch {
    throw new TypeError(
      `${op}: the tensor ${where} is an uninitialized parameter or buffer (a lazy module's, ` +
        "before its first forward) and has no shape to save; run a dummy forward pass first",
    );
  }
}

/**
 * The entries and structure of `checkpoint`: tensors by dotted path (a tensor
 * met twice is stored once) and the JSON of everything with tensors replaced
 * by `{"$tensor": name}`. `op` names the caller in errors.
 */
export function flattenCheckpoint(
  op: string,
  checkpoint: unknown,
): { tensors: Record<string, Tensor>; structure: string } {
  if (!isPlainObject(checkpoint)) {
    throw new TypeError(
      `${op}: expected a state dict or an object of state dicts and plain values, got ${
        describe(checkpoint)
      }`,
    );
  }
  const tensors: Record<string, Tensor> = {};
  const names = new Map<Tensor, string>();
  const pathOf = new Map<string, string>();
  const open = new Set<object>();
  const encode = (value: unknown, path: string[]): Json => {
    const where = path.length ? `"${path.join(".")}"` : "the top level";
    if (value instanceof Tensor) {
      if (value.storage.disposed) throw new Error(`${op}: the tensor at ${where} was disposed`);
      checkHasShape(op, value, `at ${where}`);
      let name = names.get(value);
      if (name === undefined) {
        name = path.join(".");
        const keys = JSON.stringify(path);
        const clash = pathOf.get(name);
        if (clash !== undefined) {
          throw new Error(
            `${op}: two tensors get the entry name "${name}" (keys ${clash} and ${keys}); rename a key`,
          );
        }
        pathOf.set(name, keys);
        names.set(value, name);
        tensors[name] = value;
      }
      return { [TENSOR]: name };
    }
    if (value === null || typeof value === "boolean" || typeof value === "string") return value;
    if (typeof value === "number") {
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      return { [NUMBER]: Object.is(value, -0) ? "-0" : String(value) };
    }
    if (Array.isArray(value) || isPlainObject(value)) {
      if (open.has(value)) throw new TypeError(`${op}: the value at ${where} contains itself`);
      open.add(value);
      try {
        if (Array.isArray(value)) return value.map((v, i) => encode(v, [...path, String(i)]));
        const out: { [key: string]: Json } = {};
        for (const [k, v] of Object.entries(value)) out[k] = encode(v, [...path, k]);
        return Object.keys(value).some((k) => k.startsWith("$")) ? { [OBJECT]: out } : out;
      } finally {
        open.delete(value);
      }
    }
    throw new TypeError(
      `${op}: the value at ${where} is ${
        describe(value)
      }; a checkpoint holds tensors, numbers, strings, booleans, null, arrays and plain objects`,
    );
  };
  const structure = JSON.stringify(encode(checkpoint, []));
  return { tensors, structure };
}

/**
 * The checkpoint `structure` (from {@link flattenCheckpoint}) with its tensor
 * references replaced by `tensors`. Throws when a reference is missing or a
 * tensor is not referenced (the file was not written by `save`, or was
 * altered).
 */
export function unflattenCheckpoint(
  op: string,
  structure: string,
  tensors: Record<string, Tensor>,
): Record<string, unknown> {
  let parsed: Json;
  try {
    parsed = JSON.parse(structure);
  } catch {
    throw new Error(`${op}: the metadata "${STRUCTURE_KEY}" is not JSON`);
  }
  const used = new Set<string>();
  const decode = (value: Json): unknown => {
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map(decode);
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === TENSOR) {
      const name = value[TENSOR];
      if (typeof name !== "string" || !(name in tensors)) {
        throw new Error(
          `${op}: the checkpoint refers to tensor ${JSON.stringify(name)}, which the file lacks`,
        );
      }
      used.add(name);
      return tensors[name];
    }
    if (keys.length === 1 && keys[0] === NUMBER) {
      const text = value[NUMBER];
      if (text === "-0") return -0;
      if (text === "NaN" || text === "Infinity" || text === "-Infinity") return Number(text);
      throw new Error(`${op}: bad number ${JSON.stringify(text)} in the checkpoint`);
    }
    const plain = keys.length === 1 && keys[0] === OBJECT ? value[OBJECT] : value;
    if (plain === null || typeof plain !== "object" || Array.isArray(plain)) {
      throw new Error(`${op}: bad object in the checkpoint`);
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(plain)) out[k] = decode(v);
    return out;
  };
  const root = decode(parsed);
  if (!isPlainObject(root)) throw new Error(`${op}: the checkpoint's top level is not an object`);
  const unused = Object.keys(tensors).filter((name) => !used.has(name));
  if (unused.length > 0) {
    throw new Error(
      `${op}: the file has tensors its checkpoint structure does not mention: ${
        unused.slice(0, 5).join(", ")
      }${unused.length > 5 ? ", ..." : ""}`,
    );
  }
  return root;
}
