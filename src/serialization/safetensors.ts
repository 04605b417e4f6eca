/**
 * The safetensors file format (https://github.com/huggingface/safetensors),
 * on plain typed-array records so that it stays independent of `Tensor`.
 *
 * Layout: an 8-byte little-endian header length `N`, `N` bytes of UTF-8 JSON
 * (padded with spaces so the data starts 8-byte aligned), then the raw
 * little-endian tensor data, C order.
 *
 * @module
 */

/** A tensor as the codec sees it: a dtype, a shape and its elements in C order. */
export interface RawTensor {
  /** The element type. */
  dtype: "float32" | "int32" | "float64";
  /** The dimensions; `[]` for a scalar. */
  shape: number[];
  /** The elements, `shape`'s product of them. */
  data: Float32Array | Int32Array | Float64Array;
}

/** The result of {@linkcode decodeSafetensors}. */
export interface DecodedSafetensors {
  /** The tensors by name. */
  tensors: Record<string, RawTensor>;
  /** The `__metadata__` string map; `{}` when the file has none. */
  metadata: Record<string, string>;
}

/** Raised for a malformed safetensors file or for input the encoder cannot write. */
export class SafetensorsError extends Error {
  /** Creates the error; the message is prefixed with `safetensors: `. */
  constructor(message: string) {
    super(`safetensors: ${message}`);
    this.name = "SafetensorsError";
  }
}

type Dtype = RawTensor["dtype"];
type FileDtype = "F32" | "I32" | "F64" | "I64" | "F16" | "BF16";

interface DtypeInfo {
  dtype: Dtype;
  tag: FileDtype;
  size: number;
  // Rank in the reference implementation's `Dtype` enum, which it declares in
  // increasing alignment order and sorts by, descending, when it writes.
  rank: number;
}

const BY_DTYPE: Record<Dtype, DtypeInfo> = {
  int32: { dtype: "int32", tag: "I32", size: 4, rank: 0 },
  float32: { dtype: "float32", tag: "F32", size: 4, rank: 1 },
  float64: { dtype: "float64", tag: "F64", size: 8, rank: 2 },
};

const BY_TAG: Record<FileDtype, DtypeInfo> = {
  F32: BY_DTYPE.float32,
  I32: BY_DTYPE.int32,
  F64: BY_DTYPE.float64,
  // Read only, converted on load, so PyTorch's files load as they are: int64 (BatchNorm's
  // num_batches_tracked, labels) narrows to int32 when every value fits, else it is an error;
  // half precision widens to float32 exactly. (The rank only orders what is written.)
  I64: { dtype: "int32", tag: "I64", size: 8, rank: -1 },
  F16: { dtype: "float32", tag: "F16", size: 2, rank: -1 },
  BF16: { dtype: "float32", tag: "BF16", size: 2, rank: -1 },
};

const SUPPORTED_TAGS = "F32, I32, F64 (and I64, F16, BF16, converted on load)";

// Valid in the format but not representable here; naming them lets the error
// tell "convert before saving" apart from "this file is damaged".
const OTHER_FORMAT_TAGS = new Set([
  "BOOL",
  "U8",
  "I8",
  "F8_E5M2",
  "F8_E4M3",
  "F8_E8M0",
  "F4",
  "F6_E2M3",
  "F6_E3M2",
  "I16",
  "U16",
  "U32",
  "C64",
  "U64",
]);

const METADATA_KEY = "__metadata__";

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const utf8Encoder = new TextEncoder();

function hasTag(tag: string): tag is FileDtype {
  return Object.prototype.hasOwnProperty.call(BY_TAG, tag);
}

function hasDtype(dtype: string): dtype is Dtype {
  return Object.prototype.hasOwnProperty.call(BY_DTYPE, dtype);
}

