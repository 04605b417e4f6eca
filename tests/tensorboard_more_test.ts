/**
 * `SummaryWriter.addAudio`, `addCustomScalars` and `addEmbedding`: the same bytes as PyTorch
 * 1.13's `summary.audio`, `summary.custom_scalars` and the files of `add_embedding`
 * (tests/fixtures/torch_tensorboard_more.py runs PyTorch's own functions), the sprite's pixels
 * as PIL decodes PyTorch's PNG; bad input is a clear error.
 */

import assert from "node:assert/strict";
import { type Device, type DType, tensor, utils } from "../mod.ts";
import { frameRecord } from "../src/utils/tensorboard/record.ts";
import { type CustomScalarLayout, customScalarsValue } from "../src/utils/tensorboard/summary.ts";
import { encodeWav } from "../src/utils/tensorboard/audio.ts";
import { pyFloatRepr, zfill5 } from "../src/utils/tensorboard/embedding.ts";
import { backendTest } from "./harness.ts";
import { decode, decodePng, hex, readRecords, withTempDir } from "./tensorboard_reader.ts";

const { SummaryWriter } = utils.tensorboard;

interface AudioCase {
  name: string;
  values: number[];
  shape: number[];
  dtype: DType;
  sampleRate: number;
  step: number | null;
  walltime: number;
  lengthFrames: number;
  wav: string;
  hex: string;
}
interface EmbeddingCase {
  name: string;
  /** Python's repr of each value (NaN and infinities survive JSON so). */
  mat: string[][];
  dtype: DType;
  shape: number[];
  metadata: (string | number | (string | number)[])[] | null;
  metadataHeader: string[] | null;
  labelImg: { shape: number[]; values: number[] } | null;
  globalStep: number | null;
  tag: string | null;
  subdir: string;
  files: { "tensors.tsv": string; "metadata.tsv"?: string };
  sprite: { width: number; height: number; mode: string; pixels: number[] } | null;
  pbtxt: string;
}
interface Fixture {
  audio: AudioCase[];
  customScalars: { layout: CustomScalarLayout; hex: string }[];
  embeddings: EmbeddingCase[];
  reprs64: string[];
  reprs32: string[];
}

const FIX: Fixture = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_tensorboard_more.json", import.meta.url)),
);

const pyNumber = (s: string) =>
  s === "nan" ? NaN : s === "inf" ? Infinity : s === "-inf" ? -Infinity : Number(s);

/** The records of the one event file directly in `dir`, after the file-version event. */
async function eventsIn(dir: string): Promise<Uint8Array[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && e.name.startsWith("events.out.tfevents.")) names.push(e.name);
  }
  assert.equal(names.length, 1, `one event file in ${dir}: ${names}`);
  return readRecords(await Deno.readFile(`${dir}/${names[0]}`)).slice(1);
}

// ---- addAudio ----

Deno.test("encodeWav: the WAV bytes of PyTorch's summary.audio (Python's wave module)", () => {
  for (const c of FIX.audio) {
    const values = c.dtype === "float32"
      ? Float32Array.from(c.values)
      : Float64Array.from(c.values);
    assert.equal(hex(encodeWav(values, c.sampleRate, c.dtype === "float32")), c.wav, c.name);
  }
});

backendTest(
  "addAudio writes PyTorch's event bytes for each shape, dtype and rate",
  async (device: Device) => {
    await withTempDir(async (dir) => {
      const w = new SummaryWriter({ logDir: dir });
      const cases = FIX.audio.filter((c) => c.dtype === "float32" || device.backend === "cpu");
      for (const c of cases) {
        const snd = tensor(c.values, { device, dtype: c.dtype }).reshape(c.shape);
        w.addAudio(
          `sound/${c.name}`,
          snd,
          c.step ?? undefined,
          { sampleRate: c.sampleRate },
          c.walltime,
        );
      }
      await w.close();
      const events = await eventsIn(dir);
      assert.equal(events.length, cases.length);
      cases.forEach((c, i) => assert.equal(hex(frameRecord(events[i])), c.hex, c.name));
    });
  },
);

Deno.test("addAudio: the default rate is 44100 and the walltime defaults to now", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    w.addAudio("a", tensor([0.5, -0.5]));
    await w.close();
    const [event] = await eventsIn(dir);
    const fields = decode(event);
    assert.ok(Math.abs((fields.get(1)![0] as number) - Date.now() / 1000) < 60);
    assert.equal(fields.has(2), false, "no step");
    const value = decode(decode(fields.get(5)![0] as Uint8Array).get(1)![0] as Uint8Array);
    const audio = decode(value.get(6)![0] as Uint8Array);
    assert.equal(audio.get(1)![0], 44100);
    const wav = audio.get(4)![0] as Uint8Array;
    assert.equal(new DataView(wav.buffer, wav.byteOffset).getUint32(24, true), 44100);
  });
});

