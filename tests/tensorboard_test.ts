/**
 * `utils.tensorboard.SummaryWriter`: the event files equal, byte for byte,
 * what torch.utils.tensorboard writes (tests/fixtures/torch_tensorboard.py
 * builds them with google.protobuf from TensorBoard's field numbers), read
 * back by a small TFRecord/protobuf reader; tensors on every backend log the
 * same; bad input is a clear error.
 */

import assert from "node:assert/strict";
import { type Device, type Tensor, tensor, utils } from "../mod.ts";
import { crc32c, frameRecord } from "../src/utils/tensorboard/record.ts";
import {
  defaultBins,
  encodeEvent,
  type Histogram,
  histogramValue,
  makeHistogram,
  ruleEdges,
  uniformEdges,
} from "../src/utils/tensorboard/summary.ts";
import { hparamsValues } from "../src/utils/tensorboard/hparams.ts";
import { backendTest } from "./harness.ts";
import {
  decode,
  decodePng,
  type Field,
  hex,
  readRecords,
  unhex,
  withTempDir,
} from "./tensorboard_reader.ts";

const { SummaryWriter } = utils.tensorboard;

interface HistCase {
  name: string;
  values: number[];
  shape: number[];
  bins: number | number[] | null;
  maxBins: number | null;
  step: number;
  walltime: number;
  exact: boolean;
  hex: string;
  fields: Histogram;
}
interface PrCase {
  generated: number | null;
  weighted: boolean;
  labels: number[];
  /** NaN as null. */
  predictions: (number | null)[];
  weights: number[] | null;
  numThresholds: number;
  step: number;
  walltime: number;
  hex: string;
}
interface Fixture {
  prCurves: PrCase[];
  /** float64 predictions near the thresholds (compute_curve buckets them in float64). */
  prCurves64: PrCase[];
  fileVersion: string;
  purge: string[];
  scalars: { tag: string; value: number; step: number | null; walltime: number; hex: string }[];
  texts: { tag: string; text: string; step: number | null; walltime: number; hex: string }[];
  histograms: HistCase[];
  randomHistograms: Pick<HistCase, "values" | "bins" | "maxBins" | "fields">[];
  hparams: {
    hparamDict: Record<string, number | string>;
    metricDict: Record<string, number>;
    walltime: number;
    hex: string[];
    boolHex: string[];
    domainHex: string[];
  };
}

const FIX: Fixture = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_tensorboard.json", import.meta.url)),
);

const one = (m: Map<number, Field[]>, n: number) => m.get(n)?.[0];
const sub = (m: Map<number, Field[]>, n: number) => decode(one(m, n) as Uint8Array);
const str = (f: Field | undefined) => new TextDecoder().decode(f as Uint8Array);

async function eventFiles(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.isFile) names.push(e.name);
  return names.sort();
}

async function recordsIn(dir: string): Promise<Uint8Array[]> {
  const names = await eventFiles(dir);
  assert.equal(names.length, 1, `one event file in ${dir}: ${names}`);
  return readRecords(await Deno.readFile(`${dir}/${names[0]}`));
}

// The first record of every file is the file-version event (its walltime is now).
function assertFileVersion(rec: Uint8Array): void {
  const ev = decode(rec);
  assert.equal(str(one(ev, 3)), "brain.Event:2");
  assert.ok(Math.abs((one(ev, 1) as number) - Date.now() / 1000) < 3600);
  assert.equal(ev.has(2), false);
}

/** Runs `script` as a program of its own (`deno eval`); it must exit with 0. */
async function runProgram(script: string): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
}

// ---- the format ----

Deno.test("crc32c: the RFC 3720 vectors and '123456789'", () => {
  const seq = (n: number, f: (i: number) => number) =>
    Uint8Array.from({ length: n }, (_, i) => f(i));
  assert.equal(crc32c(seq(32, () => 0)), 0x8a9136aa);
  assert.equal(crc32c(seq(32, () => 0xff)), 0x62a8ab43);
  assert.equal(crc32c(seq(32, (i) => i)), 0x46dd794e);
  assert.equal(crc32c(seq(32, (i) => 31 - i)), 0x113fdb5c);
  assert.equal(crc32c(new TextEncoder().encode("123456789")), 0xe3069283);
  assert.equal(crc32c(new Uint8Array(0)), 0);
});

