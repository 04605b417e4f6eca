/**
 * Nested checkpoints (`save({ model, optimizer, epoch }, path)` / `load`),
 * the global generator's state (`getRngState` / `setRngState`), and a
 * training run interrupted and resumed from a checkpoint that continues
 * bit for bit as the uninterrupted run (dropout, unseeded shuffling,
 * momentum, a learning-rate schedule).
 */

import assert from "node:assert/strict";
import {
  data,
  type Device,
  fromSafetensors,
  fromSafetensorsWithMetadata,
  getRngState,
  load,
  manualSeed,
  nn,
  optim,
  rand,
  randn,
  save,
  setRngState,
  type Tensor,
  tensor,
  tidy,
  toSafetensors,
  zeros,
} from "../mod.ts";
import { backendTest } from "./harness.ts";

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_checkpoint_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function values(t: Tensor): Promise<number[]> {
  return Array.from(await t.data());
}

backendTest(
  "save/load a nested checkpoint: same shape, tensors as dotted entries",
  async (device) => {
    await withTempDir(async (dir) => {
      manualSeed(1);
      const model = new nn.Sequential(new nn.Linear(3, 4), new nn.ReLU(), new nn.Linear(4, 2)).to(
        device,
      );
      const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
      model.forward(randn([5, 3], { device })).sum().backward();
      opt.step();
      const scheduler = new optim.lrScheduler.ReduceLROnPlateau(opt);
      const shared = tensor([7, 8], { device });
      const checkpoint = {
        model: model.stateDict(),
        optimizer: opt.stateDict(),
        scheduler: scheduler.stateDict(),
        epoch: 3,
        name: "run-1",
        flags: [true, false, null],
        numbers: { nan: NaN, inf: Infinity, minusInf: -Infinity, minusZero: -0 },
        tagged: { $tensor: "model.0.weight", $number: "NaN" },
        list: [shared, { again: shared, int: tensor([1, 2], { device, dtype: "int32" }) }] as [
          Tensor,
          { again: Tensor; int: Tensor },
        ],
      };
      const path = `${dir}/ckpt.safetensors`;
      await save(checkpoint, path);

      // In the file: one entry per distinct tensor, named by its path; the rest is metadata JSON.
      const raw = fromSafetensorsWithMetadata(await Deno.readFile(path), { device: "cpu" });
      assert.deepEqual(Object.keys(raw.tensors).sort(), [
        "list.0",
        "list.1.int",
        "model.0.bias",
        "model.0.weight",
        "model.2.bias",
        "model.2.weight",
        "optimizer.state.0.exp_avg",
        "optimizer.state.0.exp_avg_sq",
        "optimizer.state.1.exp_avg",
        "optimizer.state.1.exp_avg_sq",
        "optimizer.state.2.exp_avg",
        "optimizer.state.2.exp_avg_sq",
        "optimizer.state.3.exp_avg",
        "optimizer.state.3.exp_avg_sq",
      ]);
      assert.equal(typeof raw.metadata["multigrad.checkpoint"], "string");

      const back = await load<typeof checkpoint>(path, { device });
      assert.equal(back.epoch, 3);
      assert.equal(back.name, "run-1");
      assert.deepEqual(back.flags, [true, false, null]);
      assert.ok(Number.isNaN(back.numbers.nan));
      assert.equal(back.numbers.inf, Infinity);
      assert.equal(back.numbers.minusInf, -Infinity);
      assert.ok(Object.is(back.numbers.minusZero, -0));
      assert.deepEqual(back.tagged, { $tensor: "model.0.weight", $number: "NaN" });
      assert.equal(back.list[1].again, back.list[0], "a tensor saved twice loads as one");
      assert.deepEqual(await values(back.list[0]), [7, 8]);
      assert.equal(back.list[1].int.dtype, "int32");
      assert.deepEqual(back.scheduler, scheduler.stateDict());
      assert.deepEqual(back.optimizer.param_groups, opt.stateDict().param_groups);
      assert.equal(back.optimizer.state[2].step, 1);
      for (const [k, t] of Object.entries(model.stateDict())) {
        assert.equal(back.model[k].device, device);
        assert.deepEqual(await values(back.model[k]), await values(t), k);
      }
      // It loads straight into a fresh model and optimizer.
      const fresh = new nn.Sequential(new nn.Linear(3, 4), new nn.ReLU(), new nn.Linear(4, 2)).to(
        device,
      );
      fresh.loadStateDict(back.model);
      const freshOpt = new optim.Adam(fresh.parameters(), { lr: 0.5 });
      freshOpt.loadStateDict(back.optimizer);
      assert.equal(freshOpt.paramGroups[0].lr, 0.01);

      // The same through bytes, for browsers.
      const bytes = await toSafetensors(checkpoint);
      const again = fromSafetensors<typeof checkpoint>(bytes, { device });
      assert.equal(again.epoch, 3);
      assert.deepEqual(
        await values(again.model["2.bias"]),
        await values(model.stateDict()["2.bias"]),
      );
    });
  },
);

