/**
 * `torch.func` (functorch in PyTorch 1.13): composable function transforms. {@link grad},
 * {@link gradAndValue}, {@link vjp}, {@link jvp}, {@link jacrev}, {@link jacfwd} and
 * {@link hessian} differentiate a function of pytrees (arrays and plain objects of tensors);
 * {@link vmap} maps a function of one example over a batch dim; {@link functionalCall} runs
 * a module with other tensors as its parameters. They nest: `vmap(grad(loss))` gives
 * per-sample gradients, `jacrev(jacrev(f))` second derivatives.
 *
 * Where multigrad differs: there is no forward-mode autograd (`jvp` and `jacfwd` use the
 * double-vjp trick) and no batching rules (`vmap` runs its function once per slice), so the
 * results are functorch's but the cost is that of a loop.
 *
 * @example
 * ```ts
 * import { func, nn, tensor, type Tensor } from "@multigrad/core";
 * const model = new nn.Linear(3, 1);
 * const params = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.detach()]));
 * const loss = (p: Record<string, Tensor>, x: Tensor, y: Tensor) =>
 *   func.functionalCall(model, p, [x.unsqueeze(0)]).sub(y).pow(2).sum();
 * const perSample = func.vmap(func.grad(loss), { inDims: [null, 0, 0] });
 * perSample(params, tensor([[1, 2, 3], [4, 5, 6]]), tensor([1, 2])); // { weight: [2, 1, 3], bias: [2, 1] }
 * ```
 * @module
 */

export * from "../autograd/func/transforms.ts";
export * from "../autograd/func/vmap.ts";
export * from "../nn/utils/stateless.ts";
