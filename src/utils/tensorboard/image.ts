/**
 * The images of `add_image` / `add_images`: PyTorch 1.13's layout rules
 * (`convert_to_HWC`, `make_grid`), its scaling to bytes, and a PNG encoder
 * (TensorBoard reads `Summary.Image` as an encoded image; PyTorch uses PIL). The
 * compression is the web's `CompressionStream` (zlib format), which the
 * browser bundle has too; `node:zlib` is Deno's and Node's only.
 * @module
 */

/** An image as rows of pixels, `channels` bytes a pixel (2: gray and alpha, 3: RGB, 4: RGBA). */
export interface Pixels {
  height: number;
  width: number;
  channels: 2 | 3 | 4;
  /** `height · width · channels` bytes, row by row. */
  data: Uint8Array;
}

/** What a `dataformats` string may hold for a tensor of `rank` dimensions. */
const LETTERS: Record<number, string> = { 2: "HW", 3: "HWC", 4: "NCHW" };

/**
 * The pixels of `values` (a tensor's elements in row-major order, of
 * `shape`) laid out as `dataformats` says, as PyTorch 1.13's
 * `convert_to_HWC` and `image`: 2 dims (`HW`) give gray RGB, 3 dims (`CHW`,
 * `HWC`...) 1 channel as gray RGB, 2 as gray and alpha, 3 as RGB, 4 as RGBA, 4 dims (`NCHW`...)
 * a grid of up to 8 images a row (`make_grid`, gray or RGB, black after
 * the last). Each value v becomes the byte `trunc(float32(v) · 255)`, kept
 * within 0 to 255 (1.13 does not clip: its cast wraps out-of-range values;
 * PyTorch 2 clips); NaN becomes 0. `method` names the caller in errors.
 */
export function imagePixels(
  values: ArrayLike<number>,
  shape: readonly number[],
  dataformats: string,
  method: string,
): Pixels {
  const { format, n, c, h, w } = checkImage(shape, dataformats, method);
  const strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const stride = (
    letter: string,
  ) => (format.includes(letter) ? strides[format.indexOf(letter)] : 0);
  const [sn, sc, sh, sw] = ["N", "C", "H", "W"].map(stride);
  const columns = Math.min(n, 8);
  const rows = Math.ceil(n / columns);
  const channels = c === 1 ? 3 : c as 2 | 3 | 4;
  const [height, width] = [h * rows, w * columns];
  const data = new Uint8Array(height * width * channels);
  for (let i = 0; i < n; i++) {
    const [top, left] = [Math.floor(i / columns) * h, (i % columns) * w];
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const at = ((top + y) * width + left + x) * channels;
        const from = i * sn + y * sh + x * sw;
        for (let k = 0; k < channels; k++) {
          data[at + k] = toByte(values[from + (c === 1 ? 0 : k * sc)]);
        }
      }
    }
  }
  return { height, width, channels, data };
}

/** `float32(v) · 255` in float32, truncated to a byte within 0 to 255 (NaN: 0). */
function toByte(v: number): number {
  const scaled = Math.fround(Math.fround(v) * 255);
  return scaled >= 255 ? 255 : scaled > 0 ? Math.trunc(scaled) : 0;
}

/**
 * The layout of an image tensor of `shape` under `dataformats` (upper-cased) and its sizes
 * (N and C are 1 where absent), or an error naming both: letters that do not fit the shape,
 * an empty dimension, or a channel count PIL would not take (1 to 4; 1 or 3 in a grid).
 */
export function checkImage(
  shape: readonly number[],
  dataformats: string,
  method: string,
): { format: string; n: number; c: number; h: number; w: number } {
  const format = typeof dataformats === "string" ? dataformats.toUpperCase() : "";
  const allowed = LETTERS[shape.length];
  const fits = allowed !== undefined && format.length === shape.length &&
    new Set(format).size === format.length && [...format].every((l) => allowed.includes(l));
  const where = `shape [${shape.join(", ")}], dataformats ${JSON.stringify(dataformats)}`;
  if (!fits) {
    throw new RangeError(
      `SummaryWriter.${method}: dataformats does not fit the image (${where}): it needs one letter per dimension, each once (2 dims: H and W as in "HW", 3 dims: C, H and W as in "CHW", 4 dims: N, C, H and W as in "NCHW")`,
    );
  }
  if (shape.some((d) => d === 0)) {
    throw new RangeError(`SummaryWriter.${method}: the image has no pixel (${where})`);
  }
  const [n, c, h, w] = ["N", "C", "H", "W"].map((
    l,
  ) => (format.includes(l) ? shape[format.indexOf(l)] : 1));
  if (!(c >= 1 && c <= 4) || (format.length === 4 && (c === 2 || c === 4))) {
    throw new RangeError(
      `SummaryWriter.${method}: an image needs 1 (gray)${
        format.length === 4 ? " or 3 (RGB)" : ", 2 (gray and alpha), 3 (RGB) or 4 (RGBA)"
      } channels, got ${c} (${where})`,
    );
  }
  return { format, n, c, h, w };
}

let crcTable: Uint32Array | undefined;

/** CRC-32 (ISO-HDLC, PNG's chunk checksum). */
export function crc32(bytes: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const b of bytes) crc = crcTable[(crc ^ b) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** One PNG chunk: length, type, data, CRC of type and data. */
function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  out.set(new TextEncoder().encode(type), 4);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

/** `pixels` as a PNG file: 8 bits a sample, unfiltered rows, zlib-compressed. */
export async function encodePng(pixels: Pixels): Promise<Uint8Array> {
  const { height, width, channels, data } = pixels;
  const header = new Uint8Array(13);
  const view = new DataView(header.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  header.set([8, { 2: 4, 3: 2, 4: 6 }[channels], 0, 0, 0], 8); // PNG colour types
  const row = width * channels;
  const raw = new Uint8Array(height * (row + 1));
  for (let y = 0; y < height; y++) {
    raw.set(data.subarray(y * row, (y + 1) * row), y * (row + 1) + 1);
  }
  return concat([
    Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a),
    chunk("IHDR", header),
    chunk("IDAT", await zlibCompress(raw)),
    chunk("IEND", new Uint8Array(0)),
  ]);
}

/** `parts` one after the other in one array. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `bytes` compressed in the zlib format (RFC 1950), as PNG's IDAT holds them. */
async function zlibCompress(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
