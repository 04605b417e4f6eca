/**
 * The core's size, as tinygrad's `sz.py` keeps its own: prints the line
 * count per folder and exits 1 when the core is over its budget.
 *
 *   deno run -A scripts/core_size.ts
 *
 * "Core" is what every program runs whatever its backend and layers: the
 * top-level files of `src/` (Tensor, autograd, devices, storage, streams,
 * dtypes, shapes), `src/ops/` (every operation and its gradient) and the
 * backend contract `src/backends/backend.ts`. Backends, nn, optim, data,
 * parallel, distributed and serialization are layers over it and are
 * listed for information only. Lines are `wc -l` lines (comments included:
 * the docs are part of what a reader reads).
 * @module
 */

/**
 * The core's budget in lines: over it, this script fails. Set at 5,600 when
 * the core measured 5,405 (3,233 when the budget was asked for, before the
 * parity ops, the fused kernels and the typed kernel table); raised to 5,700
 * for the synchronous copies between host-memory devices and the argument
 * records of the optional addmm/geluBackward kernels (core 5,628); raised to
 * 5,750 for PyTorch's gradient rules at the edges (std where it is 0, pow at
 * base 0, ties of a full max/min), gather's index check, 0-d refusals and
 * 0-d promotion (core 5,744); raised to 5,780 for `fold2d` (core 5,777),
 * the mirror of `unfold2d` that transposed convolution folds its columns
 * with: an op of the core because it launches the backends' `col2im`
 * forward and `im2col` backward, shared with `unfold2d` so no backend
 * needs a new kernel; raised by 112 to 5,892 for the Tensor methods of the
 * composite ops (flip, roll, repeat, tile, cumsum, cumprod, prod, amax,
 * amin, norm, all, any, sort, topk, lerp, ...: 28 one-line delegations and
 * their docs in `src/tensor.ts`); their implementations live in
 * `src/ops_composite/`, a layer above the core that is not counted here;
 * raised by 3 to 5,895 so that the backward pass skips a node no gradient
 * reached (a null from one backward crashed the next, as a user Function
 * returning null for an input did); raised by 175 to 6,070 for two things a
 * PyTorch user expects of the core: higher-order gradients (about 138 lines:
 * the engine's one pass serving both `backward` and `autograd.grad`, with
 * `createGraph` and the memory a gradient's own graph borrows, and the
 * backward functions of the core ops made differentiable), and the optional
 * `sort` kernel's argument record (38 lines of contract, so a backend can
 * sort in one launch where a bitonic network of elementwise kernels took
 * 6 s for 1e6 elements on cpu); raised by 93 to 6,163 for PyTorch's tensor
 * gradient hooks, `Tensor.registerHook` and `retainGrad` (hooks on a node's
 * output slot or a leaf, run by the engine's pass; Grad-CAM and gradient
 * reversal need them); raised by 2 to 6,165 for `scatterToIndex`, gather's
 * differentiable adjoint, which the sort and max-pool backwards had each
 * written again; raised by 106 to 6,271 for the argument records of three
 * optional kernels: `segmentArgmax` (embeddingBag's max mode in one pass,
 * where a segmented scan over [n, dim] took 14 s for 4096 bags of a 100k x 64
 * table on cpu, 100x PyTorch) and `ctcAlpha` / `ctcAlphaBackward` (the CTC
 * alphas' recurrence over frames in one launch each, where the composition
 * spent a dozen kernels per frame, 20x PyTorch); raised by 83 to 6,354 for
 * the argument records of the optional `eigh`, `svd` and `qr` kernels and
 * the matrix batch they share (LAPACK's algorithms in float64 on the host
 * in one launch, where the composed Jacobi rounds took thousands of times
 * PyTorch's time: 1.7 s for a 64 x 64 eigh, 204 s for 256 x 256);
 * raised by 6 to 6,360 when `segmentArgmax` became `segmentReduce` (one
 * record with a mode, a transpose flag and optional weights, where a second
 * kernel would have taken ~35 lines): embeddingBag's sum and mean in one
 * pass forward and one scatter backward, where five passes over the looked-up
 * rows were 5-7x PyTorch; raised by 370 to 6,730 for PyTorch's everyday
 * tensor surface: about 330 new ops (special functions, scatter/unique,
 * products, in-place forms, ...) live in `src/ops_composite/` and their
 * 274 delegating Tensor methods are declared outside the core
 * (`TensorMethods`, merged into Tensor's type; `installTensorMethods`, 17
 * lines, puts them on the prototype), but the core grew by the methods that
 * are more than a delegation (conversions such as `float()`/`long()`,
 * overloaded `type()`/`stride()`, async ones, the in-place `addmm_` family:
 * ~210 lines of `src/tensor.ts`), the generic recorded in-place op with the
 * refusal of in-place ops on results that are copies where PyTorch has views
 * (~70, `src/ops/inplace.ts`, `view.ts`), tensor bounds for `clamp` (34),
 * the int32 bitwise ops and the optional `scatterReduce` kernel's record in
 * the contract (30), and `initialSeed` (11); raised by 34 to 6,764 for
 * `setDefaultDtype` (the default's state read by the factories, and the
 * overflow check PyTorch's `full`/`fill_` make: 26), anomaly mode's hooks
 * in the engine (a forward stack per node only while it is on: 4), and
 * ownership of internal reshapes, so `relu_()` after a Linear or matmul is
 * allowed as in PyTorch (`Storage.madeAt`, the `own` flag of `reshape`: 4);
 * raised by 17 to 6,781 for PyTorch's overflow check on the other scalar
 * fills (a 0-d tensor value in `fill_` and `maskedFill`, `where` and `clamp`
 * bounds: 16), which gave inf silently, and the exact `fmod` binary op of the
 * contract (1), where x - y·trunc(x/y) lost every digit once |x/y| ≥ 2^24;
 * raised by 4 to 6,785 so that a 0-d fill value on a GPU is checked too
 * (the check deferred to the device's next read, no host wait), where
 * 1e10 into an int32 tensor silently wrote -2147483648; raised by 18 to
 * 6,803 (the core grew by 24 from 6,779) for a `generator` option on the
 * random factories (a host-drawn path behind the `HostRandom` interface, so
 * `Generator` and its exact PyTorch cpu streams stay outside the core) and
 * `tensor()` of a BigInt64Array (int64 into int32 exactly or the overflow
 * error), which threw "Cannot mix BigInt and other types"; lowered by 97 to
 * 6,706 when the user-facing `Function` moved to `src/autograd/function.ts`
 * (a layer over the engine's `record`, which no core op uses), where it grew
 * PyTorch's ctx API (non-differentiable outputs, unmaterialized gradients,
 * `setupContext`, gradients summed to the input's shape, `onceDifferentiable`).
 * Raise it only with a reason in the commit.
 */