// Plain assignment would treat a tensor named "__proto__" as a prototype
// change instead of an entry.
function setEntry<T>(record: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(record, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

function formatShape(shape: readonly unknown[]): string {
  return `[${shape.map((d) => JSON.stringify(d)).join(", ")}]`;
}

function isDimension(d: unknown): d is number {
  return typeof d === "number" && Number.isSafeInteger(d) && d >= 0;
}

// The reference orders names by their UTF-8 bytes, which is code point order;
// JavaScript's `<` compares UTF-16 units and disagrees above U+FFFF.
function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const ca = ia.next();
    const cb = ib.next();
    if (ca.done || cb.done) return (ca.done ? 0 : 1) - (cb.done ? 0 : 1);
    const diff = ca.value.codePointAt(0)! - cb.value.codePointAt(0)!;
    if (diff !== 0) return diff;
  }
}

function expectedArrayName(dtype: Dtype): string {
  switch (dtype) {
    case "float32":
      return "Float32Array";
    case "int32":
      return "Int32Array";
    case "float64":
      return "Float64Array";
  }
}

function matchesDtype(data: unknown, dtype: Dtype): boolean {
  switch (dtype) {
    case "float32":
      return data instanceof Float32Array;
    case "int32":
      return data instanceof Int32Array;
    case "float64":
      return data instanceof Float64Array;
  }
}

function checkName(name: string, where: string): void {
  if (name === METADATA_KEY) {
    throw new SafetensorsError(
      `${where} "${METADATA_KEY}" is reserved for the file's metadata`,
    );
  }
  if (!name.isWellFormed()) {
    throw new SafetensorsError(
      `${where} ${JSON.stringify(name)} is not valid Unicode (lone surrogate)`,
    );
  }
}

function writeElements(
  out: Uint8Array,
  offset: number,
  data: Float32Array | Int32Array | Float64Array,
): void {
  if (LITTLE_ENDIAN_HOST) {
    out.set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      offset,
    );
    return;
  }
  const view = new DataView(
    out.buffer,
    out.byteOffset + offset,
    data.byteLength,
  );
  if (data instanceof Float32Array) {
    for (let i = 0; i < data.length; i++) view.setFloat32(i * 4, data[i], true);
  } else if (data instanceof Int32Array) {
    for (let i = 0; i < data.length; i++) view.setInt32(i * 4, data[i], true);
  } else {
    for (let i = 0; i < data.length; i++) view.setFloat64(i * 8, data[i], true);
  }
}

/**
 * Serializes tensors (and optional string metadata) to safetensors bytes.
 *
 * The output matches the reference implementation byte for byte: compact JSON
 * header with `__metadata__` first, padded with spaces to a multiple of 8,
 * data ordered by dtype alignment (F64, then F32, then I32) and then by name.
 * Metadata keys are written sorted, because the reference leaves their order
 * unspecified and sorted keys make the bytes reproducible.
 *
 * @throws {SafetensorsError} for a reserved or malformed name, a dtype the
 * format cannot hold, a typed array that does not match the dtype, an invalid
 * shape, a length that does not match the shape, or a non-string metadata value.
 */
