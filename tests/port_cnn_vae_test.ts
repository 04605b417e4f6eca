/**
 * Two PyTorch 1.13 programs ported line by line (tests/fixtures/port_cnn_vae.py): a CNN classifier
 * (same-padded and strided grouped convolutions, BatchNorm2d, pooling, dropout, a shuffled
 * DataLoader with its own Generator, nesterov SGD under OneCycleLR, train/eval and a no-grad
 * evaluation) and a VAE (reparameterization with given noise, sigmoid decoder, summed binary
 * cross-entropy + KL, Adam with amsgrad). Each step's loss, the learning rates, the batch order,
 * the final parameters and buffers and the evaluation numbers equal PyTorch's.
 * @module
 */

import assert from "node:assert/strict";
import { data, type Device, Generator, nn, noGrad, optim, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";
import fixture from "./fixtures/port_cnn_vae.json" with { type: "json" };

const F = nn.functional;

interface Stored {
  shape: number[];
  values: number[];
}

/** A fixture tensor on `device`. */
function load(t: Stored, device: Device, dtype: "float32" | "int32" = "float32"): Tensor {
  return tensor(t.values, { shape: t.shape, dtype, device });
}

/** PyTorch's state dict as tensors (`num_batches_tracked` is an int32 counter here). */
function stateDict(sd: Record<string, Stored>, device: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(sd).map((
      [key, t],
    ) => [key, load(t, device, key.endsWith("num_batches_tracked") ? "int32" : "float32")]),
  );
}

/** The state dict equals PyTorch's: same keys in the same order, close values. */
async function assertState(
  model: nn.Module,
  expected: Record<string, Stored>,
  tol: { atol: number; rtol: number },
): Promise<void> {
  const got = model.stateDict();
  assert.deepEqual(Object.keys(got), Object.keys(expected), "state-dict keys in PyTorch's order");
  for (const [key, t] of Object.entries(expected)) {
    assert.deepEqual([...got[key].shape], t.shape, `${key}: shape`);
    assertClose(await got[key].data(), t.values, { ...tol, what: key });
  }
}

// ---- (a) the CNN classifier ----

class CNN extends nn.Module {
  features: nn.Sequential;
  head: nn.Linear;
  constructor(dropout: number, device: Device) {
    super();
    this.features = new nn.Sequential(
      new nn.Conv2d(2, 4, 3, { padding: "same", device }),
      new nn.BatchNorm2d(4, { device }),
      new nn.ReLU(),
      new nn.MaxPool2d(2),
      new nn.Conv2d(4, 6, 3, { stride: 2, groups: 2, device }),
      new nn.ReLU(),
      new nn.Dropout(dropout),
      new nn.AdaptiveAvgPool2d(1),
      new nn.Flatten(),
    );
    this.head = new nn.Linear(6, 3, { device });
  }
  override forward(x: Tensor): Tensor {
    return this.head.forward(this.features.forward(x));
  }
}