Deno.test("the file-version and purge-step events equal PyTorch's records", () => {
  const fv = frameRecord(encodeEvent(1700000000.25, undefined, { fileVersion: "brain.Event:2" }));
  assert.equal(hex(fv), FIX.fileVersion);
  const t = 1700000001.5;
  assert.equal(hex(frameRecord(encodeEvent(t, 7, { fileVersion: "brain.Event:2" }))), FIX.purge[0]);
  assert.equal(hex(frameRecord(encodeEvent(t, 7, { sessionLogStart: true }))), FIX.purge[1]);
});

Deno.test("addScalar and addText write PyTorch's bytes; the file reads back", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    for (const c of FIX.scalars) w.addScalar(c.tag, c.value, c.step ?? undefined, c.walltime);
    for (const c of FIX.texts) w.addText(c.tag, c.text, c.step ?? undefined, c.walltime);
    await w.close();
    const recs = await recordsIn(dir);
    assert.equal(recs.length, 1 + FIX.scalars.length + FIX.texts.length);
    assertFileVersion(recs[0]);
    const expected = [...FIX.scalars, ...FIX.texts].map((c) => c.hex);
    assert.deepEqual(recs.slice(1).map((r) => hex(frameRecord(r))), expected);
    // Read back: tag, float32 value and step.
    for (const [i, c] of FIX.scalars.entries()) {
      const ev = decode(recs[1 + i]);
      const value = sub(sub(ev, 5), 1);
      assert.equal(str(one(value, 1)), c.tag);
      assert.ok(Object.is(one(value, 2), Math.fround(c.value)));
      assert.equal(
        one(ev, 2) === undefined ? null : BigInt.asIntN(64, one(ev, 2) as bigint),
        c.step === null || c.step === 0 ? null : BigInt(c.step),
      );
    }
    const text = sub(sub(decode(recs[1 + FIX.scalars.length + 1]), 5), 1);
    assert.equal(str(one(text, 1)), "notes/unicode/text_summary");
    assert.equal(str(one(sub(text, 8), 8)), "héllo ✓ — 日本");
  });
});

function histOptions(c: HistCase) {
  return { bins: c.bins ?? undefined, maxBins: c.maxBins ?? undefined, walltime: c.walltime };
}

Deno.test("addHistogram: PyTorch's 'tensorflow' bins, edges and maxBins, same records", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir, maxQueue: 3 });
    for (const c of FIX.histograms) {
      w.addHistogram(`hist/${c.name}`, c.values, c.step, histOptions(c));
    }
    await w.close();
    const recs = (await recordsIn(dir)).slice(1);
    assert.equal(recs.length, FIX.histograms.length);
    let worst = 0;
    for (const [i, c] of FIX.histograms.entries()) {
      const h = sub(sub(sub(decode(recs[i]), 5), 1), 5);
      const doubles = (n: number) => {
        const b = one(h, n) as Uint8Array | undefined;
        if (!b) return [];
        const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
        return Array.from({ length: b.length / 8 }, (_, k) => v.getFloat64(8 * k, true));
      };
      const f = c.fields;
      assert.deepEqual(doubles(6), f.bucketLimit, `${c.name}: bucket limits`);
      assert.deepEqual(doubles(7), f.bucket, `${c.name}: buckets`);
      assert.equal(one(h, 1) ?? 0, f.min, c.name);
      assert.equal(one(h, 2) ?? 0, f.max, c.name);
      assert.equal(one(h, 3), f.num, c.name);
      assert.equal(one(h, 4) ?? 0, f.sum, `${c.name}: sum`);
      const ss = (one(h, 5) ?? 0) as number;
      worst = Math.max(worst, Math.abs(ss - f.sumSquares) / Math.max(f.sumSquares, 1e-300));
      assert.ok(Math.abs(ss - f.sumSquares) <= 1e-12 * f.sumSquares, `${c.name}: sum of squares`);
      if (c.exact) assert.equal(hex(frameRecord(recs[i])), c.hex, `${c.name}: bytes`);
    }
    assert.ok(worst < 1e-12);
  });
});