export const CORE_BUDGET = 6706;

/** The folders counted as core (`recursive: false` counts only the folder's own files). */
export const CORE: readonly { readonly path: string; readonly recursive: boolean }[] = [
  { path: "src", recursive: false },
  { path: "src/ops", recursive: true },
  { path: "src/backends/backend.ts", recursive: false },
];

/** Lines of every `.ts` file under `path` (or of `path` itself). */
export function linesOf(root: string, path: string, recursive: boolean): number {
  const full = `${root}/${path}`;
  if (Deno.statSync(full).isFile) return countLines(Deno.readTextFileSync(full));
  let total = 0;
  for (const entry of Deno.readDirSync(full)) {
    const child = `${path}/${entry.name}`;
    if (entry.isFile && entry.name.endsWith(".ts")) {
      total += countLines(Deno.readTextFileSync(`${root}/${child}`));
    } else if (entry.isDirectory && recursive) {
      total += linesOf(root, child, true);
    }
  }
  return total;
}

/** Newline count, as `wc -l`. */
function countLines(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) n++;
  return n;
}

/** Every folder under `src/` (own files only), for the information table. */
function folders(root: string, path = "src"): string[] {
  const out = [path];
  for (const entry of Deno.readDirSync(`${root}/${path}`)) {
    if (entry.isDirectory) out.push(...folders(root, `${path}/${entry.name}`));
  }
  return out.sort();
}

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  console.log("lines per folder (own .ts files):");
  for (const folder of folders(root)) {
    const n = linesOf(root, folder, false);
    if (n > 0) console.log(`  ${String(n).padStart(6)}  ${folder}`);
  }
  let core = 0;
  console.log("core:");
  for (const { path, recursive } of CORE) {
    const n = linesOf(root, path, recursive);
    core += n;
    console.log(`  ${String(n).padStart(6)}  ${path}${recursive ? "/**" : ""}`);
  }
  console.log(`  ${String(core).padStart(6)}  total (budget ${CORE_BUDGET})`);
  if (core > CORE_BUDGET) {
    console.log(
      `core_size: the core has ${core} lines, over its budget of ${CORE_BUDGET}: ` +
        "move code out of the core (into a backend or a layer) or shrink it",
    );
    Deno.exit(1);
  }
}
