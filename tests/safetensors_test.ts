import assert from "node:assert/strict";
import {
  decodeSafetensors,
  encodeSafetensors,
  type RawTensor,
  SafetensorsError,
  writeFileAtomic,
} from "../src/serialization/safetensors.ts";
import { PYTHON, pythonHasTorch } from "./torch_python.ts";

const FIXTURES = new URL("./fixtures/", import.meta.url);

const utf8 = new TextEncoder();
const latin = new TextDecoder();

function f32(shape: number[], values: number[]): RawTensor {
  return { dtype: "float32", shape, data: Float32Array.from(values) };
}
function i32(shape: number[], values: number[]): RawTensor {
  return { dtype: "int32", shape, data: Int32Array.from(values) };
}
function f64(shape: number[], values: number[]): RawTensor {
  return { dtype: "float64", shape, data: Float64Array.from(values) };
}

/** Compares element bits, so -0, NaN and Infinity count exactly. */
function assertSameTensor(
  actual: RawTensor | undefined,
  expected: RawTensor,
  name = "",
): void {
  assert.ok(actual, `missing tensor ${name}`);
  assert.equal(actual.dtype, expected.dtype, name);
  assert.deepEqual(actual.shape, expected.shape, name);
  assert.equal(actual.data.constructor, expected.data.constructor, name);
  assert.deepEqual(
    new Uint8Array(
      actual.data.buffer,
      actual.data.byteOffset,
      actual.data.byteLength,
    ),
    new Uint8Array(
      expected.data.buffer,
      expected.data.byteOffset,
      expected.data.byteLength,
    ),
    name,
  );
}

/** A file with a hand-written header (object or raw text) and data bytes. */
function craft(
  header: unknown,
  data: Uint8Array = new Uint8Array(),
  declaredLength?: bigint,
): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const json = utf8.encode(text);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(
    0,
    declaredLength ?? BigInt(json.length),
    true,
  );
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function assertRejects(bytes: Uint8Array, ...patterns: RegExp[]): void {
  let error: unknown;
  try {
    decodeSafetensors(bytes);
  } catch (e) {
    error = e;
  }
  assert.ok(
    error instanceof SafetensorsError,
    `expected a SafetensorsError, got ${error}`,
  );
  for (const p of patterns) assert.match(error.message, p);
}

function headerOf(bytes: Uint8Array): string {
  const n = Number(
    new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true),
  );
  return latin.decode(bytes.subarray(8, 8 + n));
}

// Same literals as fixture_tensors() in fixtures/make_safetensors_fixture.py.
const FIXTURE_TENSORS: Record<string, RawTensor> = {
  "weight": f32([2, 3], [0.1, -2.5, 3.25, 1e-8, -0, Infinity]),
  "bias": f32([3], [65504.5, -1.0e30, 1.5]),
  "a.f64": f64([2, 2], [1 / 3, -1e300, 5e-324, Math.PI]),
  "counts": i32([4], [-2147483648, 2147483647, 0, -1]),
  "scalar": f32([], [42.5]),
  "step": i32([], [7]),
  "empty": f32([0, 3], []),
  "Zed": f32([1], [2]),
  "\u00fcber.weight": f32([1], [-3]),
  'quote"back\\slash': f32([1], [9]),
};
const FIXTURE_METADATA = { format: "pt", note: "multigrad fixture \u2713" };

// ---------------------------------------------------------------- round trips

for (
  const [label, tensor] of [
    ["float32", f32([2, 3], [1.5, -2, 0.1, 3.4e38, -0, NaN])],
    ["int32", i32([3, 1], [-2147483648, 0, 2147483647])],
    ["float64", f64([2], [Math.PI, -Number.MAX_VALUE])],
  ] as const
) {
  Deno.test(`round trip: ${label}`, () => {
    const decoded = decodeSafetensors(encodeSafetensors({ t: tensor }));
    assertSameTensor(decoded.tensors.t, tensor);
    assert.deepEqual(decoded.metadata, {});
  });
}