Deno.test("histograms of 60 random float32 samples equal PyTorch's, field by field", () => {
  let worst = 0;
  for (const [i, c] of FIX.randomHistograms.entries()) {
    const v = Float64Array.from(c.values);
    const edges = typeof c.bins === "number" ? uniformEdges(v, c.bins) : c.bins ?? defaultBins();
    const h = makeHistogram(v, edges, c.maxBins ?? undefined);
    const { sumSquares, ...rest } = h;
    const { sumSquares: expected, ...restExpected } = c.fields;
    assert.deepEqual(rest, restExpected, `case ${i}`);
    const err = Math.abs(sumSquares - expected) / expected;
    worst = Math.max(worst, err);
    assert.ok(err <= 1e-13, `case ${i}: sum of squares ${sumSquares} vs ${expected}`);
  }
  assert.equal(FIX.randomHistograms.length, 60);
  assert.ok(worst < 1e-13);
});

Deno.test("hparams: the experiment, session start and end summaries equal PyTorch's", () => {
  const { hparamDict, metricDict, walltime } = FIX.hparams;
  const values = hparamsValues(
    Object.entries(hparamDict).map(([k, v]) => [k, v, undefined]),
    Object.keys(metricDict),
  );
  const got = values.map((v) =>
    hex(frameRecord(encodeEvent(walltime, undefined, { summaryValue: v })))
  );
  // The session start info's hyperparameters are a map: the fixture is
  // serialized deterministically (entries sorted by key), as multigrad writes it.
  assert.deepEqual(got, FIX.hparams.hex.slice(0, 3));
  const plugin = sub(sub(sub(sub(decode(readRecords(unhex(got[1]))[0]), 5), 1), 9), 1);
  const keys = (sub(sub(plugin, 2), 3).get(1) as Uint8Array[]).map((e) => str(one(decode(e), 1)));
  assert.deepEqual(keys, ["bsize", "lr", "optimizer"]);
  // One hyperparameter: a boolean becomes the number 1 (PyTorch 1.13 checks int first).
  const flag = hparamsValues([["flag", 1, undefined]], ["m"]);
  assert.deepEqual(
    flag.map((v) => hex(frameRecord(encodeEvent(1700000031, undefined, { summaryValue: v })))),
    FIX.hparams.boolHex.slice(0, 3),
  );
});

function hparamsRecords(recs: Uint8Array[], walltime: number): string[] {
  // The writer stamps the current time: the summaries are compared at the fixture's.
  return recs.map((r) =>
    hex(frameRecord(encodeEvent(walltime, undefined, {
      summaryValue: one(decode(one(decode(r), 5) as Uint8Array), 1) as Uint8Array,
    })))
  );
}

Deno.test("addHparams: discrete domains (booleans as numbers), tensor values", async () => {
  await withTempDir(async (dir) => {
    const hparamDomainDiscrete = { lr: [0.1, 0.01], opt: ["adam", "sgd"], flag: [true, false] };
    const w = new SummaryWriter({ logDir: dir });
    w.addHparams({ lr: 0.1, opt: "sgd", flag: false }, { acc: 0.5 }, {
      runName: "r",
      hparamDomainDiscrete,
    });
    const lr = tensor(0.1, { dtype: "float64" });
    // As in PyTorch, a domain's values must have the hyperparameter's type: not for a tensor.
    assert.throws(
      () => w.addHparams({ lr }, {}, { hparamDomainDiscrete }),
      /hparamDomainDiscrete\.lr must be an array of the type of hparamDict\.lr \(a tensor of shape \[\]\)/,
    );
    const { opt, flag } = hparamDomainDiscrete;
    w.addHparams({ lr, opt: "sgd", flag: false }, { acc: tensor(0.5) }, {
      runName: "t",
      hparamDomainDiscrete: { opt, flag },
    });
    await w.close();
    const plain = hparamsRecords((await recordsIn(`${dir}/r`)).slice(1), 1700000032);
    assert.deepEqual(plain, FIX.hparams.domainHex);
    // Without lr's domain only the experiment differs.
    const fromTensors = hparamsRecords((await recordsIn(`${dir}/t`)).slice(1), 1700000032);
    assert.deepEqual(fromTensors.slice(1), FIX.hparams.domainHex.slice(1));
    assert.notEqual(fromTensors[0], FIX.hparams.domainHex[0]);
  });
});