backendTest(
  "a flat state dict is written as before: no structure, PyTorch's layout",
  async (device) => {
    const sd = { w: tensor([1, 2], { device }), b: tensor([3], { device }) };
    const bytes = await toSafetensors(sd, { metadata: { note: "x" } });
    const { tensors, metadata } = fromSafetensorsWithMetadata(bytes, { device });
    assert.deepEqual(metadata, { note: "x" });
    assert.deepEqual(Object.keys(tensors).sort(), ["b", "w"]);
    const flat = fromSafetensors(bytes, { device });
    assert.deepEqual(await values(flat.w), [1, 2]);
  },
);

Deno.test("nested checkpoint errors name the path", async () => {
  const t = zeros([1]);
  await assert.rejects(
    () => toSafetensors({ "a.b": t, a: { b: zeros([2]) } }),
    /two tensors get the entry name "a.b" \(keys \["a.b"\] and \["a","b"\]\); rename a key/,
  );
  const loop: Record<string, unknown> = { t };
  loop.self = loop;
  await assert.rejects(() => toSafetensors({ x: loop }), /the value at "x.self" contains itself/);
  await assert.rejects(
    () => toSafetensors({ t, m: new Map() }),
    /the value at "m" is a Map; a checkpoint holds tensors/,
  );
  await assert.rejects(() => toSafetensors({ t, u: undefined }), /the value at "u" is undefined/);
  await assert.rejects(
    () => toSafetensors({ t, e: 1 }, { metadata: { "multigrad.checkpoint": "{}" } }),
    /the metadata key "multigrad.checkpoint" is reserved/,
  );
  const gone = zeros([1]);
  gone.dispose();
  await assert.rejects(
    () => toSafetensors({ deep: { gone } }),
    /tensor at "deep.gone" was disposed/,
  );
  // A file whose structure and entries disagree is refused, not half loaded.
  const good = await toSafetensors({ a: { t }, n: 1 });
  const { tensors, metadata } = fromSafetensorsWithMetadata(good);
  const missing = await toSafetensorsRaw(tensors, {
    "multigrad.checkpoint": metadata["multigrad.checkpoint"].replace("a.t", "a.missing"),
  });
  assert.throws(
    () => fromSafetensors(missing),
    /refers to tensor "a.missing", which the file lacks/,
  );
  const unused = await toSafetensorsRaw({ ...tensors, stray: zeros([1]) }, metadata);
  assert.throws(
    () => fromSafetensors(unused),
    /tensors its checkpoint structure does not mention: stray/,
  );
});

/** Bytes with exactly these entries and metadata (bypassing the reserved-key check). */
async function toSafetensorsRaw(
  tensors: Record<string, Tensor>,
  metadata: Record<string, string>,
): Promise<Uint8Array> {
  const { encodeSafetensors } = await import("../src/serialization/safetensors.ts");
  const raw: Record<string, { dtype: "float32"; shape: number[]; data: Float32Array }> = {};
  for (const [k, t] of Object.entries(tensors)) {
    raw[k] = { dtype: "float32", shape: [...t.shape], data: (await t.data()) as Float32Array };
  }
  return encodeSafetensors(raw, metadata);
}

