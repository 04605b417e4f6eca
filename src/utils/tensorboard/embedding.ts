/**
 * The files of `add_embedding` (PyTorch 1.13's writer.py and _embedding.py)
 * for TensorBoard's projector: `tensors.tsv`, `metadata.tsv`, the sprite's
 * pixels and `projector_config.pbtxt` in protobuf's text format. Python
 * writes the numbers with `str()`; {@link pyFloatRepr} reproduces it.
 * @module
 */

import type { Pixels } from "./image.ts";

/**
 * Python's `repr(float)` (= `str`): the shortest digits that read back as `x`, in positional
 * notation for exponents -4 to 15 (with ".0" on integers), else as `1.5e-05` / `1e+16`;
 * `nan`, `inf`, `-inf`, `-0.0`.
 */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  // toExponential() without digits gives the shortest round-trip digits, as Python's repr.
  const [mantissa, exponent] = Math.abs(x).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const e = Number(exponent);
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const point = e + 1; // digits before the decimal point
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** A label of an embedding's data point (`addEmbedding`'s `metadata`): written as Python's `str()` would. */
export type MetadataValue = string | number | boolean;

/**
 * Python's `str()` of a metadata value as it came from Python: a string as is, a boolean as
 * `True` / `False`, an integral number as an int (`3`), any other number as a float.
 */
export function pyStr(v: MetadataValue): string {
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return v ? "True" : "False";
  return Number.isInteger(v) ? BigInt(v).toString() : pyFloatRepr(v);
}

/** `str(n).zfill(5)`: the step of an embedding's directory, the sign before the zeros. */
export function zfill5(n: number): string {
  const s = String(n);
  return s.startsWith("-") ? "-" + s.slice(1).padStart(4, "0") : s.padStart(5, "0");
}

/** `SummaryWriter._encode`: `%`, `/` and `\` of a tag as `%25`, `%2f` and `%5c`. */
export function encodeTag(tag: string): string {
  return tag.replaceAll("%", "%25").replaceAll("/", "%2f").replaceAll("\\", "%5c");
}

/**
 * `make_mat`: a row of `str(value.item())` joined by tabs per data point; floats as Python
 * floats (a float32 value widened to float64 first, as `.item()` does), int32 as ints.
 */
export function tensorsTsv(
  values: ArrayLike<number>,
  rows: number,
  columns: number,
  isFloat: boolean,
): string {
  const format = isFloat ? pyFloatRepr : (v: number) => String(v);
  const lines: string[] = [];
  for (let r = 0; r < rows; r++) {
    const line: string[] = [];
    for (let c = 0; c < columns; c++) line.push(format(values[r * columns + c]));
    lines.push(line.join("\t") + "\n");
  }
  return lines.join("");
}

/** `make_tsv`: one label a line, or with a header, the header and each row joined by tabs. */
export function metadataTsv(
  metadata: readonly (MetadataValue | readonly MetadataValue[])[],
  header?: readonly MetadataValue[],
): string {
  const lines = header
    ? [header, ...metadata as readonly (readonly MetadataValue[])[]].map((row) =>
      row.map(pyStr).join("\t")
    )
    : (metadata as readonly MetadataValue[]).map(pyStr);
  return lines.join("\n") + "\n";
}

/**
 * `make_sprite`'s image: the `[N, C, H, W]` images (C 1, shown as gray, or 3) in a grid of
 * ceil(sqrt(N)) columns, on a black square as wide as the grid, each value v the byte
 * `trunc(v · 255)` in float64 clipped to 0 to 255 (NaN: 0). The caller checks the grid's height
 * fits the square (PyTorch's numpy assignment fails otherwise).
 */
export function spritePixels(values: ArrayLike<number>, shape: readonly number[]): Pixels {
  const [n, c, h, w] = shape;
  const columns = Math.ceil(Math.sqrt(n));
  const side = w * columns;
  const data = new Uint8Array(side * side * 3);
  for (let i = 0; i < n; i++) {
    const [top, left] = [Math.floor(i / columns) * h, (i % columns) * w];
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const at = ((top + y) * side + left + x) * 3;
        for (let k = 0; k < 3; k++) {
          const v = values[((i * c + (c === 1 ? 0 : k)) * h + y) * w + x] * 255;
          data[at + k] = v >= 255 ? 255 : v > 0 ? Math.trunc(v) : 0;
        }
      }
    }
  }
  return { height: side, width: side, channels: 3, data };
}

/** The rows of `make_sprite`'s grid for `n` images of height `h`, and its square's side. */
export function spriteSize(n: number, h: number, w: number): { gridHeight: number; side: number } {
  const columns = Math.ceil(Math.sqrt(n));
  return { gridHeight: Math.ceil(n / columns) * h, side: w * columns };
}

/** One `EmbeddingInfo` of the projector config (`get_embedding_info`). */
export interface EmbeddingInfo {
  tensorName: string;
  tensorPath: string;
  metadataPath?: string;
  spritePath?: string;
  /** `[W, H]` of one image of the sprite. */
  singleImageDim?: [number, number];
}

/**
 * protobuf's text-format string (`text_format.MessageToString`, not as UTF-8): the UTF-8
 * bytes, with `\t \n \r \" \' \\` escaped and other bytes outside 32 to 126 as 3-digit octal.
 */
function textFormatString(s: string): string {
  const named: Record<number, string> = {
    9: "\\t",
    10: "\\n",
    13: "\\r",
    34: '\\"',
    39: "\\'",
    92: "\\\\",
  };
  let out = '"';
  for (const b of new TextEncoder().encode(s)) {
    out += named[b] ??
      (b < 32 || b >= 127 ? "\\" + b.toString(8).padStart(3, "0") : String.fromCharCode(b));
  }
  return out + '"';
}

/**
 * A `ProjectorConfig` of `embeddings` as `text_format.MessageToString` prints it: fields in
 * field-number order (tensor_name 1, metadata_path 2, sprite 5, tensor_path 6), two spaces an
 * indent level.
 */
export function projectorPbtxt(embeddings: readonly EmbeddingInfo[]): string {
  let out = "";
  for (const e of embeddings) {
    out += "embeddings {\n";
    out += `  tensor_name: ${textFormatString(e.tensorName)}\n`;
    if (e.metadataPath !== undefined) {
      out += `  metadata_path: ${textFormatString(e.metadataPath)}\n`;
    }
    if (e.spritePath !== undefined) {
      out += `  sprite {\n    image_path: ${textFormatString(e.spritePath)}\n`;
      for (const d of e.singleImageDim ?? []) out += `    single_image_dim: ${d}\n`;
      out += "  }\n";
    }
    out += `  tensor_path: ${textFormatString(e.tensorPath)}\n`;
    out += "}\n";
  }
  return out;
}