backendTest("port cnn: nesterov SGD + OneCycleLR over a shuffled DataLoader", async (device) => {
  const c = fixture.cnn;
  const images = load(c.images as Stored, device);
  const labels = tensor(c.labels, { dtype: "int32", device });
  // nn.Dropout draws from the global stream, which is not PyTorch's: the fixture trains with p=0.
  const cnn = new CNN(c.dropout, device);
  cnn.loadStateDict(stateDict(c.init as Record<string, Stored>, device));
  const loader = new data.DataLoader(new data.TensorDataset(images, labels), {
    batchSize: 4,
    shuffle: true,
    generator: new Generator().manualSeed(0),
    dropLast: false,
  });
  const opt = new optim.SGD(cnn.parameters(), {
    lr: 0.05,
    momentum: 0.9,
    nesterov: true,
    weightDecay: 5e-4,
  });
  const sched = new optim.lrScheduler.OneCycleLR(opt, {
    maxLr: 0.1,
    epochs: c.epochs,
    stepsPerEpoch: loader.length,
  });
  const losses: number[] = [];
  const lrs: number[] = [];
  const batches: number[][] = [];
  for (let epoch = 0; epoch < c.epochs; epoch++) {
    cnn.train();
    for (const [x, y] of loader) {
      batches.push(Array.from(await y.data()));
      opt.zeroGrad();
      const loss = F.crossEntropy(cnn.forward(x), y);
      loss.backward();
      opt.step();
      sched.step();
      losses.push(await loss.item());
      lrs.push(sched.getLastLr()[0]);
    }
  }
  cnn.eval();
  // `with torch.no_grad():` around reads is two steps: noGrad refuses an async body.
  const [evalLossSum, correctCount] = noGrad(() => {
    const logits = cnn.forward(images);
    return [
      F.crossEntropy(logits, labels, { reduction: "sum" }),
      logits.argmax(1).eq(labels).sum(),
    ];
  });
  const [evalLoss, correct] = [await evalLossSum.item(), await correctCount.item()];

  assert.deepEqual(batches, c.batches, "batch order of the seeded shuffle");
  assertClose(lrs, c.lrs, { rtol: 1e-12, atol: 0, what: "OneCycleLR learning rates" });
  // float32 sums in another order: 1e-5 after one step, growing with the 9 nesterov steps.
  const tol = { atol: 2e-5, rtol: 2e-4 };
  assertClose(losses, c.losses, { ...tol, what: "losses" });
  await assertState(cnn, c.final as Record<string, Stored>, tol);
  assertClose(evalLoss, c.eval_loss, { ...tol, what: "eval loss (sum)" });
  assert.equal(correct, c.correct, "eval accuracy");
});

// ---- (b) the VAE ----

class VAE extends nn.Module {
  enc: nn.Linear;
  mu: nn.Linear;
  logvar: nn.Linear;
  dec1: nn.Linear;
  dec2: nn.Linear;
  constructor(d: number, hidden: number, z: number, device: Device) {
    super();
    this.enc = new nn.Linear(d, hidden, { device });
    this.mu = new nn.Linear(hidden, z, { device });
    this.logvar = new nn.Linear(hidden, z, { device });
    this.dec1 = new nn.Linear(z, hidden, { device });
    this.dec2 = new nn.Linear(hidden, d, { device });
  }
  override forward(x: Tensor, eps: Tensor): Tensor[] {
    const h = F.relu(this.enc.forward(x));
    const [mu, logvar] = [this.mu.forward(h), this.logvar.forward(h)];
    const z = mu.add(eps.mul(logvar.mul(0.5).exp()));
    return [this.dec2.forward(F.relu(this.dec1.forward(z))).sigmoid(), mu, logvar];
  }
}

function vaeLoss(recon: Tensor, x: Tensor, mu: Tensor, logvar: Tensor): Tensor {
  const bce = F.binaryCrossEntropy(recon, x, { reduction: "sum" });
  const kl = logvar.add(1).sub(mu.pow(2)).sub(logvar.exp()).sum().mul(-0.5);
  return bce.add(kl);
}

backendTest("port vae: BCE(sum) + KL with given noise, Adam(amsgrad)", async (device) => {
  const v = fixture.vae;
  const x = load(v.data, device);
  const noise = load(v.noise, device);
  const vae = new VAE(x.shape[1], 8, noise.shape[1], device);
  vae.loadStateDict(stateDict(v.init as Record<string, Stored>, device));
  const opt = new optim.Adam(vae.parameters(), { lr: 0.01, amsgrad: true });
  const losses: number[] = [];
  for (let step = 0; step < v.losses.length; step++) {
    opt.zeroGrad();
    const [recon, mu, logvar] = vae.forward(x, noise);
    const loss = vaeLoss(recon, x, mu, logvar);
    loss.backward();
    opt.step();
    losses.push(await loss.item());
  }
  // Adam divides by sqrt of tiny second moments in the first steps: 12 steps stay within 1e-4.
  const tol = { atol: 2e-5, rtol: 2e-4 };
  assertClose(losses, v.losses, { ...tol, what: "losses" });
  await assertState(vae, v.final as Record<string, Stored>, tol);
});