export function encodeSafetensors(
  tensors: Record<string, RawTensor>,
  metadata?: Record<string, string>,
): Uint8Array {
  const entries: Array<{ name: string; tensor: RawTensor; info: DtypeInfo }> = [];
  for (const [name, tensor] of Object.entries(tensors)) {
    checkName(name, "tensor name");
    const dtype: string = tensor.dtype;
    if (!hasDtype(dtype)) {
      throw new SafetensorsError(
        `tensor "${name}" has dtype ${JSON.stringify(dtype)}; supported dtypes: ` +
          Object.keys(BY_DTYPE).join(", "),
      );
    }
    if (!Array.isArray(tensor.shape) || !tensor.shape.every(isDimension)) {
      throw new SafetensorsError(
        `tensor "${name}" has shape ${formatShape(tensor.shape ?? [])}: ` +
          "every dimension must be a non-negative integer",
      );
    }
    if (!matchesDtype(tensor.data, dtype)) {
      throw new SafetensorsError(
        `tensor "${name}" has dtype ${dtype}, so its data must be a ` +
          `${expectedArrayName(dtype)}, got ${
            (tensor.data as object | undefined)?.constructor?.name ??
              typeof tensor.data
          }`,
      );
    }
    const numel = tensor.shape.reduce((a, b) => a * b, 1);
    if (tensor.data.length !== numel) {
      throw new SafetensorsError(
        `tensor "${name}" has shape ${formatShape(tensor.shape)} (${numel} ` +
          `elements) but its data holds ${tensor.data.length}`,
      );
    }
    entries.push({ name, tensor, info: BY_DTYPE[dtype] });
  }
  entries.sort((a, b) => b.info.rank - a.info.rank || compareCodePoints(a.name, b.name));

  const parts: string[] = [];
  if (metadata !== undefined) {
    const keys = Object.keys(metadata).sort(compareCodePoints);
    const fields: string[] = [];
    for (const key of keys) {
      const value: unknown = metadata[key];
      if (
        !key.isWellFormed() || typeof value !== "string" ||
        !value.isWellFormed()
      ) {
        throw new SafetensorsError(
          `metadata ${JSON.stringify(key)} must map a well-formed key to a ` +
            `well-formed string, got ${typeof value}`,
        );
      }
      fields.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    }
    parts.push(`"${METADATA_KEY}":{${fields.join(",")}}`);
  }
  let offset = 0;
  for (const { name, tensor, info } of entries) {
    const end = offset + tensor.data.length * info.size;
    parts.push(
      `${JSON.stringify(name)}:{"dtype":"${info.tag}","shape":[${
        tensor.shape.join(",")
      }],"data_offsets":[${offset},${end}]}`,
    );
    offset = end;
  }
  const json = utf8Encoder.encode(`{${parts.join(",")}}`);
  const headerLength = Math.ceil(json.length / 8) * 8;

  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLength);
  let at = 8 + headerLength;
  for (const { tensor } of entries) {
    writeElements(out, at, tensor.data);
    at += tensor.data.byteLength;
  }
  return out;
}

interface Placed {
  name: string;
  info: DtypeInfo;
  shape: number[];
  begin: number;
  end: number;
}

/** I64, F16 and BF16 elements as int32 / float32 (see `BY_TAG`). */
function convertElements(view: DataView, count: number, p: Placed): Int32Array | Float32Array {
  if (p.info.tag === "I64") {
    const out = new Int32Array(count);
    for (let i = 0; i < count; i++) {
      const value = view.getBigInt64(i * 8, true);
      if (value < -2147483648n || value > 2147483647n) {
        throw new SafetensorsError(
          `${describe(p)}: element ${i} is ${value}, outside int32, the integer dtype here`,
        );
      }
      out[i] = Number(value);
    }
    return out;
  }
  const out = new Float32Array(count);
  const bits = new Uint32Array(1);
  const asFloat = new Float32Array(bits.buffer);
  for (let i = 0; i < count; i++) {
    const h = view.getUint16(i * 2, true);
    if (p.info.tag === "BF16") {
      bits[0] = h << 16; // bfloat16 is float32's upper half
      out[i] = asFloat[0];
      continue;
    }
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const fraction = h & 0x3ff;
    out[i] = exponent === 0
      ? sign * fraction * 2 ** -24
      : exponent === 31
      ? (fraction ? NaN : sign * Infinity)
      : sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }
  return out;
}

function describe(p: Placed): string {
  return `tensor "${p.name}" (${p.info.tag}, shape ${formatShape(p.shape)}, ` +
    `bytes [${p.begin}, ${p.end}))`;
}