Deno.test("round trip: several tensors of mixed dtypes", () => {
  const tensors = {
    "0.weight": f32([3, 4], Array.from({ length: 12 }, (_, i) => i / 7)),
    "0.bias": f32([3], [1, 2, 3]),
    "running_var": f64([4], [0.5, 1, 2, 4]),
    "num_batches_tracked": i32([], [2]),
  };
  const decoded = decodeSafetensors(encodeSafetensors(tensors));
  assert.deepEqual(
    Object.keys(decoded.tensors).sort(),
    Object.keys(tensors).sort(),
  );
  for (const [name, t] of Object.entries(tensors)) {
    assertSameTensor(decoded.tensors[name], t, name);
  }
});

Deno.test("round trip: empty tensors and scalars", () => {
  const tensors = {
    e1: f32([0], []),
    e2: i32([2, 0, 3], []),
    e3: f64([0], []),
    s32: f32([], [-7.25]),
    si: i32([], [-1]),
    s64: f64([], [1e-300]),
  };
  const bytes = encodeSafetensors(tensors);
  const decoded = decodeSafetensors(bytes);
  for (const [name, t] of Object.entries(tensors)) {
    assertSameTensor(decoded.tensors[name], t, name);
  }
  assert.match(headerOf(bytes), /"s32":\{"dtype":"F32","shape":\[\],/);
  assert.match(headerOf(bytes), /"e2":\{"dtype":"I32","shape":\[2,0,3\],/);
});

Deno.test("round trip: no tensors at all", () => {
  const bytes = encodeSafetensors({});
  // `{}` padded to 8 bytes, as the reference writes an empty file.
  assert.deepEqual(
    bytes,
    Uint8Array.of(8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32),
  );
  assert.deepEqual(decodeSafetensors(bytes), { tensors: {}, metadata: {} });
});

Deno.test("round trip: metadata", () => {
  const metadata = {
    format: "pt",
    'é "quoted"\n': "line\u0001 two ✓",
    empty: "",
  };
  const bytes = encodeSafetensors({ x: f32([1], [1]) }, metadata);
  assert.deepEqual(decodeSafetensors(bytes).metadata, metadata);
  // __metadata__ comes first, keys sorted for reproducible bytes.
  assert.ok(
    headerOf(bytes).startsWith('{"__metadata__":{"empty":"","format":"pt","é'),
  );
  // Omitted metadata writes no __metadata__ entry; empty metadata writes an empty one.
  assert.ok(!headerOf(encodeSafetensors({})).includes("__metadata__"));
  assert.ok(
    headerOf(encodeSafetensors({}, {})).startsWith('{"__metadata__":{}}'),
  );
  assert.deepEqual(decodeSafetensors(encodeSafetensors({}, {})).metadata, {});
});

Deno.test("round trip: names that look like object internals stay plain entries", () => {
  const tensors = JSON.parse(
    '{"__proto__": 1, "constructor": 2, "toString": 3}',
  ) as Record<string, number>;
  const raw: Record<string, RawTensor> = {};
  for (const [name, v] of Object.entries(tensors)) {
    Object.defineProperty(raw, name, {
      value: f32([1], [v]),
      enumerable: true,
    });
  }
  const decoded = decodeSafetensors(encodeSafetensors(raw));
  assert.deepEqual(Object.keys(decoded.tensors).sort(), [
    "__proto__",
    "constructor",
    "toString",
  ]);
  assert.equal(Object.getPrototypeOf(decoded.tensors), Object.prototype);
  assert.equal(
    Object.getOwnPropertyDescriptor(decoded.tensors, "__proto__")?.value
      .data[0],
    1,
  );
});

Deno.test("encode: typed-array views write only their own elements", () => {
  const backing = Float32Array.from([9, 1, 2, 3, 9]);
  const view = backing.subarray(1, 4);
  const decoded = decodeSafetensors(
    encodeSafetensors({ v: { dtype: "float32", shape: [3], data: view } }),
  );
  assert.deepEqual(Array.from(decoded.tensors.v.data), [1, 2, 3]);
});

// -------------------------------------------------------------- exact layout

Deno.test("layout: header is compact JSON padded with spaces to 8-byte alignment", () => {
  const bytes = encodeSafetensors({
    "attn0": f32([1, 1, 2, 3], [0, 1, 2, 3, 4, 5]),
  });
  const json = '{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}';
  const padded = json + " ".repeat((8 - (json.length % 8)) % 8);
  assert.equal(padded.length % 8, 0);
  assert.equal(
    new DataView(bytes.buffer).getBigUint64(0, true),
    BigInt(padded.length),
  );
  assert.equal(headerOf(bytes), padded);
  assert.equal(bytes.length, 8 + padded.length + 24);
  // Little-endian 1.0f at element 1.
  assert.deepEqual(
    Array.from(bytes.subarray(8 + padded.length + 4, 8 + padded.length + 8)),
    [0, 0, 128, 63],
  );
});

Deno.test("layout: data ordered by dtype alignment (F64, F32, I32), then by name", () => {
  const bytes = encodeSafetensors({
    "b_i32": i32([1], [1]),
    "a_i32": i32([2], [1, 2]),
    "z_f32": f32([1], [1]),
    "y_f64": f64([1], [1]),
    "c_f32": f32([3], [1, 2, 3]),
    "x_f64": f64([2], [1, 2]),
  });
  const header = JSON.parse(headerOf(bytes)) as Record<
    string,
    { data_offsets: number[] }
  >;
  assert.deepEqual(Object.keys(header), [
    "x_f64",
    "y_f64",
    "c_f32",
    "z_f32",
    "a_i32",
    "b_i32",
  ]);
  assert.deepEqual(Object.values(header).map((e) => e.data_offsets), [
    [0, 16],
    [16, 24],
    [24, 36],
    [36, 40],
    [40, 48],
    [48, 52],
  ]);
});

Deno.test("layout: names sort by code point (UTF-8 byte order), not UTF-16 units", () => {
  // U+FF61 < U+1F600 by code point, but its UTF-16 unit 0xFF61 > 0xD83D.
  const bytes = encodeSafetensors({
    "\u{1F600}": f32([1], [1]),
    "\uFF61": f32([1], [2]),
    "B": f32([1], [3]),
    "a": f32([1], [4]),
  });
  assert.deepEqual(Object.keys(JSON.parse(headerOf(bytes))), [
    "B",
    "a",
    "\uFF61",
    "\u{1F600}",
  ]);
});

// ------------------------------------------------- compatibility with PyTorch

Deno.test("fixture: encoder output is byte-identical to the Python-written reference file", async () => {
  const reference = await Deno.readFile(
    new URL("safetensors_reference.safetensors", FIXTURES),
  );
  assert.deepEqual(
    encodeSafetensors(FIXTURE_TENSORS, FIXTURE_METADATA),
    reference,
  );
});

for (
  const file of [
    "safetensors_reference.safetensors",
    "safetensors_any_layout.safetensors",
  ]
) {
  Deno.test(`fixture: decodes ${file} written with PyTorch`, async () => {
    const bytes = await Deno.readFile(new URL(file, FIXTURES));
    const { tensors, metadata } = decodeSafetensors(bytes);
    assert.deepEqual(metadata, FIXTURE_METADATA);
    assert.deepEqual(
      Object.keys(tensors).sort(),
      Object.keys(FIXTURE_TENSORS).sort(),
    );
    for (const [name, t] of Object.entries(FIXTURE_TENSORS)) {
      assertSameTensor(tensors[name], t, name);
    }
    // Whatever layout came in, writing it back gives the reference layout.
    const reference = await Deno.readFile(
      new URL("safetensors_reference.safetensors", FIXTURES),
    );
    assert.deepEqual(encodeSafetensors(tensors, metadata), reference);
  });
}

Deno.test({
  name: "fixture: PyTorch reads a file multigrad wrote (skipped without torch)",
  ignore: !(await pythonHasTorch()),
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = `${dir}/multigrad.safetensors`;
      await writeFileAtomic(
        path,
        encodeSafetensors(FIXTURE_TENSORS, FIXTURE_METADATA),
      );
      const script = new URL("make_safetensors_fixture.py", FIXTURES).pathname;
      const result = await new Deno.Command(PYTHON, {
        args: [script, "--check", path],
      }).output();
      const output = latin.decode(result.stdout) + latin.decode(result.stderr);
      assert.ok(result.success, output);
      assert.match(output, /byte-identical/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

// ------------------------------------------------------------ unaligned data

Deno.test("unaligned: data at any offset is copied into fresh aligned arrays", () => {
  // 13 bytes of header: the data starts at byte 21, aligned for nothing.
  const header = '{"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}';
  const data = new Uint8Array(new Float64Array([1.25, -3]).buffer);
  const file = craft(header, data);
  assert.notEqual((8 + utf8.encode(header).length) % 8, 0);
  // And the file itself sits at an odd offset of a larger buffer.
  const holder = new Uint8Array(file.length + 3);
  holder.set(file, 3);
  const bytes = holder.subarray(3);
  const { tensors } = decodeSafetensors(bytes);
  assert.ok(tensors.d.data instanceof Float64Array);
  assert.equal(tensors.d.data.byteOffset % 8, 0);
  assert.deepEqual(Array.from(tensors.d.data), [1.25, -3]);
  // The result owns its memory: reusing the input buffer changes nothing.
  holder.fill(0);
  assert.deepEqual(Array.from(tensors.d.data), [1.25, -3]);
});

Deno.test("unaligned: header entries in any order, data in any order", () => {
  const data = new Uint8Array(12);
  new DataView(data.buffer).setInt32(0, 5, true);
  new DataView(data.buffer).setFloat32(4, 2.5, true);
  new DataView(data.buffer).setFloat32(8, -1, true);
  const { tensors } = decodeSafetensors(craft({
    z: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
    empty: { dtype: "F64", shape: [0], data_offsets: [4, 4] },
    a: { dtype: "I32", shape: [], data_offsets: [0, 4] },
  }, data));
  assertSameTensor(tensors.a, i32([], [5]));
  assertSameTensor(tensors.z, f32([2], [2.5, -1]));
  assertSameTensor(tensors.empty, f64([0], []));
});

// ------------------------------------------- PyTorch's other dtypes, converted on load

Deno.test("I64 narrows to int32 when every value fits; a value that does not is an error", () => {
  const values = new BigInt64Array([0n, -5n, 2147483647n, -2147483648n]);
  const { tensors } = decodeSafetensors(craft(
    { num_batches_tracked: { dtype: "I64", shape: [4], data_offsets: [0, 32] } },
    new Uint8Array(values.buffer),
  ));
  assertSameTensor(tensors.num_batches_tracked, i32([4], [0, -5, 2147483647, -2147483648]));
  assertRejects(
    craft(
      { labels: { dtype: "I64", shape: [2], data_offsets: [0, 16] } },
      new Uint8Array(new BigInt64Array([1n, 2147483648n]).buffer),
    ),
    /tensor "labels" \(I64, shape \[2\].*element 1 is 2147483648, outside int32/,
  );
});

Deno.test("F16 and BF16 widen to float32 exactly (normal, subnormal, zero, infinity, NaN)", () => {
  // float16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), -0, +inf, NaN
  const half = new Uint16Array([0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x7e00]);
  const { tensors } = decodeSafetensors(craft(
    { h: { dtype: "F16", shape: [7], data_offsets: [0, 14] } },
    new Uint8Array(half.buffer),
  ));
  assertSameTensor(tensors.h, f32([7], [1, -2, 65504, 2 ** -24, -0, Infinity, NaN]));
  // bfloat16 is the upper half of float32; these values have nothing below it.
  const wide = new Float32Array([1, -3.5, 2 ** 100, -Infinity]);
  const upper = Uint16Array.from(new Uint32Array(wide.buffer), (bits) => bits >>> 16);
  const { tensors: b } = decodeSafetensors(craft(
    { b: { dtype: "BF16", shape: [2, 2], data_offsets: [0, 8] } },
    new Uint8Array(upper.buffer),
  ));
  assertSameTensor(b.b, f32([2, 2], [1, -3.5, 2 ** 100, -Infinity]));
});

// --------------------------------------------------------- malformed inputs

Deno.test("malformed: truncated file shorter than the length prefix", () => {
  assertRejects(new Uint8Array(0), /truncated/, /0 bytes/, /8/);
  assertRejects(Uint8Array.of(1, 2, 3, 4, 5), /truncated/, /5 bytes/);
});

Deno.test("malformed: header length larger than the file", () => {
  const ok = encodeSafetensors({ x: f32([2], [1, 2]) });
  assertRejects(
    ok.subarray(0, 20),
    /header length \d+ is larger than the 12 bytes/,
  );
  assertRejects(
    craft("{}", new Uint8Array(), 0xffff_ffff_ffff_ffffn),
    /header length 18446744073709551615/,
  );
});

Deno.test("malformed: header is not UTF-8 or not JSON", () => {
  const bad = craft("{}");
  bad[8] = 0xff;
  assertRejects(bad, /not valid UTF-8/);
  assertRejects(craft('{"x": {"dtype": "F32",'), /header is not valid JSON/);
  assertRejects(craft("[1, 2]"), /header must be a JSON object/);
  assertRejects(craft("null"), /header must be a JSON object/);
});

Deno.test("malformed: unsupported or unknown dtype is named, with the supported ones", () => {
  assertRejects(
    craft(
      { w: { dtype: "U16", shape: [2], data_offsets: [0, 4] } },
      new Uint8Array(4),
    ),
    /tensor "w" has dtype "U16"/,
    /does not support/,
    /supported dtypes: F32, I32, F64/,
  );
  assertRejects(
    craft(
      { w: { dtype: "Q4", shape: [1], data_offsets: [0, 1] } },
      new Uint8Array(1),
    ),
    /"Q4" \(not a safetensors dtype\)/,
    /F32, I32, F64/,
  );
  assertRejects(
    craft({ w: { shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)),
    /dtype must be a string/,
  );
});

Deno.test("malformed: shape and offsets disagree (names tensor, shape, dtype, byte range)", () => {
  assertRejects(
    craft(
      { w: { dtype: "F32", shape: [2, 3], data_offsets: [0, 20] } },
      new Uint8Array(20),
    ),
    /tensor "w" \(F32, shape \[2, 3\], bytes \[0, 20\)\)/,
    /need 24 bytes but the data_offsets span 20/,
  );
  assertRejects(
    craft(
      { s: { dtype: "F64", shape: [], data_offsets: [0, 4] } },
      new Uint8Array(4),
    ),
    /tensor "s" \(F64, shape \[\], bytes \[0, 4\)\)/,
    /need 8 bytes/,
  );
});

Deno.test("malformed: offsets out of range", () => {
  assertRejects(
    craft(
      { w: { dtype: "I32", shape: [4], data_offsets: [0, 16] } },
      new Uint8Array(8),
    ),
    /tensor "w" \(I32, shape \[4\], bytes \[0, 16\)\)/,
    /out of range/,
    /only 8 bytes/,
  );
  assertRejects(
    craft(
      { w: { dtype: "F32", shape: [1], data_offsets: [4, 0] } },
      new Uint8Array(4),
    ),
    /\[4, 0\]: end comes before begin/,
  );
  assertRejects(
    craft(
      { w: { dtype: "F32", shape: [1], data_offsets: [0] } },
      new Uint8Array(4),
    ),
    /tensor "w" \(F32, shape \[1\]\) has data_offsets \[0\]: expected \[begin, end\]/,
  );
  assertRejects(
    craft(
      { w: { dtype: "F32", shape: [1], data_offsets: [-4, 0] } },
      new Uint8Array(4),
    ),
    /expected \[begin, end\], two non-negative integers/,
  );
});

Deno.test("malformed: overlapping data", () => {
  assertRejects(
    craft({
      a: { dtype: "F32", shape: [4], data_offsets: [0, 16] },
      b: { dtype: "F32", shape: [2], data_offsets: [8, 16] },
    }, new Uint8Array(16)),
    /tensor "b" \(F32, shape \[2\], bytes \[8, 16\)\) overlaps tensor "a" \(F32, shape \[4\], bytes \[0, 16\)\)/,
  );
  // Two names for the same bytes.
  assertRejects(
    craft({
      a: { dtype: "I32", shape: [1], data_offsets: [0, 4] },
      b: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
    }, new Uint8Array(4)),
    /overlaps/,
  );
});

Deno.test("malformed: non-contiguous data (gaps, leading or trailing bytes)", () => {
  assertRejects(
    craft({
      a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
      b: { dtype: "F32", shape: [1], data_offsets: [8, 12] },
    }, new Uint8Array(12)),
    /not contiguous: bytes \[4, 8\) before tensor "b"/,
  );
  assertRejects(
    craft(
      { a: { dtype: "F32", shape: [1], data_offsets: [4, 8] } },
      new Uint8Array(8),
    ),
    /not contiguous: bytes \[0, 4\) before tensor "a"/,
  );
  assertRejects(
    craft(
      { a: { dtype: "F32", shape: [1], data_offsets: [0, 4] } },
      new Uint8Array(10),
    ),
    /not contiguous: 6 trailing bytes \[4, 10\) belong to no tensor/,
  );
  assertRejects(craft({}, new Uint8Array(3)), /3 trailing bytes/);
});

Deno.test("malformed: non-integer or negative shapes", () => {
  for (const shape of [[1.5], [-1], ["2"], [null], [2 ** 53]]) {
    assertRejects(
      craft(
        { w: { dtype: "F32", shape, data_offsets: [0, 4] } },
        new Uint8Array(4),
      ),
      /tensor "w" \(F32\) has shape \[.*\]: every dimension must be a non-negative integer/,
    );
  }
  assertRejects(
    craft(
      { w: { dtype: "F32", shape: 4, data_offsets: [0, 16] } },
      new Uint8Array(16),
    ),
    /has shape 4: every dimension/,
  );
  assertRejects(
    craft({
      w: {
        dtype: "F64",
        shape: [2 ** 26, 2 ** 26, 2 ** 26],
        data_offsets: [0, 8],
      },
    }, new Uint8Array(8)),
    /too many elements/,
  );
});

Deno.test("malformed: bad entries and metadata", () => {
  assertRejects(
    craft({ w: [1, 2] }, new Uint8Array()),
    /tensor "w": header entry must be an object/,
  );
  assertRejects(
    craft({ __metadata__: { a: 1 } }),
    /"__metadata__" entry "a" must be a string, got 1/,
  );
  assertRejects(
    craft({ __metadata__: ["a"] }),
    /"__metadata__" must be an object of strings/,
  );
});

// ------------------------------------------------------------ encoder errors

Deno.test("encode: rejects input that cannot be written", () => {
  assert.throws(
    () => encodeSafetensors({ w: f32([2, 2], [1, 2, 3]) }),
    {
      name: "SafetensorsError",
      message: /tensor "w" has shape \[2, 2\] \(4 elements\) but its data holds 3/,
    },
  );
  assert.throws(
    () =>
      encodeSafetensors({
        w: { dtype: "float32", shape: [1], data: Int32Array.of(1) },
      }),
    /dtype float32, so its data must be a Float32Array, got Int32Array/,
  );
  assert.throws(
    () => encodeSafetensors({ w: f32([1.5], [1]) }),
    /shape \[1\.5\]: every dimension/,
  );
  assert.throws(
    () => encodeSafetensors({ __metadata__: f32([1], [1]) }),
    /"__metadata__" is reserved/,
  );
  assert.throws(
    () => encodeSafetensors({ "\uD800": f32([1], [1]) }),
    /not valid Unicode/,
  );
  assert.throws(
    () =>
      encodeSafetensors({
        w: {
          dtype: "bfloat16" as "float32",
          shape: [1],
          data: Float32Array.of(1),
        },
      }),
    /dtype "bfloat16"; supported dtypes: int32, float32, float64/,
  );
  assert.throws(
    () => encodeSafetensors({}, { n: 3 as unknown as string }),
    /metadata "n" must map a well-formed key to a well-formed string, got number/,
  );
});

// --------------------------------------------------------------- atomic write

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function listDir(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  return names.sort();
}

Deno.test("writeFileAtomic: creates, then replaces, leaving no temporary files", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/model.safetensors`;
    await writeFileAtomic(path, Uint8Array.of(1, 2, 3));
    assert.deepEqual(await Deno.readFile(path), Uint8Array.of(1, 2, 3));
    await writeFileAtomic(path, Uint8Array.of(4, 5));
    assert.deepEqual(await Deno.readFile(path), Uint8Array.of(4, 5));
    await writeFileAtomic(path, new Uint8Array());
    assert.deepEqual(await Deno.readFile(path), new Uint8Array());
    assert.deepEqual(await listDir(dir), ["model.safetensors"]);
  });
});

Deno.test("writeFileAtomic: a large buffer is written completely", async () => {
  await withTempDir(async (dir) => {
    const bytes = new Uint8Array(5 * 1024 * 1024 + 3).map((_, i) => i * 31);
    await writeFileAtomic(`${dir}/big`, bytes);
    assert.deepEqual(await Deno.readFile(`${dir}/big`), bytes);
  });
});

Deno.test("writeFileAtomic: relative paths write into the current directory", async () => {
  await withTempDir(async (dir) => {
    const cwd = Deno.cwd();
    Deno.chdir(dir);
    try {
      await writeFileAtomic("plain.bin", Uint8Array.of(7));
    } finally {
      Deno.chdir(cwd);
    }
    assert.deepEqual(await Deno.readFile(`${dir}/plain.bin`), Uint8Array.of(7));
    assert.deepEqual(await listDir(dir), ["plain.bin"]);
  });
});

Deno.test("writeFileAtomic: missing directory rejects, naming the path", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/missing/model.safetensors`;
    await assert.rejects(
      writeFileAtomic(path, Uint8Array.of(1)),
      (e: Error) => {
        assert.match(
          e.message,
          /could not write ".*\/missing\/model\.safetensors"/,
        );
        assert.ok(e.cause instanceof Deno.errors.NotFound);
        return true;
      },
    );
    assert.deepEqual(await listDir(dir), []);
  });
});

Deno.test("writeFileAtomic: a failure while writing keeps the old file and removes the temporary", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/model.safetensors`;
    await Deno.writeFile(path, Uint8Array.of(9, 9, 9));
    // Not a real typed array: every access to it throws once the temporary
    // file exists, standing in for a disk-full or I/O error mid-write.
    const failing = new Proxy(new Uint8Array(4), {});
    await assert.rejects(writeFileAtomic(path, failing), /could not write/);
    assert.deepEqual(await Deno.readFile(path), Uint8Array.of(9, 9, 9));
    assert.deepEqual(await listDir(dir), ["model.safetensors"]);
  });
});

Deno.test("writeFileAtomic: a failed rename keeps what was there and removes the temporary", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/taken`;
    await Deno.mkdir(path);
    await Deno.writeFile(`${path}/inside`, Uint8Array.of(1));
    await assert.rejects(
      writeFileAtomic(path, Uint8Array.of(2)),
      /could not write ".*taken"/,
    );
    assert.deepEqual(await Deno.readFile(`${path}/inside`), Uint8Array.of(1));
    assert.deepEqual(await listDir(dir), ["taken"]);
  });
});

Deno.test({
  name: "writeFileAtomic: keeps an existing file's permission bits",
  ignore: Deno.build.os === "windows",
  async fn() {
    await withTempDir(async (dir) => {
      const path = `${dir}/model.safetensors`;
      await Deno.writeFile(path, Uint8Array.of(1), { mode: 0o600 });
      await Deno.chmod(path, 0o640);
      await writeFileAtomic(path, Uint8Array.of(2));
      assert.equal((await Deno.stat(path)).mode! & 0o777, 0o640);
    });
  },
});

Deno.test("writeFileAtomic: a path without a file name is rejected", async () => {
  await assert.rejects(
    writeFileAtomic("some/dir/", Uint8Array.of(1)),
    /does not name a file/,
  );
});

Deno.test("save and load through a file", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/sd.safetensors`;
    await writeFileAtomic(
      path,
      encodeSafetensors(FIXTURE_TENSORS, FIXTURE_METADATA),
    );
    const { tensors, metadata } = decodeSafetensors(await Deno.readFile(path));
    assert.deepEqual(metadata, FIXTURE_METADATA);
    for (const [name, t] of Object.entries(FIXTURE_TENSORS)) {
      assertSameTensor(tensors[name], t, name);
    }
  });
});