Deno.test("addAudio: a wrong shape, rate or a NaN sample is an error naming it", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    for (const shape of [[2, 5], [1], [0], [1, 1], [3, 1, 2]]) {
      const t = tensor(new Array(shape.reduce((a, b) => a * b, 1)).fill(0)).reshape(shape);
      assert.throws(
        () => w.addAudio("a", t),
        new RegExp(`addAudio: sndTensor must be one channel.*got shape \\[${shape.join(", ")}\\]`),
      );
    }
    for (const sampleRate of [0, -8000, NaN, 2 ** 31, Infinity]) {
      assert.throws(
        () => w.addAudio("a", tensor([0, 0.5]), 0, { sampleRate }),
        /sampleRate must be/,
      );
    }
    assert.throws(
      // @ts-expect-error: not a tensor
      () => w.addAudio("a", [0, 0.5]),
      /sndTensor must be a tensor, got an array/,
    );
    w.addAudio("nan", tensor([0, NaN, 0.5]), 1);
    await assert.rejects(
      w.close(),
      /addAudio\("nan"\): sample 1 of the tensor of shape \[3\] is NaN/,
    );
  });
});

// ---- addCustomScalars ----

Deno.test("customScalarsValue: PyTorch's custom_scalars Summary.Value bytes", () => {
  for (const c of FIX.customScalars) assert.equal(hex(customScalarsValue(c.layout)), c.hex);
});

Deno.test("addCustomScalars and its shorthands write the layout event (no step)", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    w.addCustomScalars(FIX.customScalars[0].layout);
    w.addCustomScalarsMultilinechart(["loss/.*", "accuracy"]);
    w.addCustomScalarsMarginchart(["v", "lo", "hi"]);
    w.addCustomScalars(FIX.customScalars[3].layout);
    await w.close();
    const events = await eventsIn(dir);
    assert.equal(events.length, 4);
    events.forEach((event, i) => {
      const fields = decode(event);
      assert.equal(fields.has(2), false, "no step");
      assert.ok(Math.abs((fields.get(1)![0] as number) - Date.now() / 1000) < 60);
      const value = decode(fields.get(5)![0] as Uint8Array).get(1)![0] as Uint8Array;
      assert.equal(hex(value), FIX.customScalars[i].hex);
    });
  });
});

Deno.test("addCustomScalars: a malformed layout is an error naming the chart", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    const bad = (layout: unknown) => () => w.addCustomScalars(layout as CustomScalarLayout);
    assert.throws(bad([1]), /layout must be an object of categories, got an array/);
    assert.throws(bad({ c: 3 }), /layout\["c"\] must be an object of charts, got number 3/);
    assert.throws(
      bad({ c: { t: ["Lines", ["a"]] } }),
      /layout\["c"\]\["t"\] must be \["Multiline", \[tags...\]\] or \["Margin", \[value, lower, upper\]\], got \["Lines",\["a"\]\]/,
    );
    assert.throws(bad({ c: { t: ["Margin", ["a", "b"]] } }), /layout\["c"\]\["t"\] must be/);
    assert.throws(bad({ c: { t: ["Multiline", "a"] } }), /layout\["c"\]\["t"\] must be/);
    assert.throws(bad({ c: { t: ["Multiline", [1]] } }), /layout\["c"\]\["t"\] must be/);
    await w.close();
    assert.deepEqual(await eventsIn(dir), [], "nothing written");
  });
});

// ---- addEmbedding ----

Deno.test("pyFloatRepr: Python's repr of float64 and float32 values; zfill5", () => {
  for (const s of FIX.reprs64) assert.equal(pyFloatRepr(pyNumber(s)), s);
  const f32 = new Float32Array(1);
  for (const s of FIX.reprs32) {
    f32[0] = pyNumber(s);
    assert.equal(pyFloatRepr(f32[0]), s);
  }
  assert.deepEqual([0, 7, 123456, -1, -12345].map(zfill5), [
    "00000",
    "00007",
    "123456",
    "-0001",
    "-12345",
  ]);
});

