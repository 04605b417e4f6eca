/**
 * The `grad_fn=<...>` that printing shows, against PyTorch 1.13's
 * `type(t.grad_fn).__name__` for the same expressions
 * (tests/fixtures/grad_fn_names.json, made by grad_fn_names.py). Every
 * fixture case is either written here as multigrad code or listed with why it
 * has no counterpart; the known mismatches are listed with what we print and
 * why, so that a change to any of them (fixed or newly broken) fails.
 * @module
 */

import assert from "node:assert/strict";
import {
  cat,
  type Device,
  dot,
  maximum,
  minimum,
  nn,
  pow,
  stack,
  type Tensor,
  tensor,
  where,
} from "../mod.ts";
import { backendTest, floats } from "./harness.ts";
import fixture from "./fixtures/grad_fn_names.json" with { type: "json" };

const F = nn.functional;

/** The fixture's inputs (see grad_fn_names.py), on `d`. */
function inputs(d: Device) {
  const leaf = (shape: number[], seed: number) =>
    tensor(floats(shape, seed), { shape, device: d, requiresGrad: true });
  return {
    x: leaf([2, 3], 1),
    y: leaf([2, 3], 2),
    v: leaf([3], 3),
    w: leaf([3], 4),
    m: leaf([3, 4], 5),
    a: leaf([2, 3, 4], 6),
    c: leaf([2, 4, 5], 7),
    img: leaf([2, 3, 4, 4], 8),
    idx: tensor([1, 0], { dtype: "int32", device: d }),
    cls: tensor([2, 0], { dtype: "int32", device: d }),
    prob: tensor(floats([2, 3], 9, 0.1, 0.9), { shape: [2, 3], device: d }),
  };
}
type Inputs = ReturnType<typeof inputs>;