Deno.test("addHparams writes a run directory with the summaries and the metrics", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    w.addHparams({ flag: true, skipped: null }, { m: 1.0 }, { runName: "run1" });
    await w.close();
    const recs = await recordsIn(`${dir}/run1`);
    assert.equal(recs.length, 5);
    assertFileVersion(recs[0]);
    const strip = (r: Uint8Array) => {
      const ev = decode(r);
      return hex(frameRecord(encodeEvent(1700000031, undefined, {
        summaryValue: one(decode(one(ev, 5) as Uint8Array), 1) as Uint8Array,
      })));
    };
    assert.deepEqual(recs.slice(1).map(strip), FIX.hparams.boolHex);
    assert.equal((await recordsIn(dir)).length, 1);
  });
});

// ---- the writer ----

Deno.test("event file names, the default log directory, addScalars and purgeStep", async () => {
  await withTempDir(async (dir) => {
    const host = Deno.hostname();
    const w = new SummaryWriter({ logDir: `${dir}/a`, filenameSuffix: ".v2", purgeStep: 5 });
    const name = w.eventFile.slice(`${dir}/a/`.length);
    const m = name.match(/^events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)\.v2$/);
    assert.ok(m, name);
    assert.equal(m[2], host);
    assert.equal(Number(m[3]), Deno.pid);
    assert.ok(Math.abs(Number(m[1]) - Date.now() / 1000) < 3600);
    w.addScalars("train/loss", { a: 1, b: tensor(2) }, 3, 1700000000);
    w.addScalars("train/loss", { a: 4 }, 4, 1700000001);
    await w.flush();
    const purge = await recordsIn(`${dir}/a`);
    assert.equal(purge.length, 3);
    assert.equal(str(one(decode(purge[1]), 3)), "brain.Event:2");
    assert.equal(one(decode(purge[1]), 2), 5n);
    assert.equal(one(decode(purge[2]), 2), 5n);
    assert.equal(one(sub(decode(purge[2]), 7), 1), 1n);
    const sa = await recordsIn(`${dir}/a/train_loss_a`);
    const sb = await recordsIn(`${dir}/a/train_loss_b`);
    assert.equal(sa.length, 3);
    assert.equal(sb.length, 2);
    const expect = (v: number, step: number, t: number) =>
      hex(encodeEvent(t, step, { summaryValue: scalarBytes("train/loss", v) }));
    assert.equal(hex(sa[1]), expect(1, 3, 1700000000));
    assert.equal(hex(sa[2]), expect(4, 4, 1700000001));
    assert.equal(hex(sb[1]), expect(2, 3, 1700000000));
    const counters = [w.eventFile, ...(await eventFiles(`${dir}/a/train_loss_a`))].map((n) =>
      Number(n.split(".").at(-2))
    );
    assert.ok(counters[1] > counters[0]);
    await w.close();
    await w.close(); // twice is fine, as in PyTorch
    const cwd = Deno.cwd();
    Deno.chdir(dir);
    try {
      const d = new SummaryWriter({ comment: "_lr0.1" });
      await d.close();
      assert.match(
        d.logDir,
        new RegExp(
          `^runs/[A-Z][a-z]{2}\\d{2}_\\d{2}-\\d{2}-\\d{2}_${host.replaceAll(".", "\\.")}_lr0\\.1$`,
        ),
      );
      assert.equal((await recordsIn(`${dir}/${d.logDir}`)).length, 1);
    } finally {
      Deno.chdir(cwd);
    }
  });
});

function scalarBytes(tag: string, v: number): Uint8Array {
  // Summary.Value{tag = 1, simple_value = 2}, written out by hand.
  const t = new TextEncoder().encode(tag);
  const out = new Uint8Array(2 + t.length + 5);
  out.set([0x0a, t.length], 0);
  out.set(t, 2);
  out[2 + t.length] = 0x15;
  new DataView(out.buffer).setFloat32(3 + t.length, v, true);
  return out;
}

backendTest("a tensor on the device logs as the number, in call order", async (device: Device) => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    const c = FIX.scalars[1]; // 1/3 at step 1
    const x = tensor(c.value, { device }).mul(1);
    w.addScalar(c.tag, x, c.step!, c.walltime);
    w.addScalar("n", 5, 2, 1700000000);
    w.addScalar("t", tensor([7], { device }), 3, 1700000000);
    const hc = FIX.histograms.find((h) => h.name === "quantized 2d")!;
    const values = tensor(hc.values, { device }).reshape(hc.shape);
    w.addHistogram(`hist/${hc.name}`, values, hc.step, histOptions(hc));
    x.zero_(); // after the call: the logged value is the one at the call
    await w.close();
    const recs = await recordsIn(dir);
    assert.equal(hex(frameRecord(recs[1])), c.hex);
    assert.equal(one(decode(recs[2]), 2), 2n);
    assert.equal(one(sub(sub(decode(recs[3]), 5), 1), 2), 7);
    assert.equal(hex(frameRecord(recs[4])), hc.hex);
  });
});

