/**
 * A portable byte encoding of JavaScript values for the object collectives
 * (PyTorch pickles; a browser bundle has no `node:v8` serializer, so this is
 * a small structured-clone encoder of its own). Internal to the distributed
 * layer.
 *
 * What round-trips exactly: `undefined`, `null`, booleans, numbers (NaN,
 * ±Infinity and -0 included), bigints, strings (lone surrogates included),
 * arrays (holes stay holes, but each costs a byte: a sparse array is sent
 * densely; other properties of an array are not sent),
 * plain objects and null-prototype objects (own enumerable string keys, in
 * order; getters are read), `Map`, `Set`, `Date`, `RegExp` (source and flags,
 * not `lastIndex`), `ArrayBuffer`, every typed array and `DataView`. Objects
 * met twice stay one object, cycles included. As with `structuredClone`, a
 * view sends its whole buffer (views that shared one still do) and
 * subclasses of the built-ins above arrive as the built-in. Anything else is
 * a TypeError naming the path to it. Typed arrays' bytes travel in the
 * sender's byte order (every platform this runs on is little-endian).
 * @module
 */

/** Options of {@link encodeValue}. */
export interface EncodeOptions {
  /** Prefix of error messages (the public function's name). */
  op?: string;
  /** Where the value is, for errors: its path from what the user passed (`[2]`); default none. */
  at?: string;
  /**
   * Why an object of an unsupported kind cannot be sent, for a better
   * message than the generic one (e.g. a Tensor: what to use instead);
   * `undefined` to keep the generic one.
   */
  describe?: (value: object) => string | undefined;
}

const FORMAT = 1;

// One byte before each value on the wire: append only.
const Tag = {
  Undefined: 0,
  Null: 1,
  False: 2,
  True: 3,
  Int: 4,
  Float: 5,
  BigInt: 6,
  String: 7,
  StringUtf16: 8,
  Array: 9,
  Object: 10,
  NullProtoObject: 11,
  Map: 12,
  Set: 13,
  Date: 14,
  RegExp: 15,
  ArrayBuffer: 16,
  View: 17,
  Ref: 18,
  Hole: 19,
} as const;

// Index = the kind's byte on the wire: append only.
const VIEW_KINDS = [
  "Int8Array",
  "Uint8Array",
  "Uint8ClampedArray",
  "Int16Array",
  "Uint16Array",
  "Int32Array",
  "Uint32Array",
  "Float32Array",
  "Float64Array",
  "BigInt64Array",
  "BigUint64Array",
  "DataView",
  "Float16Array",
] as const;

type ViewConstructor = new (
  buffer: ArrayBuffer,
  byteOffset: number,
  length: number,
) => ArrayBufferView;

function viewConstructor(kind: number): ViewConstructor | undefined {
  const name = VIEW_KINDS[kind];
  return name ? (globalThis as unknown as Record<string, ViewConstructor>)[name] : undefined;
}