Deno.test("getRngState/setRngState: the same numbers follow; bad states are refused", async () => {
  manualSeed(5);
  rand([3]);
  const state = getRngState();
  assert.match(state, /^splitmix64:[0-9a-f]{16}$/);
  const a = await values(rand([4]));
  const b = await values(randn([4]));
  setRngState(state);
  assert.deepEqual(await values(rand([4])), a);
  assert.deepEqual(await values(randn([4])), b);
  assert.notEqual(getRngState(), state, "drawing advances the state");
  assert.throws(() => setRngState("mt19937:00"), /expected a state from getRngState\(\)/);
  assert.throws(() => setRngState(42 as unknown as string), /got number/);
});

/** A run of `epochs` epochs over a fixed data set: dropout, unseeded shuffles, SGD momentum, StepLR. */
class Run {
  readonly model: nn.Sequential;
  readonly opt: optim.SGD;
  readonly scheduler: optim.lrScheduler.StepLR;
  readonly loader: data.DataLoader<Tensor[]>;

  constructor(device: Device) {
    manualSeed(10);
    const x = randn([12, 3], { device });
    const y = randn([12, 1], { device });
    this.model = new nn.Sequential(
      new nn.Linear(3, 8),
      new nn.ReLU(),
      new nn.Dropout(0.3),
      new nn.Linear(8, 1),
    ).to(device);
    this.opt = new optim.SGD(this.model.parameters(), { lr: 0.05, momentum: 0.9 });
    this.scheduler = new optim.lrScheduler.StepLR(this.opt, 1, { gamma: 0.7 });
    this.loader = new data.DataLoader(new data.TensorDataset(x, y), {
      batchSize: 5,
      shuffle: true,
    });
  }

  epoch(): void {
    for (const [xb, yb] of this.loader) {
      tidy(() => {
        this.opt.zeroGrad();
        nn.functional.mseLoss(this.model.forward(xb), yb).backward();
        this.opt.step();
      });
    }
    this.scheduler.step();
  }
}

backendTest("a run resumed from a nested checkpoint continues exactly", async (device) => {
  await withTempDir(async (dir) => {
    const whole = new Run(device);
    for (let e = 0; e < 4; e++) whole.epoch();
    const expected = await Promise.all(whole.model.parameters().map(values));

    const first = new Run(device);
    for (let e = 0; e < 2; e++) first.epoch();
    const path = `${dir}/resume.safetensors`;
    await save({
      model: first.model.stateDict(),
      optimizer: first.opt.stateDict(),
      scheduler: first.scheduler.stateDict(),
      epoch: 2,
      rng: getRngState(),
    }, path);

    // A new process: other numbers drawn meanwhile, everything rebuilt, then restored.
    manualSeed(12345);
    rand([100]);
    const resumed = new Run(device);
    const ckpt = await load<{
      model: Record<string, Tensor>;
      optimizer: optim.OptimizerStateDict;
      scheduler: optim.lrScheduler.SchedulerStateDict;
      epoch: number;
      rng: string;
    }>(path, { device });
    resumed.model.loadStateDict(ckpt.model);
    resumed.opt.loadStateDict(ckpt.optimizer);
    resumed.scheduler.loadStateDict(ckpt.scheduler);
    setRngState(ckpt.rng);
    for (let e = ckpt.epoch; e < 4; e++) resumed.epoch();
    const got = await Promise.all(resumed.model.parameters().map(values));
    assert.deepEqual(got, expected);

    // Without the generator's state the dropout masks and shuffles differ.
    const noRng = new Run(device);
    noRng.model.loadStateDict(ckpt.model);
    noRng.opt.loadStateDict(ckpt.optimizer);
    noRng.scheduler.loadStateDict(ckpt.scheduler);
    for (let e = ckpt.epoch; e < 4; e++) noRng.epoch();
    assert.notDeepEqual(await Promise.all(noRng.model.parameters().map(values)), expected);
  });
});