function readElements(
  bytes: Uint8Array,
  start: number,
  p: Placed,
): Float32Array | Int32Array | Float64Array {
  const count = (p.end - p.begin) / p.info.size;
  // A fresh copy is always aligned, never aliases the caller's buffer (which
  // may be reused) and does not keep the whole file alive.
  const copy = bytes.slice(start + p.begin, start + p.end);
  if (p.info.rank < 0) return convertElements(new DataView(copy.buffer), count, p);
  if (LITTLE_ENDIAN_HOST) {
    switch (p.info.dtype) {
      case "float32":
        return new Float32Array(copy.buffer, 0, count);
      case "int32":
        return new Int32Array(copy.buffer, 0, count);
      case "float64":
        return new Float64Array(copy.buffer, 0, count);
    }
  }
  const view = new DataView(copy.buffer);
  switch (p.info.dtype) {
    case "float32":
      return Float32Array.from(
        { length: count },
        (_, i) => view.getFloat32(i * 4, true),
      );
    case "int32":
      return Int32Array.from(
        { length: count },
        (_, i) => view.getInt32(i * 4, true),
      );
    case "float64":
      return Float64Array.from(
        { length: count },
        (_, i) => view.getFloat64(i * 8, true),
      );
  }
}

function parseMetadata(value: unknown): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new SafetensorsError(
      `"${METADATA_KEY}" must be an object of strings, got ${JSON.stringify(value)}`,
    );
  }
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== "string") {
      throw new SafetensorsError(
        `"${METADATA_KEY}" entry "${key}" must be a string, got ${JSON.stringify(v)}`,
      );
    }
    setEntry(out, key, v);
  }
  return out;
}

function parseEntry(name: string, value: unknown, dataLength: number): Placed {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new SafetensorsError(
      `tensor "${name}": header entry must be an object with dtype, shape and ` +
        `data_offsets, got ${JSON.stringify(value)}`,
    );
  }
  const { dtype, shape, data_offsets: offsets } = value as Record<
    string,
    unknown
  >;
  if (typeof dtype !== "string") {
    throw new SafetensorsError(
      `tensor "${name}": dtype must be a string, got ${JSON.stringify(dtype)}`,
    );
  }
  if (!hasTag(dtype)) {
    const kind = OTHER_FORMAT_TAGS.has(dtype)
      ? "a safetensors dtype multigrad does not support"
      : "not a safetensors dtype";
    throw new SafetensorsError(
      `tensor "${name}" has dtype "${dtype}" (${kind}); supported dtypes: ${SUPPORTED_TAGS}`,
    );
  }
  const info = BY_TAG[dtype];
  if (!Array.isArray(shape) || !shape.every(isDimension)) {
    throw new SafetensorsError(
      `tensor "${name}" (${dtype}) has shape ${
        Array.isArray(shape) ? formatShape(shape) : JSON.stringify(shape)
      }: every dimension must be a non-negative integer`,
    );
  }
  if (
    !Array.isArray(offsets) || offsets.length !== 2 ||
    !offsets.every(isDimension)
  ) {
    throw new SafetensorsError(
      `tensor "${name}" (${dtype}, shape ${formatShape(shape)}) has data_offsets ` +
        `${JSON.stringify(offsets)}: expected [begin, end], two non-negative integers`,
    );
  }
  const [begin, end] = offsets as number[];
  const placed: Placed = { name, info, shape: shape.slice(), begin, end };
  if (end < begin) {
    throw new SafetensorsError(
      `tensor "${name}" (${dtype}, shape ${formatShape(shape)}) has data_offsets ` +
        `[${begin}, ${end}]: end comes before begin`,
    );
  }
  const numel = shape.reduce((a: number, b: number) => a * b, 1);
  const needed = numel * info.size;
  if (!Number.isSafeInteger(needed)) {
    throw new SafetensorsError(
      `${describe(placed)}: shape has too many elements to be a real tensor`,
    );
  }
  if (needed !== end - begin) {
    throw new SafetensorsError(
      `${describe(placed)}: shape and dtype need ${needed} bytes but the ` +
        `data_offsets span ${end - begin}`,
    );
  }
  if (end > dataLength) {
    throw new SafetensorsError(
      `${describe(placed)}: data_offsets are out of range, the data section ` +
        `holds only ${dataLength} bytes`,
    );
  }
  return placed;
}

