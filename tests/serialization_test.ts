/**
 * Serialization of state dicts: toSafetensors/fromSafetensors, save/load
 * through a temporary directory, module round trips, errors, and (when
 * /usr/bin/python3 has torch) PyTorch loading what multigrad saved.
 */

import assert from "node:assert/strict";
import {
  fromSafetensors,
  fromSafetensorsWithMetadata,
  load,
  manualSeed,
  nn,
  optim,
  randn,
  save,
  type Tensor,
  tensor,
  toSafetensors,
  zeros,
} from "../mod.ts";
import {
  decodeSafetensors,
  encodeSafetensors,
  type RawTensor,
} from "../src/serialization/safetensors.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import { PYTHON, pythonHasTorch } from "./torch_python.ts";

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad-serialization-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function mlp(): nn.Sequential {
  return new nn.Sequential(new nn.Linear(6, 8), new nn.ReLU(), new nn.Linear(8, 3));
}

backendTest(
  "toSafetensors/fromSafetensors round trip: dtypes, shapes, scalars, empty tensors",
  async (device) => {
    const sd: Record<string, Tensor> = {
      "w.float": tensor([[1.5, -2], [3, 4.25]], { device }),
      "i.int": tensor([1, -2, 2147483647], { device, dtype: "int32" }),
      scalar: tensor(3.5, { device }),
      empty: zeros([0, 3], { device }),
    };
    const bytes = await toSafetensors(sd, { metadata: { format: "pt" } });
    const decoded = decodeSafetensors(bytes);
    assert.deepEqual(decoded.metadata, { format: "pt" });
    assert.deepEqual(decoded.tensors["i.int"].shape, [3]);
    const back = fromSafetensors(bytes, { device });
    assert.deepEqual(Object.keys(back).sort(), Object.keys(sd).sort());
    for (const [k, t] of Object.entries(sd)) {
      assert.equal(back[k].device, device, k);
      assert.equal(back[k].dtype, t.dtype, k);
      assert.deepEqual([...back[k].shape], [...t.shape], k);
      assert.deepEqual(await back[k].data(), await t.data(), k);
    }
    // The same bytes as the codec writes from the raw records.
    const raw: Record<string, RawTensor> = {};
    for (const [k, t] of Object.entries(sd)) {
      raw[k] = {
        dtype: t.dtype,
        shape: [...t.shape],
        data: await t.data(),
      };
    }
    assert.deepEqual(bytes, encodeSafetensors(raw, { format: "pt" }));
  },
);

backendTest("toSafetensors reads the values at the call, before later updates", async (device) => {
  const w = tensor([1, 2], { device });
  const pending = toSafetensors({ w });
  w._assign(tensor([5, 6], { device }));
  await assertTensor(fromSafetensors(await pending).w, [1, 2]);
});

backendTest(
  "float64 loads on the cpu, and is refused with a clear error where unsupported",
  async (device) => {
    const bytes = encodeSafetensors({
      d: { dtype: "float64", shape: [2], data: Float64Array.of(0.1, 0.2) },
    });
    const cpu = fromSafetensors(bytes, { device: "cpu" });
    assert.equal(cpu.d.dtype, "float64");
    assert.deepEqual(Array.from(await cpu.d.data()), [0.1, 0.2]);
    if (!device.backendDevice.dtypes.includes("float64")) {
      assert.throws(
        () => fromSafetensors(bytes, { device }),
        /tensor "d" has dtype float64, which .* does not support/,
      );
    }
  },
);

backendTest(
  "save/load a module's state dict through a file; the loaded model computes the same",
  async (device) => {
    await withTempDir(async (dir) => {
      manualSeed(3);
      const a = new nn.Sequential(
        new nn.Linear(4, 5),
        new nn.BatchNorm1d(5),
        new nn.ReLU(),
        new nn.Linear(5, 2),
      ).to(
        device,
      );
      a.forward(randn([6, 4], { device })); // updates the running statistics
      a.eval();
      const path = `${dir}/model.safetensors`;
      await save(a.stateDict(), path);
      const loaded = await load(path, { device });
      // The file orders tensors by dtype and name, as the reference writer does.
      assert.deepEqual(Object.keys(loaded).sort(), Object.keys(a.stateDict()).sort());
      assert.equal(loaded["1.num_batches_tracked"].dtype, "int32");
      manualSeed(4);
      const b = new nn.Sequential(
        new nn.Linear(4, 5),
        new nn.BatchNorm1d(5),
        new nn.ReLU(),
        new nn.Linear(5, 2),
      ).to(
        device,
      );
      b.loadStateDict(loaded);
      b.eval();
      const x = randn([3, 4], { device });
      assert.deepEqual(await b.forward(x).data(), await a.forward(x).data());
      // Saving again replaces the file atomically, leaving no temporary files.
      await save(b.stateDict(), new URL(`file://${path}`));
      assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["model.safetensors"]);
    });
  },
);