/** Each fixture case as multigrad code (the Python expression is in the fixture). */
const EXPRESSIONS: Readonly<Record<string, (i: Inputs, d: Device) => Tensor>> = {
  neg: ({ x }) => x.neg(),
  exp: ({ x }) => x.exp(),
  log: ({ x }) => x.log(),
  sqrt: ({ x }) => x.sqrt(),
  rsqrt: ({ x }) => x.rsqrt(),
  abs: ({ x }) => x.abs(),
  sin: ({ x }) => x.sin(),
  cos: ({ x }) => x.cos(),
  tanh: ({ x }) => x.tanh(),
  sigmoid: ({ x }) => x.sigmoid(),
  relu: ({ x }) => x.relu(),
  reciprocal: ({ x }) => x.reciprocal(),
  square: ({ x }) => x.square(),
  log1p: ({ x }) => x.log1p(),
  expm1: ({ x }) => x.expm1(),
  floor: ({ x }) => x.floor(),
  sign: ({ x }) => x.sign(),
  clamp_min_max: ({ x }) => x.clamp(0, 1),
  clamp_min: ({ x }) => x.clamp(0),
  clamp_tensor: ({ x, y }) => x.clamp(y),
  add_tensor: ({ x, y }) => x.add(y),
  sub_tensor: ({ x, y }) => x.sub(y),
  mul_tensor: ({ x, y }) => x.mul(y),
  div_tensor: ({ x, y }) => x.div(y),
  pow_tensor: ({ x, y }) => x.pow(y),
  maximum: ({ x, y }) => maximum(x, y),
  minimum: ({ x, y }) => minimum(x, y),
  where: ({ x, y, prob }) => where(prob.gt(0.5), x, y),
  add_broadcast: ({ x, v }) => x.add(v),
  add_scalar: ({ x }) => x.add(2),
  sub_scalar: ({ x }) => x.sub(1),
  mul_scalar: ({ x }) => x.mul(2),
  div_scalar: ({ x }) => x.div(2),
  pow_scalar: ({ x }) => x.pow(3),
  pow_scalar_base: ({ x }) => pow(2, x),
  lerp_scalar: ({ x, y }) => x.lerp(y, 0.5),
  sum: ({ x }) => x.sum(),
  sum_dim: ({ x }) => x.sum(1),
  sum_dim_keepdim: ({ x }) => x.sum(1, true),
  sum_all_dims: ({ x }) => x.sum([0, 1]),
  mean: ({ x }) => x.mean(),
  mean_dim: ({ x }) => x.mean(1),
  mean_dim_keepdim: ({ x }) => x.mean(0, true),
  max: ({ x }) => x.max(),
  max_dim: ({ x }) => x.max(1),
  max_dim_1d: ({ v }) => v.max(0),
  min: ({ x }) => x.min(),
  min_dim: ({ x }) => x.min(1),
  amax_dim: ({ x }) => x.amax(1),
  prod: ({ x }) => x.prod(),
  prod_dim: ({ x }) => x.prod(1),
  std: ({ x }) => x.std(),
  var_dim: ({ x }) => x.var(1),
  norm: ({ x }) => x.norm(),
  logsumexp_dim: ({ x }) => x.logsumexp(1),
  cumsum: ({ x }) => x.cumsum(1),
  matmul_1d_1d: ({ v, w }) => v.matmul(w),
  matmul_2d_1d: ({ m, v }) => m.t().matmul(v),
  matmul_1d_2d: ({ v, m }) => v.matmul(m),
  matmul_2d_2d: ({ x, m }) => x.matmul(m),
  matmul_3d_2d: ({ a, m }) => a.matmul(m.t()),
  matmul_3d_3d: ({ a, c }) => a.matmul(c),
  matmul_2d_3d: ({ x, a }) => x.matmul(a),
  matmul_1d_3d: ({ w, a }) => w.matmul(a),
  mm: ({ x, m }) => x.mm(m),
  mv: ({ m, v }) => m.t().mv(v),
  dot: ({ v, w }) => dot(v, w),
  bmm: ({ a, c }) => a.bmm(c),
  view: ({ x }) => x.view([3, 2]),
  reshape: ({ x }) => x.reshape([6]),
  reshape_transposed: ({ x }) => x.t().reshape([6]),
  t: ({ x }) => x.t(),
  t_1d: ({ v }) => v.t(),
  transpose: ({ x }) => x.transpose(0, 1),
  permute: ({ a }) => a.permute([2, 0, 1]),
  squeeze: ({ x }) => x.view([1, 2, 3]).squeeze(),
  squeeze_dim: ({ x }) => x.view([1, 2, 3]).squeeze(0),
  unsqueeze: ({ x }) => x.unsqueeze(0),
  flatten: ({ a }) => a.flatten(),
  flatten_start: ({ a }) => a.flatten(1),
  expand: ({ v }) => v.expand([2, 3]),
  narrow: ({ x }) => x.narrow(1, 1, 2),
  contiguous_t: ({ x }) => x.t().contiguous(),
  clone: ({ x }) => x.clone(),
  flip: ({ x }) => x.flip(0),
  repeat: ({ x }) => x.repeat([2, 1]),
  select: ({ x }) => x.select(0, 0),
  slice: ({ x }) => x.narrow(1, 1, 2),
  gather: ({ x, idx }) => x.gather(1, idx.view([2, 1])),
  index_select: ({ x, idx }) => x.indexSelect(0, idx),
  cat: ({ x, y }) => cat([x, y]),
  stack: ({ x, y }) => stack([x, y]),
  chunk: ({ x }) => x.chunk(3, 1)[0],
  split: ({ x }) => x.split(2, 1)[0],
  softmax: ({ x }) => x.softmax(1),
  log_softmax: ({ x }) => x.logSoftmax(1),
  linear: ({ x }, d) => new nn.Linear(3, 4).to(d).forward(x),
  linear_no_bias: ({ x }, d) => new nn.Linear(3, 4, { bias: false }).to(d).forward(x),
  conv2d: ({ img }, d) => new nn.Conv2d(3, 2, 3).to(d).forward(img),
  relu_module: ({ x }) => new nn.ReLU().forward(x),
  dropout_eval: ({ x }) => new nn.Dropout(0.5).eval().forward(x.exp()),
  batch_norm_train: ({ img }, d) => new nn.BatchNorm2d(3).to(d).forward(img),
  layer_norm: ({ x }, d) => new nn.LayerNorm(3).to(d).forward(x),
  embedding: ({ idx }, d) => new nn.Embedding(4, 3).to(d).forward(idx),
  max_pool2d: ({ img }) => new nn.MaxPool2d(2).forward(img),
  avg_pool2d: ({ img }) => new nn.AvgPool2d(2).forward(img),
  gelu: ({ x }) => F.gelu(x),
  silu: ({ x }) => F.silu(x),
  leaky_relu: ({ x }) => F.leakyRelu(x),
  elu: ({ x }) => F.elu(x),
  softplus: ({ x }) => F.softplus(x),
  mse_loss: ({ x, y }) => F.mseLoss(x, y),
  l1_loss: ({ x, y }) => F.l1Loss(x, y),
  smooth_l1_loss: ({ x, y }) => F.smoothL1Loss(x, y),
  cross_entropy: ({ x, cls }) => F.crossEntropy(x, cls),
  nll_loss: ({ x, cls }) => F.nllLoss(x.logSoftmax(1), cls),
  bce: ({ x, prob }) => F.binaryCrossEntropy(x.sigmoid(), prob),
  bce_with_logits: ({ x, prob }) => F.binaryCrossEntropyWithLogits(x, prob),
  kl_div: ({ x, prob }) => F.klDiv(x.logSoftmax(1), prob, { reduction: "batchmean" }),
};

/** Fixture cases with no multigrad expression to compare, and why. */
const NO_COUNTERPART: Readonly<Record<string, string>> = {
  add_tensor_alpha: "our add takes no alpha (only add_ in place does)",
  rsub_scalar: "JavaScript has no reflected operator for `1 - x`",
  rdiv_scalar: "JavaScript has no reflected operator for `1 / x`",
  index_tensor: "no `x[idx]` advanced indexing (indexSelect is index_select)",
};

const COMPOSED = "composed of other ops: the output's node is the last step's";