/**
 * Parses safetensors bytes. Any layout the format allows is accepted (header
 * entries in any order, data not aligned); each returned array is a fresh,
 * aligned copy that owns its memory.
 *
 * @throws {SafetensorsError} naming the problem: a file shorter than the
 * 8-byte length prefix, a header length past the end of the file, a header
 * that is not UTF-8 JSON, an unsupported dtype, an invalid shape, offsets that
 * do not match shape and dtype or fall outside the data, and data regions that
 * overlap, leave gaps, or leave bytes uncovered.
 */
export function decodeSafetensors(bytes: Uint8Array): DecodedSafetensors {
  if (bytes.length < 8) {
    throw new SafetensorsError(
      `file is truncated: ${bytes.length} bytes, but the header length prefix ` +
        "alone takes 8",
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const declared = view.getBigUint64(0, true);
  if (declared > BigInt(bytes.length - 8)) {
    throw new SafetensorsError(
      `header length ${declared} is larger than the ${bytes.length - 8} bytes ` +
        "that follow it (truncated file, or not a safetensors file)",
    );
  }
  const headerLength = Number(declared);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(
      bytes.subarray(8, 8 + headerLength),
    );
  } catch {
    throw new SafetensorsError("header is not valid UTF-8");
  }
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(
      `header is not valid JSON (${e instanceof Error ? e.message : String(e)})`,
    );
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new SafetensorsError("header must be a JSON object");
  }

  const start = 8 + headerLength;
  const dataLength = bytes.length - start;
  let metadata: Record<string, string> = {};
  const placed: Placed[] = [];
  for (const [name, value] of Object.entries(header)) {
    if (name === METADATA_KEY) metadata = parseMetadata(value);
    else placed.push(parseEntry(name, value, dataLength));
  }

  // The format needs the regions to tile the data section exactly, in any
  // header order; zero-byte tensors may sit anywhere.
  const ordered = placed.slice().sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  let previous: Placed | undefined;
  for (const p of ordered) {
    if (p.begin < covered && previous !== undefined) {
      throw new SafetensorsError(
        `${describe(p)} overlaps ${describe(previous)}`,
      );
    }
    if (p.begin > covered) {
      throw new SafetensorsError(
        `data is not contiguous: bytes [${covered}, ${p.begin}) before ` +
          `${describe(p)} belong to no tensor`,
      );
    }
    covered = p.end;
    if (p.end > p.begin) previous = p;
  }
  if (covered !== dataLength) {
    throw new SafetensorsError(
      `data is not contiguous: ${dataLength - covered} trailing bytes ` +
        `[${covered}, ${dataLength}) belong to no tensor`,
    );
  }

  const tensors: Record<string, RawTensor> = {};
  for (const p of placed) {
    setEntry(tensors, p.name, {
      dtype: p.info.dtype,
      shape: p.shape,
      data: readElements(bytes, start, p),
    });
  }
  return { tensors, metadata };
}

