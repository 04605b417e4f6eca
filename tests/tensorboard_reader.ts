/**
 * A small reader of what `utils.tensorboard.SummaryWriter` writes, for its
 * tests: TFRecords with their checksums verified, protobuf fields, PNGs
 * (signature, chunk CRCs and unfiltered rows checked), and a temporary log
 * directory.
 * @module
 */

import assert from "node:assert/strict";
import { inflateSync } from "node:zlib";
import { crc32 } from "../src/utils/tensorboard/image.ts";
import { crc32c } from "../src/utils/tensorboard/record.ts";

/** Bytes from a hex string. */
export const unhex = (h: string): Uint8Array =>
  Uint8Array.from(h.match(/../g)!, (x) => parseInt(x, 16));
/** Bytes as a hex string. */
export const hex = (b: Uint8Array): string =>
  Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** TFRecord's masked CRC-32C of `data`. */
export function masked(data: Uint8Array): number {
  const c = crc32c(data);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** The records of an event file, their length and data checksums verified. */
export function readRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let off = 0;
  while (off < bytes.length) {
    const len = Number(view.getBigUint64(off, true));
    assert.equal(view.getUint32(off + 8, true), masked(bytes.subarray(off, off + 8)), "length crc");
    const data = bytes.subarray(off + 12, off + 12 + len);
    assert.equal(view.getUint32(off + 12 + len, true), masked(data), "data crc");
    out.push(data);
    off += 16 + len;
  }
  return out;
}

/** A protobuf field's value: a varint as bigint, fixed64 as a double, fixed32 as a float, or bytes. */
export type Field = number | bigint | Uint8Array;

/** Protobuf fields by number. */
export function decode(b: Uint8Array): Map<number, Field[]> {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const fields = new Map<number, Field[]>();
  let off = 0;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      const byte = b[off++];
      v |= BigInt(byte & 0x7f) << shift;
      shift += 7n;
      if (byte < 0x80) return v;
    }
  };
  while (off < b.length) {
    const key = Number(varint());
    const [num, wire] = [key >>> 3, key & 7];
    let v: Field;
    if (wire === 0) v = varint();
    else if (wire === 1) (v = view.getFloat64(off, true)), (off += 8);
    else if (wire === 5) (v = view.getFloat32(off, true)), (off += 4);
    else if (wire === 2) {
      const len = Number(varint());
      v = b.subarray(off, off + len);
      off += len;
    } else throw new Error(`wire type ${wire}`);
    if (!fields.has(num)) fields.set(num, []);
    fields.get(num)!.push(v);
  }
  return fields;
}

/** Runs `fn` with a new temporary directory, removed afterwards. */
export async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_tensorboard_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A decoded PNG: size, colour type and the samples of its rows. */
export interface DecodedPng {
  width: number;
  height: number;
  type: number;
  pixels: number[];
}

/** A PNG's size, colour type and pixels; its signature, chunk CRCs and row filters checked. */
export function decodePng(png: Uint8Array): DecodedPng {
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const chunks: [string, Uint8Array][] = [];
  for (let at = 8; at < png.length;) {
    const length = view.getUint32(at);
    const type = new TextDecoder().decode(png.subarray(at + 4, at + 8));
    assert.equal(view.getUint32(at + 8 + length), crc32(png.subarray(at + 4, at + 8 + length)));
    chunks.push([type, png.subarray(at + 8, at + 8 + length)]);
    at += 12 + length;
  }
  assert.deepEqual(chunks.map(([t]) => t), ["IHDR", "IDAT", "IEND"]);
  const header = new DataView(chunks[0][1].buffer, chunks[0][1].byteOffset, 13);
  const [width, height, type] = [header.getUint32(0), header.getUint32(4), chunks[0][1][9]];
  assert.equal(chunks[0][1][8], 8, "8 bits a sample");
  const raw = inflateSync(chunks[1][1]);
  const row = width * ({ 0: 1, 4: 2, 6: 4 }[type] ?? 3);
  assert.equal(raw.length, height * (row + 1));
  const pixels: number[] = [];
  for (let y = 0; y < height; y++) {
    assert.equal(raw[y * (row + 1)], 0, "filter type None");
    pixels.push(...raw.subarray(y * (row + 1) + 1, (y + 1) * (row + 1)));
  }
  return { width, height, type, pixels };
}