/** Cases where we print another name: ours, and why the node cannot tell PyTorch's. */
const KNOWN_MISMATCHES: Readonly<Record<string, { ours: string; why: string }>> = {
  sum_all_dims: { ours: "SumBackward0", why: "a 0-d sum does not keep whether dims were given" },
  max_dim_1d: { ours: "MaxBackward1", why: "max(0) of a 1-d tensor is 0-d, as max() is" },
  mean: { ours: "MulBackward0", why: "mean records sum, then mul by 1/n" },
  mean_dim: { ours: "MulBackward0", why: "mean records sum, then mul by 1/n" },
  mean_dim_keepdim: { ours: "MulBackward0", why: "mean records sum, then mul by 1/n" },
  std: { ours: "WhereBackward0", why: COMPOSED },
  var_dim: { ours: "DivBackward0", why: COMPOSED },
  logsumexp_dim: { ours: "AddBackward0", why: COMPOSED },
  matmul_2d_3d: {
    ours: "UnsafeViewBackward0",
    why: "a 2-d operand broadcast over a batch looks as a 3-d one of batch 1",
  },
  dot: { ours: "SumBackward0", why: "dot records mul, then sum (int32 too)" },
  bmm: { ours: "UnsafeViewBackward0", why: "bmm records matmul, as matmul of 3-d operands" },
  reshape_transposed: {
    ours: "ReshapeAliasBackward0",
    why: "our transpose copies: the reshape's input is contiguous, PyTorch's is not (a copy)",
  },
  contiguous_t: { ours: "TBackward0", why: "contiguous() records nothing: our t() already copied" },
  repeat: { ours: "ReshapeAliasBackward0", why: COMPOSED },
  conv2d: { ours: "ReshapeAliasBackward0", why: COMPOSED },
  layer_norm: { ours: "AddBackward0", why: COMPOSED },
  embedding: { ours: "ReshapeAliasBackward0", why: COMPOSED },
  avg_pool2d: { ours: "ReshapeAliasBackward0", why: COMPOSED },
  silu: { ours: "MulBackward0", why: COMPOSED },
  leaky_relu: { ours: "MulBackward0", why: COMPOSED },
  elu: { ours: "WhereBackward0", why: COMPOSED },
  softplus: { ours: "WhereBackward0", why: COMPOSED },
  mse_loss: { ours: "DivBackward0", why: COMPOSED },
  l1_loss: { ours: "DivBackward0", why: COMPOSED },
  smooth_l1_loss: { ours: "DivBackward0", why: COMPOSED },
  nll_loss: { ours: "DivBackward0", why: COMPOSED },
  bce: { ours: "DivBackward0", why: COMPOSED },
  bce_with_logits: { ours: "DivBackward0", why: COMPOSED },
};

/** Matches reached (of the fixture's cases): a change that loses one fails here too. */
const MIN_MATCHES = 91;

/** The name in `grad_fn=<...>` of `t`'s printed text. */
async function printedGradFn(t: Tensor): Promise<string> {
  const text = await t.format();
  const found = /grad_fn=<(\w+)>\)$/.exec(text);
  assert.ok(found, `no grad_fn in ${text}`);
  return found[1];
}

const CASES = fixture.cases as Record<string, { expr: string; grad_fn: string }>;

backendTest("grad_fn names match PyTorch 1.13's for the fixture's expressions", async (d) => {
  const env = inputs(d);
  const wrong: string[] = [];
  let matches = 0;
  for (const [id, { expr, grad_fn: torchName }] of Object.entries(CASES)) {
    const build = EXPRESSIONS[id];
    if (!build) {
      assert.ok(id in NO_COUNTERPART, `fixture case ${id} (${expr}) has no expression here`);
      continue;
    }
    const ours = await printedGradFn(build(env, d));
    const known = KNOWN_MISMATCHES[id];
    const expected = known?.ours ?? torchName;
    if (ours === torchName) matches++;
    if (ours !== expected) {
      const listed = known ? `, listed as a mismatch: ${known.why}` : "";
      wrong.push(
        `${id} (${expr}): printed ${ours}, expected ${expected} (PyTorch ${torchName}${listed})`,
      );
    }
  }
  assert.deepEqual(wrong, [], "update KNOWN_MISMATCHES where a name was fixed");
  assert.ok(matches >= MIN_MATCHES, `${matches} matches, fewer than ${MIN_MATCHES}`);
  for (const id of [...Object.keys(NO_COUNTERPART), ...Object.keys(KNOWN_MISMATCHES)]) {
    assert.ok(id in CASES, `${id} is listed but not a fixture case`);
  }
});

backendTest(
  "grad_fn names told by the output's shape outlive the graph backward frees",
  async (d) => {
    const { x, m } = inputs(d);
    const kept = [x.sum(1), x.max(), x.matmul(m), x.clamp(0, 1), x.t()];
    for (const t of kept) t.sum().backward();
    assert.deepEqual(
      await Promise.all(kept.map(printedGradFn)),
      ["SumBackward1", "MaxBackward1", "MmBackward0", "ClampBackward1", "TBackward0"],
    );
  },
);