function randomSuffix(): string {
  const raw = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function syncDirectory(dir: string): Promise<void> {
  // Makes the rename itself durable; directories cannot be opened this way on
  // every platform (Windows), where the rename is the best we can do.
  try {
    const handle = await Deno.open(dir, { read: true });
    try {
      await handle.sync();
    } finally {
      handle.close();
    }
  } catch {
    // best effort only
  }
}

// Temporary files this process is writing now.
const writing = new Set<string>();

/** Whether process `pid` runs (as far as this platform lets us tell). */
async function processRuns(pid: number, temp: string): Promise<boolean> {
  if (Deno.build.os === "linux") {
    try {
      await Deno.stat(`/proc/${pid}`);
      return true;
    } catch (e) {
      return !(e instanceof Deno.errors.NotFound);
    }
  }
  // Elsewhere: a temporary untouched for ten minutes is taken as abandoned.
  const { mtime } = await Deno.stat(temp);
  return mtime === null || Date.now() - mtime.getTime() < 10 * 60_000;
}

/**
 * Removes what killed earlier saves of `base` in `prefix` left: temporary
 * files of the same target whose writer is gone (it was killed before it
 * could rename or remove them). A writer still running is left alone. Best
 * effort: what cannot be listed or removed stays.
 */
async function removeStaleTemporaries(prefix: string, base: string): Promise<void> {
  const escaped = base.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(`^\\.${escaped}\\.(?:(\\d+)-)?[0-9a-f]{12}\\.tmp$`);
  try {
    for await (const entry of Deno.readDir(prefix === "" ? "." : prefix)) {
      const match = pattern.exec(entry.name);
      const temp = prefix + entry.name;
      if (!match || !entry.isFile || writing.has(temp)) continue;
      const pid = match[1] === undefined ? null : Number(match[1]);
      // This process's own: a save still running in another Worker of it (each has its own
      // `writing`), since a writer of this process that failed removed its temporary.
      if (pid === Deno.pid || (pid !== null && await processRuns(pid, temp))) continue;
      await Deno.remove(temp).catch(() => {});
    }
  } catch {
    // best effort only
  }
}

/**
 * Replaces the file at `path` with `bytes` atomically: the bytes go to a
 * temporary file in the same directory, which is flushed to disk and then
 * renamed over `path`. Readers see either the old file or the new one, never a
 * truncated one; on failure the temporary file is removed and the old file is
 * left as it was. A temporary that an earlier, killed write of the same
 * `path` left behind is removed first. An existing file's permission bits
 * are kept. Needs Deno (read and write permission for the directory).
 *
 * @throws {Error} naming `path`, with the underlying error as `cause`.
 */
export async function writeFileAtomic(
  path: string,
  bytes: Uint8Array,
): Promise<void> {
  if (typeof Deno === "undefined") {
    throw new Error("writeFileAtomic needs Deno's file system API");
  }
  const windows = Deno.build.os === "windows";
  const cut = Math.max(
    path.lastIndexOf("/"),
    windows ? path.lastIndexOf("\\") : -1,
  );
  const prefix = path.slice(0, cut + 1);
  const base = path.slice(cut + 1);
  if (base === "" || base === "." || base === "..") {
    throw new Error(`writeFileAtomic: "${path}" does not name a file`);
  }
  // The writer's process id lets a later save tell a killed writer's
  // temporary from a running one's.
  const temp = `${prefix}.${base}.${Deno.pid}-${randomSuffix()}.tmp`;
  await removeStaleTemporaries(prefix, base);

  let file: Deno.FsFile | undefined;
  let created = false;
  writing.add(temp);
  try {
    let mode: number | null = null;
    try {
      const old = await Deno.stat(path);
      if (old.isFile) mode = old.mode;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    file = await Deno.open(temp, { write: true, createNew: true });
    created = true;
    if (mode !== null && !windows) await Deno.chmod(temp, mode & 0o7777);
    let written = 0;
    while (written < bytes.length) {
      written += await file.write(bytes.subarray(written));
    }
    if (typeof file.sync === "function") await file.sync();
    file.close();
    file = undefined;
    await Deno.rename(temp, path);
    created = false;
  } catch (e) {
    try {
      file?.close();
    } catch {
      // already closed
    }
    if (created) await Deno.remove(temp).catch(() => {});
    throw new Error(
      `writeFileAtomic: could not write "${path}": ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  } finally {
    writing.delete(temp);
  }
  await syncDirectory(prefix === "" ? "." : prefix);
}