backendTest("an optimizer's state tensors can be saved too", async (device) => {
  const model = mlp().to(device);
  const opt = new optim.Adam(model.parameters());
  model.forward(randn([2, 6], { device })).sum().backward();
  opt.step();
  const sd = opt.stateDict();
  const flat: Record<string, Tensor> = {};
  for (const [i, s] of Object.entries(sd.state)) {
    for (const [k, v] of Object.entries(s)) if (typeof v !== "number") flat[`${i}.${k}`] = v;
  }
  const back = fromSafetensors(await toSafetensors(flat), { device });
  assert.deepEqual(await back["0.exp_avg"].data(), await (sd.state[0].exp_avg as Tensor).data());
});

backendTest("serialization errors name the key or the path", async (device) => {
  await assert.rejects(
    () => toSafetensors({ a: zeros([1], { device }), b: { c: () => 1 } }),
    /the value at "b.c" is function; a checkpoint holds tensors, numbers/,
  );
  await assert.rejects(
    () => toSafetensors(null as unknown as Record<string, Tensor>),
    /expected a state dict/,
  );
  const gone = zeros([2], { device });
  gone.dispose();
  await assert.rejects(() => toSafetensors({ gone }), /tensor for "gone" was disposed/);
  assert.throws(() => fromSafetensors(new Uint8Array([1, 2, 3])), /safetensors/);
  assert.throws(() => fromSafetensors("abc" as unknown as Uint8Array), /expected a Uint8Array/);
  await assert.rejects(
    () => load("/nonexistent/dir/model.safetensors"),
    /load: could not read "\/nonexistent\/dir\/model.safetensors"/,
  );
  await assert.rejects(
    () => save({ w: zeros([1], { device }) }, "/nonexistent/dir/model.safetensors"),
    /\/nonexistent\/dir\/model.safetensors/,
  );
  await withTempDir(async (dir) => {
    await Deno.writeFile(`${dir}/bad.safetensors`, new Uint8Array(16));
    await assert.rejects(
      () => load(`${dir}/bad.safetensors`),
      /load: ".*bad.safetensors": safetensors:/,
    );
  });
});

Deno.test({
  name: "PyTorch loads what multigrad saved (when /usr/bin/python3 has torch)",
  ignore: !(await pythonHasTorch()),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    await withTempDir(async (dir) => {
      const model = mlp();
      model.loadStateDict(
        Object.fromEntries(
          Object.entries(fixtures.mlp.params).map(([k, v]) => [k, tensor(v as number[][])]),
        ),
      );
      const path = `${dir}/mlp.safetensors`;
      await save(model.stateDict(), path);
      // The format by hand (the safetensors package is not installed), then load_state_dict(strict=True).
      const script = `
import json, struct, sys, torch
from torch import nn
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
kinds = {"F32": torch.float32, "I32": torch.int32, "F64": torch.float64}
sd = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    a, b = info["data_offsets"]
    t = torch.frombuffer(bytearray(data[a:b]), dtype=kinds[info["dtype"]]) if b > a else torch.zeros(0)
    sd[name] = t.reshape(info["shape"])
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
model.load_state_dict(sd, strict=True)
x = torch.tensor(json.loads(sys.argv[2]))
print(json.dumps(model(x).tolist()))
`;
      const { success, stdout, stderr } = await new Deno.Command(PYTHON, {
        args: ["-c", script, path, JSON.stringify(fixtures.mlp.input)],
      }).output();
      assert.ok(success, new TextDecoder().decode(stderr));
      const torchOut = JSON.parse(new TextDecoder().decode(stdout)) as number[][];
      const ours = await model.forward(tensor(fixtures.mlp.input)).data();
      // Equal up to float32 summation order.
      assertClose(ours, torchOut.flat(), { atol: 1e-6, rtol: 1e-6 });
    });
  },
});

Deno.test("fromSafetensorsWithMetadata gives back the metadata save() wrote", async () => {
  const bytes = await toSafetensors({ w: tensor([1, 2]) }, { metadata: { epoch: "3" } });
  const { tensors, metadata } = fromSafetensorsWithMetadata(bytes);
  assert.deepEqual(metadata, { epoch: "3" });
  assert.deepEqual(await tensors.w.toArray(), [1, 2]);
});