Deno.test("bad input is a clear error", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    assert.throws(
      () => w.addScalar("a", 1, NaN),
      /addScalar: globalStep must be a finite number.*NaN/,
    );
    assert.throws(() => w.addScalar("a", 1, Infinity), /globalStep must be a finite number/);
    assert.throws(() => w.addScalar("a", 1, 0, NaN), /walltime must be a finite number/);
    assert.throws(
      () => w.addScalar(3 as unknown as string, 1),
      (e: Error) => e instanceof TypeError && /tag must be a string, got number 3/.test(e.message),
    );
    assert.throws(() => w.addText("a", 5 as unknown as string), /addText: text must be a string/);
    assert.throws(
      () => w.addScalar("a", tensor([1, 2])),
      /value must hold one element, got a tensor of shape \[2\] \(2 elements\) on cpu/,
    );
    assert.throws(
      () => w.addScalar("a", "1" as unknown as number),
      /number or a one-element tensor/,
    );
    assert.throws(() => w.addHistogram("h", []), /no element/);
    assert.throws(() => w.addHistogram("h", [1], 0, { bins: [0, 2, 1] }), /increase monotonically/);
    assert.throws(
      () => w.addHistogram("h", [1], 0, { bins: 2.5 }),
      /count of bins must be a positive integer, got 2.5/,
    );
    assert.throws(
      () => w.addHistogram("h", [1], 0, { maxBins: 0 }),
      /maxBins must be a positive integer/,
    );
    assert.throws(
      () => w.addHistogram("h", [1], 0, { bins: "stone" as unknown as "tensorflow" }),
      /bins must be "tensorflow", one of "auto", "fd", "doane", "scott", "rice", "sturges", "sqrt", a count or an array of edges, got string stone/,
    );
    assert.throws(
      () => w.addHparams([] as unknown as Record<string, number>, {}),
      /must be objects/,
    );
    assert.throws(
      () => w.addHparams({ lr: 0.1 }, {}, { hparamDomainDiscrete: { lr: ["a"] } }),
      /hparamDomainDiscrete\.lr must be an array of the type of hparamDict\.lr/,
    );
    // Found once the tensor is read: the next flush rejects, later events still go out.
    w.addHistogram("h", tensor([1, NaN]));
    w.addHistogram("h2", [1, 2], 0, { bins: [5, 6] });
    w.addScalar("after", 1, 1, 1700000000);
    await assert.rejects(w.flush(), /addHistogram\("h"\): values must be finite, element 1 is NaN/);
    await w.flush();
    await w.close();
    assert.throws(() => w.addScalar("a", 1), /addScalar: the writer of .* is closed/);
    const recs = await recordsIn(dir);
    assert.equal(recs.length, 2);
    assert.throws(
      () => new SummaryWriter({ logDir: dir, maxQueue: 0 }),
      /maxQueue must be a positive integer/,
    );
    assert.throws(
      () => new SummaryWriter({ logDir: dir, purgeStep: NaN }),
      /constructor: purgeStep must be a finite number/,
    );
  });
});

Deno.test("a writer never closed: its pending events are written when the program ends, Deno.exit too", async () => {
  await withTempDir(async (dir) => {
    const mod = new URL("../mod.ts", import.meta.url).href;
    for (const [name, ending] of [["returns", ""], ["exits", "Deno.exit(0);"]]) {
      const logDir = `${dir}/${name}`;
      // Fewer events than maxQueue and a long flushSecs: only the end of the program writes them.
      const script = `import { tensor, utils } from "${mod}";
const w = new utils.tensorboard.SummaryWriter({ logDir: ${JSON.stringify(logDir)} });
for (let step = 0; step < 3; step++) w.addScalar("loss", tensor([step + 0.5]), step);
w.addText("note", "last", 3);
// Reads resolve in call order: once this one has, so have the scalars' (a fixed sleep was too
// short under load, while the cpu backend started), and a turn later the writer has queued them.
await tensor([0]).data();
await new Promise((resolve) => setTimeout(resolve, 10));
${ending}`;
      await runProgram(script);
      const recs = await recordsIn(logDir);
      assert.equal(recs.length, 5, `${name}: the file-version event and 4 more`);
      assertFileVersion(recs[0]);
      recs.slice(1, 4).forEach((rec, step) => {
        // Step 0 is protobuf's default: not written.
        assert.equal(one(decode(rec), 2) ?? 0n, BigInt(step), `${name}: event ${step + 1}'s step`);
      });
    }
  });
});