// The tag, not the prototype, so that subclasses (a Node Buffer) count as their base.
function viewKind(view: ArrayBufferView): number {
  const name = view instanceof DataView
    ? "DataView"
    : (view as unknown as { [Symbol.toStringTag]: string })[Symbol.toStringTag];
  return VIEW_KINDS.indexOf(name as typeof VIEW_KINDS[number]);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function isWellFormed(s: string): boolean {
  const native = (s as { isWellFormed?: () => boolean }).isWellFormed;
  return native ? native.call(s) : !LONE_SURROGATE.test(s);
}

const utf8 = new TextEncoder();

class Writer {
  bytes = new Uint8Array(256);
  length = 0;
  #view = new DataView(this.bytes.buffer);

  reserve(n: number): void {
    if (this.length + n <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.length + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.#view = new DataView(grown.buffer);
  }

  byte(b: number): void {
    this.reserve(1);
    this.bytes[this.length++] = b;
  }

  /** An unsigned integer below 2^53, 7 bits a byte (LEB128). */
  varint(n: number): void {
    this.reserve(8);
    while (n >= 0x80) {
      this.bytes[this.length++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.bytes[this.length++] = n;
  }

  float64(x: number): void {
    this.reserve(8);
    this.#view.setFloat64(this.length, x, true);
    this.length += 8;
  }

  raw(part: Uint8Array): void {
    this.reserve(part.length);
    this.bytes.set(part, this.length);
    this.length += part.length;
  }

  string(s: string): void {
    if (isWellFormed(s)) {
      const encoded = utf8.encode(s);
      this.byte(Tag.String);
      this.varint(encoded.length);
      this.raw(encoded);
      return;
    }
    // UTF-8 cannot hold a lone surrogate (TextEncoder would write U+FFFD): code units as they are.
    this.byte(Tag.StringUtf16);
    this.varint(s.length);
    this.reserve(2 * s.length);
    for (let i = 0; i < s.length; i++) {
      const unit = s.charCodeAt(i);
      this.bytes[this.length++] = unit & 0xff;
      this.bytes[this.length++] = unit >> 8;
    }
  }
}

/** One step of the path to a value, formatted only when an error names it. */
type Step =
  | string
  | number
  | { entry: number; part: "key" | "value"; key: unknown }
  | { member: number };

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function formatPath(path: readonly Step[]): string {
  return path.map((step) => {
    if (typeof step === "number") return `[${step}]`;
    if (typeof step === "string") {
      return IDENTIFIER.test(step) ? `.${step}` : `[${JSON.stringify(step)}]`;
    }
    if ("member" in step) return `.<Set member ${step.member}>`;
    if (step.part === "value" && typeof step.key === "string") {
      return `.get(${JSON.stringify(step.key)})`;
    }
    if (step.part === "value" && (step.key === null || typeof step.key !== "object")) {
      return `.get(${String(step.key)}${typeof step.key === "bigint" ? "n" : ""})`;
    }
    return `.<Map entry ${step.entry} ${step.part}>`;
  }).join("");
}

const SUPPORTED =
  "only primitives, arrays, plain objects, Map, Set, Date, RegExp, ArrayBuffer, typed arrays and DataView can be sent";

function describeUnsupported(value: unknown, options: EncodeOptions): string {
  if (typeof value === "function") return "a function";
  if (typeof value === "symbol") return "a symbol";
  const obj = value as object;
  const custom = options.describe?.(obj);
  if (custom) return custom;
  if (typeof SharedArrayBuffer === "function" && obj instanceof SharedArrayBuffer) {
    return "a SharedArrayBuffer, whose memory cannot be shared with another rank: copy it into an ArrayBuffer";
  }
  const name = (Object.getPrototypeOf(obj) as { constructor?: { name?: string } } | null)
    ?.constructor?.name;
  return name && name !== "Object"
    ? `an instance of ${name}: ${SUPPORTED}`
    : `an object with a prototype other than Object.prototype: ${SUPPORTED}`;
}

class Encoder {
  readonly out = new Writer();
  readonly #ids = new Map<object, number>();
  readonly #path: Step[] = [];

  constructor(readonly options: EncodeOptions) {}

  #fail(value: unknown): never {
    const op = this.options.op ?? "encodeValue";
    const what = describeUnsupported(value, this.options);
    const path = (this.options.at ?? "") + formatPath(this.#path);
    const where = path === "" ? "cannot send the value" : `cannot send value at ${path}`;
    throw new TypeError(`${op}: ${where} (${what})`);
  }

  #at(step: Step, value: unknown): void {
    this.#path.push(step);
    this.value(value);
    this.#path.pop();
  }

  value(v: unknown): void {
    const out = this.out;
    switch (typeof v) {
      case "undefined":
        return out.byte(Tag.Undefined);
      case "boolean":
        return out.byte(v ? Tag.True : Tag.False);
      case "number":
        if (Number.isInteger(v) && Math.abs(v) < 2 ** 52 && !Object.is(v, -0)) {
          out.byte(Tag.Int);
          return out.varint(v >= 0 ? 2 * v : -2 * v - 1);
        }
        out.byte(Tag.Float);
        return out.float64(v);
      case "bigint": {
        out.byte(Tag.BigInt);
        return out.string(v.toString(16));
      }
      case "string":
        return out.string(v);
      case "function":
      case "symbol":
        return this.#fail(v);
    }
    if (v === null) return out.byte(Tag.Null);
    const obj = v as object;
    const id = this.#ids.get(obj);
    if (id !== undefined) {
      out.byte(Tag.Ref);
      return out.varint(id);
    }
    this.#object(obj);
  }

  #object(obj: object): void {
    const out = this.out;
    const proto = Object.getPrototypeOf(obj);
    const remember = () => this.#ids.set(obj, this.#ids.size);
    if (Array.isArray(obj)) {
      remember();
      out.byte(Tag.Array);
      out.varint(obj.length);
      for (let i = 0; i < obj.length; i++) {
        if (i in obj) this.#at(i, obj[i]);
        else out.byte(Tag.Hole);
      }
    } else if (proto === Object.prototype || proto === null) {
      remember();
      out.byte(proto === null ? Tag.NullProtoObject : Tag.Object);
      const keys = Object.keys(obj);
      out.varint(keys.length);
      for (const key of keys) {
        out.string(key);
        this.#at(key, (obj as Record<string, unknown>)[key]);
      }
    } else if (obj instanceof Map) {
      remember();
      out.byte(Tag.Map);
      out.varint(obj.size);
      let entry = 0;
      for (const [key, value] of obj) {
        this.#at({ entry, part: "key", key }, key);
        this.#at({ entry, part: "value", key }, value);
        entry++;
      }
    } else if (obj instanceof Set) {
      remember();
      out.byte(Tag.Set);
      out.varint(obj.size);
      let member = 0;
      for (const value of obj) this.#at({ member: member++ }, value);
    } else if (obj instanceof Date) {
      remember();
      out.byte(Tag.Date);
      out.float64(obj.getTime());
    } else if (obj instanceof RegExp) {
      remember();
      out.byte(Tag.RegExp);
      out.string(obj.source);
      out.string(obj.flags);
    } else if (obj instanceof ArrayBuffer) {
      remember();
      out.byte(Tag.ArrayBuffer);
      out.varint(obj.byteLength);
      out.raw(new Uint8Array(obj));
    } else if (ArrayBuffer.isView(obj) && viewKind(obj) >= 0) {
      remember();
      out.byte(Tag.View);
      out.byte(viewKind(obj));
      // The buffer as a value of its own: views that shared one still share it.
      this.#at("buffer", obj.buffer);
      out.varint(obj.byteOffset);
      out.varint(obj instanceof DataView ? obj.byteLength : (obj as Uint8Array).length);
    } else {
      this.#fail(obj);
    }
  }
}

/**
 * `value` as bytes that {@link decodeValue} turns back into an equal value
 * (see the module's doc for what can be sent). Throws a TypeError naming
 * the path to the first value that cannot be sent, e.g.
 * `op: cannot send value at .metrics.fn (a function)`.
 */
export function encodeValue(value: unknown, options: EncodeOptions = {}): Uint8Array {
  const encoder = new Encoder(options);
  encoder.out.byte(FORMAT);
  encoder.value(value);
  return encoder.out.bytes.subarray(0, encoder.out.length);
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true });

class Decoder {
  #at = 0;
  readonly #refs: unknown[] = [];
  readonly #view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  malformed(why: string): never {
    throw new RangeError(`decodeValue: malformed data at byte ${this.#at}: ${why}`);
  }

  get done(): boolean {
    return this.#at === this.bytes.length;
  }

  byte(): number {
    if (this.#at >= this.bytes.length) this.malformed("unexpected end");
    return this.bytes[this.#at++];
  }

  varint(): number {
    let n = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      n += (b & 0x7f) * scale;
      if (b < 0x80) return n;
      scale *= 0x80;
      if (scale > 2 ** 56) this.malformed("varint too long");
    }
  }

  take(n: number): Uint8Array {
    if (this.#at + n > this.bytes.length) this.malformed(`${n} bytes past the end`);
    const part = this.bytes.subarray(this.#at, this.#at + n);
    this.#at += n;
    return part;
  }

  float64(): number {
    const at = this.#at;
    this.take(8);
    return this.#view.getFloat64(at, true);
  }

  string(): string {
    const tag = this.byte();
    if (tag === Tag.String) return utf8Strict.decode(this.take(this.varint()));
    if (tag !== Tag.StringUtf16) this.malformed(`expected a string, got tag ${tag}`);
    const units = this.take(2 * this.varint());
    let s = "";
    for (let i = 0; i < units.length; i += 2 * 4096) {
      const chunk: number[] = [];
      for (let j = i; j < Math.min(units.length, i + 2 * 4096); j += 2) {
        chunk.push(units[j] | (units[j + 1] << 8));
      }
      s += String.fromCharCode(...chunk);
    }
    return s;
  }

  #register<T>(value: T): T {
    this.#refs.push(value);
    return value;
  }

  value(): unknown {
    const tag = this.byte();
    switch (tag) {
      case Tag.Undefined:
        return undefined;
      case Tag.Null:
        return null;
      case Tag.False:
        return false;
      case Tag.True:
        return true;
      case Tag.Int: {
        const z = this.varint();
        return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
      }
      case Tag.Float:
        return this.float64();
      case Tag.BigInt: {
        const hex = this.string();
        return hex.startsWith("-") ? -BigInt(`0x${hex.slice(1)}`) : BigInt(`0x${hex}`);
      }
      case Tag.String:
      case Tag.StringUtf16:
        this.#at--;
        return this.string();
      case Tag.Array: {
        const out = this.#register(new Array(this.varint()));
        for (let i = 0; i < out.length; i++) {
          if (this.bytes[this.#at] === Tag.Hole) this.#at++;
          else out[i] = this.value();
        }
        return out;
      }
      case Tag.Object:
      case Tag.NullProtoObject: {
        const out: Record<string, unknown> = this.#register(
          tag === Tag.Object ? {} : Object.create(null),
        );
        const n = this.varint();
        for (let i = 0; i < n; i++) {
          const key = this.string();
          const value = this.value();
          // Assigning "__proto__" would set the prototype instead of adding the key.
          if (key === "__proto__") {
            Object.defineProperty(out, key, {
              value,
              writable: true,
              enumerable: true,
              configurable: true,
            });
          } else out[key] = value;
        }
        return out;
      }
      case Tag.Map: {
        const out = this.#register(new Map());
        const n = this.varint();
        for (let i = 0; i < n; i++) {
          const key = this.value();
          out.set(key, this.value());
        }
        return out;
      }
      case Tag.Set: {
        const out = this.#register(new Set());
        const n = this.varint();
        for (let i = 0; i < n; i++) out.add(this.value());
        return out;
      }
      case Tag.Date:
        return this.#register(new Date(this.float64()));
      case Tag.RegExp: {
        const source = this.string();
        return this.#register(new RegExp(source, this.string()));
      }
      case Tag.ArrayBuffer: {
        const bytes = this.take(this.varint());
        return this.#register(bytes.slice().buffer);
      }
      case Tag.View: {
        const Kind = viewConstructor(this.byte());
        if (!Kind) this.malformed("a typed array kind this runtime lacks (Float16Array?)");
        // The view's number comes before its buffer's, as the encoder gave them.
        const id = this.#refs.push(undefined) - 1;
        const buffer = this.value();
        if (!(buffer instanceof ArrayBuffer)) {
          this.malformed("a view's buffer is not an ArrayBuffer");
        }
        const view = new Kind(buffer, this.varint(), this.varint());
        this.#refs[id] = view;
        return view;
      }
      case Tag.Ref: {
        const id = this.varint();
        if (id >= this.#refs.length) this.malformed(`reference to object ${id} before it`);
        return this.#refs[id];
      }
      default:
        return this.malformed(`unknown tag ${tag}`);
    }
  }
}

/** The value {@link encodeValue} encoded into `bytes`. */
export function decodeValue(bytes: Uint8Array): unknown {
  const decoder = new Decoder(bytes);
  const format = decoder.byte();
  if (format !== FORMAT) {
    decoder.malformed(`format ${format}, expected ${FORMAT} (ranks running different versions?)`);
  }
  const value = decoder.value();
  if (!decoder.done) decoder.malformed("bytes left after the value");
  return value;
}
