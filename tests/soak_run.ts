/**
 * The soak test's child process: trains a small MLP with Adam for `steps`
 * steps on one backend as a PyTorch user writes the loop (no `tidy`, no
 * `dispose`, the loss read every `readEvery` steps) and prints JSON samples of
 * `bytesInUse` and RSS. A process of its own, so that RSS is this loop's
 * alone and not that of tests running beside it.
 *
 * Usage: `deno run -A --v8-flags=--expose-gc tests/soak_run.ts <backend> <steps> <in,hidden,classes,batch> <readEvery>`;
 * with `--expose-gc` the JavaScript heap is also measured after a full
 * collection at a quarter of the steps and at the end (nothing else collects).
 * @module
 */

import { manualSeed, nn, optim, randn, requestDevices, tensor } from "../mod.ts";

const [backend, stepsArg, sizesArg, readEveryArg] = Deno.args;
const steps = Number(stepsArg);
const readEvery = Number(readEveryArg);
const [inputs, hidden, classes, batch] = sizesArg.split(",").map(Number);
const collect = (globalThis as { gc?: () => void }).gc;
const [device] = await requestDevices({ backend });
manualSeed(7);
const model = new nn.Sequential(
  new nn.Linear(inputs, hidden),
  new nn.ReLU(),
  new nn.Linear(hidden, classes),
).to(device);
const opt = new optim.Adam(model.parameters(), { lr: 1e-3 });
const lossFn = new nn.CrossEntropyLoss();
const x = randn([batch, inputs], { device });
const y = tensor(Array.from({ length: batch }, (_, i) => i % classes), { dtype: "int32", device });
const samples: { step: number; bytesInUse: number; rss: number; heapUsed: number }[] = [];
const heapAfterGc: number[] = [];
const every = Math.max(1, Math.floor(steps / 20));
let firstLoss = NaN;
let lastLoss = NaN;
const started = performance.now();
for (let step = 1; step <= steps; step++) {
  opt.zeroGrad();
  const loss = lossFn.forward(model.forward(x), y);
  loss.backward();
  opt.step();
  if (step === 1 || step % readEvery === 0) lastLoss = await loss.item();
  if (step === 1) firstLoss = lastLoss;
  if (step % every === 0) {
    const { rss, heapUsed } = Deno.memoryUsage();
    samples.push({ step, bytesInUse: device.memory().bytesInUse, rss, heapUsed });
    if (collect && (step === 5 * every || step === steps)) {
      collect();
      heapAfterGc.push(Deno.memoryUsage().heapUsed);
    }
  }
}
const msPerStep = (performance.now() - started) / steps;
console.log(
  JSON.stringify({ backend, steps, msPerStep, firstLoss, lastLoss, samples, heapAfterGc }),
);