backendTest(
  "addEmbedding writes PyTorch's tensors.tsv, metadata.tsv, projector_config.pbtxt and sprite pixels",
  async (device: Device) => {
    await withTempDir(async (dir) => {
      const w = new SummaryWriter({ logDir: dir });
      for (const c of FIX.embeddings) {
        if (c.dtype === "float64" && device.backend !== "cpu") continue; // float64 is cpu-only
        const values = c.mat.flat().map(pyNumber);
        const mat = tensor(values, { device, dtype: c.dtype }).reshape(c.shape);
        w.addEmbedding(mat, {
          metadata: c.metadata ?? undefined,
          metadataHeader: c.metadataHeader ?? undefined,
          labelImg: c.labelImg
            ? tensor(c.labelImg.values, { device }).reshape(c.labelImg.shape)
            : undefined,
          globalStep: c.globalStep ?? undefined,
          tag: c.tag ?? undefined,
        });
        await w.flush();
        const read = (name: string) => Deno.readTextFile(`${dir}/${c.subdir}/${name}`);
        assert.equal(await read("tensors.tsv"), c.files["tensors.tsv"], c.name);
        if (c.files["metadata.tsv"] !== undefined) {
          assert.equal(await read("metadata.tsv"), c.files["metadata.tsv"], c.name);
        }
        if (c.sprite) {
          const png = decodePng(await Deno.readFile(`${dir}/${c.subdir}/sprite.png`));
          assert.deepEqual(
            [png.width, png.height, png.type],
            [c.sprite.width, c.sprite.height, 2],
            c.name,
          );
          assert.equal(c.sprite.mode, "RGB");
          assert.deepEqual(png.pixels, c.sprite.pixels, c.name);
        } else {
          await assert.rejects(Deno.stat(`${dir}/${c.subdir}/sprite.png`), Deno.errors.NotFound);
        }
        if (device.backend === "cpu") {
          assert.equal(await Deno.readTextFile(`${dir}/projector_config.pbtxt`), c.pbtxt, c.name);
        }
      }
      await w.close();
    });
  },
);

Deno.test("addEmbedding: bad arguments are errors naming shapes and values; nothing is written", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    const mat = tensor([[1, 2], [3, 4]]);
    assert.throws(
      () => w.addEmbedding(tensor([1, 2, 3])),
      /mat must be a 2-d tensor \[N, D\] \(a row per data point\), got a tensor of shape \[3\]/,
    );
    assert.throws(
      () => w.addEmbedding(mat, { metadata: ["a"] }),
      /metadata must be an array of a label per data point \(2, mat of shape \[2, 2\]\), got 1 labels/,
    );
    assert.throws(
      () => w.addEmbedding(mat, { metadata: [["a", 1], ["b", 2]] }),
      /metadata\[0\] must be a string, number or boolean \(give metadataHeader for several columns\)/,
    );
    assert.throws(
      () => w.addEmbedding(mat, { metadata: [["a", 1], ["b"]], metadataHeader: ["x", "y"] }),
      /metadata\[1\] must be an array of 2 strings, numbers or booleans/,
    );
    assert.throws(
      () =>
        w.addEmbedding(mat, {
          labelImg: tensor(new Array(2 * 2 * 3 * 3).fill(0)).reshape([2, 2, 3, 3]),
        }),
      /labelImg must be a tensor \[N, C, H, W\].*got a tensor of shape \[2, 2, 3, 3\]/,
    );
    assert.throws(
      () =>
        w.addEmbedding(mat, {
          labelImg: tensor(new Array(3 * 3 * 4).fill(0)).reshape([3, 3, 2, 2]),
        }),
      /labelImg must be a tensor \[N, C, H, W\] of an image per data point \(N 2/,
    );
    assert.throws(
      () =>
        w.addEmbedding(mat, {
          labelImg: tensor(new Array(2 * 10 * 2).fill(0)).reshape([2, 1, 10, 2]),
        }),
      /the sprite of labelImg of shape \[2, 1, 10, 2\] does not fit its square: 2 images a row are 4 pixels wide, the rows 10 high/,
    );
    assert.throws(
      () => w.addEmbedding(mat, { globalStep: 1.5 }),
      /globalStep must be an integer, got number 1.5/,
    );
    assert.throws(
      // @ts-expect-error: not a string
      () => w.addEmbedding(mat, { tag: 3 }),
      /tag must be a string, got number 3/,
    );
    await Deno.mkdir(`${dir}/00002`);
    await Deno.writeTextFile(`${dir}/00002/file`, "");
    assert.throws(
      () => w.addEmbedding(mat, { globalStep: 2, tag: "file" }),
      /00002\/file exists, but is a file/,
    );
    await w.close();
    await assert.rejects(Deno.stat(`${dir}/projector_config.pbtxt`), Deno.errors.NotFound);
    assert.throws(() => w.addEmbedding(mat), /addEmbedding: the writer of .* is closed/);
  });
});

Deno.test("addEmbedding again at the same step and tag warns, replaces the files and lists both", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    const warnings: string[] = [];
    const warn = console.warn;
    console.warn = (msg: string) => warnings.push(msg);
    try {
      w.addEmbedding(tensor([[1.5]]), { metadata: [true] });
      w.addEmbedding(tensor([[2.5]]), { metadata: [10 ** 21] });
    } finally {
      console.warn = warn;
    }
    await w.close();
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /00000\/default exists already \(was globalStep set\?\)/);
    assert.equal(await Deno.readTextFile(`${dir}/00000/default/tensors.tsv`), "2.5\n");
    // Integral numbers are Python ints, at any size.
    assert.equal(
      await Deno.readTextFile(`${dir}/00000/default/metadata.tsv`),
      "1000000000000000000000\n",
    );
    const config = await Deno.readTextFile(`${dir}/projector_config.pbtxt`);
    assert.equal(config.match(/tensor_name: "default:00000"/g)?.length, 2);
  });
});