Deno.test("Deno.exit right after the calls: events of known values are written, in order", async () => {
  await withTempDir(async (dir) => {
    const mod = new URL("../mod.ts", import.meta.url).href;
    // maxQueue 2: the third event starts a write of the first two, which Deno.exit must not lose.
    const script = `import { utils } from "${mod}";
const w = new utils.tensorboard.SummaryWriter({ logDir: ${JSON.stringify(dir)}, maxQueue: 2 });
for (let step = 0; step < 3; step++) w.addScalar("loss", step + 0.5, step);
w.addText("note", "last", 3);
w.addHistogram("h", [1, 2, 3], 4);
Deno.exit(0);`;
    await runProgram(script);
    const recs = await recordsIn(dir);
    assert.equal(recs.length, 6, "the file-version event and 5 more");
    assertFileVersion(recs[0]);
    recs.slice(1).forEach((rec, step) => {
      assert.equal(one(decode(rec), 2) ?? 0n, BigInt(step), `event ${step + 1}'s step`);
    });
  });
});

Deno.test("addHparams' run file has PyTorch's name: the writer's filenameSuffix is not used", async () => {
  // PyTorch 1.13 writes the run with SummaryWriter(log_dir=...): the default suffix "".
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir, filenameSuffix: ".main" });
    w.addHparams({ lr: 0.1 }, { m: 1 }, { runName: "run1" });
    await w.close();
    const [main] = await eventFiles(dir);
    assert.match(main, /\.main$/);
    const [run] = await eventFiles(`${dir}/run1`);
    assert.match(run, /^events\.out\.tfevents\.\d{10}\.[^/]+\.\d+\.\d+$/);
  });
});

Deno.test("a tensor read still running at Deno.exit: the events before it are written", async () => {
  await withTempDir(async (dir) => {
    const mod = new URL("../mod.ts", import.meta.url).href;
    const script = `import { tensor, utils } from "${mod}";
const w = new utils.tensorboard.SummaryWriter({ logDir: ${JSON.stringify(dir)} });
w.addScalar("a", 1, 0);
w.addScalar("b", tensor([2]), 1);
Deno.exit(0);`;
    await runProgram(script);
    const recs = await recordsIn(dir);
    assert.equal(recs.length, 2, "the file-version event and the number's");
    // Event field 5 is the summary, its field 1 the value, whose field 1 is the tag.
    assert.equal(str(one(sub(sub(decode(recs[1]), 5), 1), 1)), "a");
  });
});

// ---- images ----

interface ImageCase {
  method: "addImage" | "addImages";
  shape: number[];
  dataformats: string;
  values: number[];
  height: number;
  width: number;
  colorspace: number;
  mode: string;
  pixels: number[];
}

const IMAGES: { cases: ImageCase[] } = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_tensorboard_images.json", import.meta.url)),
);

/** The tag and `Summary.Image` fields of an image event, its PNG decoded. */
function imageOf(rec: Uint8Array) {
  const value = sub(sub(decode(rec), 5), 1);
  const image = sub(value, 4);
  const field = (n: number) => Number(one(image, n) ?? 0n);
  return {
    tag: str(one(value, 1)),
    height: field(1),
    width: field(2),
    colorspace: field(3),
    png: decodePng(one(image, 4) as Uint8Array),
  };
}

backendTest(
  "addImage and addImages: PyTorch 1.13's layouts, grid, scaling and Summary.Image fields; the PNG decodes to PIL's pixels",
  async (d: Device) => {
    await withTempDir(async (dir) => {
      const w = new SummaryWriter({ logDir: dir });
      for (const [i, c] of IMAGES.cases.entries()) {
        const t = tensor(c.values, { shape: c.shape, device: d });
        w[c.method](`image/${i}`, t, i, { dataformats: c.dataformats, walltime: 1000 + i });
      }
      await w.close();
      const recs = (await recordsIn(dir)).slice(1);
      assert.equal(recs.length, IMAGES.cases.length);
      for (const [i, c] of IMAGES.cases.entries()) {
        const got = imageOf(recs[i]);
        const what = `${c.method} ${JSON.stringify(c.shape)} ${c.dataformats}`;
        assert.equal(got.tag, `image/${i}`);
        assert.deepEqual(
          [got.height, got.width, got.colorspace],
          [c.height, c.width, c.colorspace],
          `${what}: fields`,
        );
        assert.deepEqual([got.png.height, got.png.width], [c.height, c.width], `${what}: PNG size`);
        const type = { RGB: 2, LA: 4, RGBA: 6 }[c.mode];
        assert.equal(got.png.type, type, `${what}: colour type`);
        assert.deepEqual(got.png.pixels, c.pixels, `${what}: pixels`);
        const ev = decode(recs[i]);
        assert.equal(one(ev, 1), 1000 + i);
        assert.equal(i === 0 ? undefined : Number(one(ev, 2)), i === 0 ? undefined : i);
      }
    });
  },
);

Deno.test("addImage: values outside [0, 1] are clipped (as PyTorch 2), NaN is 0; float64 and int32 tensors", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    w.addImage("clip", tensor([-0.5, 1.5, NaN, Infinity, -Infinity, 0.5], { shape: [6, 1] }), 0, {
      dataformats: "HW",
    });
    w.addImage("f64", tensor([0.25, 1], { shape: [1, 2], dtype: "float64" }), 1, {
      dataformats: "HW",
    });
    // An int32 tensor is scaled by 255 too (PyTorch: every dtype but uint8): 0 and 1 only show.
    w.addImage("int", tensor([0, 1, 2], { shape: [1, 3], dtype: "int32" }), 2, {
      dataformats: "HW",
    });
    await w.close();
    const recs = (await recordsIn(dir)).slice(1);
    const gray = (rec: Uint8Array) => imageOf(rec).png.pixels.filter((_, i) => i % 3 === 0);
    assert.deepEqual(gray(recs[0]), [0, 255, 0, 255, 0, 127]);
    assert.deepEqual(gray(recs[1]), [63, 255]);
    assert.deepEqual(gray(recs[2]), [0, 255, 255]);
  });
});

Deno.test("addImage and addImages: bad layouts and channel counts are clear errors at the call", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    const image = (shape: number[]) =>
      tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)), { shape });
    assert.throws(
      () => w.addImage("a", image([4, 6])),
      /SummaryWriter.addImage: dataformats does not fit the image \(shape \[4, 6\], dataformats "CHW"\)/,
    );
    assert.throws(
      () => w.addImage("a", image([3, 4, 4]), 0, { dataformats: "CHH" }),
      /dataformats does not fit the image \(shape \[3, 4, 4\], dataformats "CHH"\)/,
    );
    assert.throws(
      () => w.addImage("a", image([5, 4, 4])),
      /SummaryWriter.addImage: an image needs 1 \(gray\), 2 \(gray and alpha\), 3 \(RGB\) or 4 \(RGBA\) channels, got 5 \(shape \[5, 4, 4\], dataformats "CHW"\)/,
    );
    assert.throws(
      () => w.addImages("a", image([2, 4, 3, 3])),
      /SummaryWriter.addImages: an image needs 1 \(gray\) or 3 \(RGB\) channels, got 4/,
    );
    assert.throws(
      () => w.addImages("a", image([0, 3, 2, 2])),
      /the image has no pixel \(shape \[0, 3, 2, 2\]/,
    );
    assert.throws(
      () => w.addImage("a", [1, 2] as unknown as Tensor),
      /SummaryWriter.addImage: the image must be a tensor, got an array/,
    );
    await w.close();
    assert.throws(() => w.addImage("a", image([3, 2, 2])), /closed/);
  });
});

// ---- numpy's bin estimators ----

const BIN_RULES: {
  sets: { name: string; values: number[]; edges: Record<string, number[]> }[];
} = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/numpy_bin_rules.json", import.meta.url)),
);

Deno.test("numpy's bin estimators (bins 'auto', 'fd', 'doane', 'scott', 'rice', 'sturges', 'sqrt') give np.histogram_bin_edges' edges", () => {
  let compared = 0;
  for (const set of BIN_RULES.sets) {
    for (const [rule, edges] of Object.entries(set.edges)) {
      const got = ruleEdges(Float64Array.from(set.values), rule as "auto");
      assert.deepEqual([...got], edges, `${set.name}, bins "${rule}"`);
      compared++;
    }
  }
  assert.equal(compared, 63);
});

Deno.test("addHistogram with bins 'auto' writes the histogram over numpy's edges", async () => {
  const set = BIN_RULES.sets.find((s) => s.name === "student-t 500")!;
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    w.addHistogram("t", tensor(set.values), 3, { bins: "auto", walltime: 5 });
    await w.close();
    const [rec] = (await recordsIn(dir)).slice(1);
    const expected = makeHistogram(Float64Array.from(set.values), set.edges.auto);
    assert.equal(hex(rec), hex(encodeEvent(5, 3, { summaryValue: histogramValue("t", expected) })));
  });
});

// ---- precision-recall curves ----

/** A case's data: from the fixture, or made by the formula of tests/fixtures/torch_tensorboard.py. */
function prData(c: PrCase): { labels: number[]; predictions: number[]; weights: number[] | null } {
  if (c.generated === null) return { ...c, predictions: c.predictions.map((v) => v ?? NaN) };
  const k = Array.from({ length: c.generated }, (_, i) => i);
  const predictions = k.map((i) => Math.fround(((i * 7919) % 10007) / 10007 * 1.1 - 0.05));
  [predictions[0], predictions[1]] = [NaN, 1];
  return {
    labels: k.map((i) => ((i * 31) % 7 < 3 ? 1 : 0)),
    predictions,
    weights: c.weighted ? k.map((i) => ((i * 13) % 17) / 8) : null,
  };
}

backendTest(
  "addPrCurve writes PyTorch 1.13's records (compute_curve, thresholds, weights, NaN and out-of-range predictions)",
  async (d: Device) => {
    await withTempDir(async (dir) => {
      const w = new SummaryWriter({ logDir: dir });
      for (const [i, c] of FIX.prCurves.entries()) {
        const { labels, predictions, weights } = prData(c);
        // Labels as an int32 tensor, predictions as float32, weights as numbers.
        w.addPrCurve(
          `pr/${i}`,
          tensor(labels, { dtype: "int32", device: d }),
          tensor(predictions, { device: d }),
          c.step,
          { numThresholds: c.numThresholds, weights: weights ?? undefined, walltime: c.walltime },
        );
      }
      await w.close();
      const recs = (await recordsIn(dir)).slice(1);
      assert.deepEqual(recs.map((r) => hex(frameRecord(r))), FIX.prCurves.map((c) => c.hex));
    });
  },
);

Deno.test("addPrCurve buckets float64 predictions (a float64 tensor or numbers) in float64, as compute_curve does", async () => {
  for (const asTensor of [true, false]) {
    await withTempDir(async (dir) => {
      const w = new SummaryWriter({ logDir: dir });
      for (const [i, c] of FIX.prCurves64.entries()) {
        // Just below a threshold: float32 would round these up into the next bucket.
        const predictions = c.predictions as number[];
        w.addPrCurve(
          `pr64/${i}`,
          c.labels,
          asTensor ? tensor(predictions, { dtype: "float64" }) : predictions,
          c.step,
          { numThresholds: c.numThresholds, walltime: c.walltime },
        );
      }
      await w.close();
      const recs = (await recordsIn(dir)).slice(1);
      assert.deepEqual(recs.map((r) => hex(frameRecord(r))), FIX.prCurves64.map((c) => c.hex));
    });
  }
});

Deno.test("addPrCurve: bad input is a clear error at the call", async () => {
  await withTempDir(async (dir) => {
    const w = new SummaryWriter({ logDir: dir });
    assert.throws(
      () => w.addPrCurve("pr", [1, 0], [0.5]),
      /SummaryWriter.addPrCurve: labels, predictions must have as many elements, got 2, 1/,
    );
    assert.throws(
      () => w.addPrCurve("pr", [1], [0.5], 0, { weights: [1, 2] }),
      /labels, predictions and weights must have as many elements, got 1, 1, 2/,
    );
    assert.throws(
      () => w.addPrCurve("pr", [1], [0.5], 0, { numThresholds: 1 }),
      /numThresholds must be an integer of at least 2, got 1/,
    );
    assert.throws(
      () => w.addPrCurve("pr", "1" as unknown as number[], [0.5]),
      /labels must be a tensor or numbers, got string 1/,
    );
    await w.close();
  });
});
