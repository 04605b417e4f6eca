/**
 * The cpu backend's matmul. float32 products run in a WebAssembly SIMD
 * microkernel (`../wasm/matmul.wat`, `../wasm/matmul_relaxed.wat`) over panels
 * packed here; float64 products, and float32 ones where WebAssembly SIMD is
 * unavailable, run in the TypeScript kernel below, which accumulates in
 * float64.
 * @module
 */

import type { MatmulArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import {
  MATMUL_RELAXED_UNSHARED_WASM,
  MATMUL_RELAXED_WASM,
  MATMUL_SIMD_UNSHARED_WASM,
  MATMUL_SIMD_WASM,
  PACK_UNSHARED_WASM,
  PACK_WASM,
} from "../wasm/modules.ts";
import {
  type JobKernels,
  KernelThreads,
  type PackFn,
  type PackSource,
  type PanelJob,
  runAlone,
} from "../threads.ts";
import { decodeBase64 } from "../wasm/load.ts";
import { KernelHeap } from "../wasm/heap.ts";

/**
 * Copies the logical [rows, cols] matrix at `offset` (stored transposed when
 * `stored` is "cols-major") into panels of 4 rows: panel b holds rows
 * 4b..4b+3 as [cols][4]. The kernel then reads 4 contiguous values of A and
 * of B per step, whatever the operands' transposes were.
 */
function pack(
  src: TypedArray,
  offset: number,
  rows: number,
  cols: number,
  transposed: boolean,
  into: Float64Array,
): void {
  const panels = Math.ceil(rows / 4);
  into.fill(0, 0, panels * cols * 4);
  for (let row = 0; row < rows; row++) {
    const base = (row >> 2) * cols * 4 + (row & 3);
    if (transposed) {
      for (let c = 0, at = offset + row; c < cols; c++, at += rows) into[base + c * 4] = src[at];
    } else {
      const start = offset + row * cols;
      for (let c = 0; c < cols; c++) into[base + c * 4] = src[start + c];
    }
  }
}

/**
 * Batched matmul with 4x4 register blocking over packed panels: each step of
 * the inner loop loads 8 numbers and does 16 multiply-adds, accumulating in
 * float64 (so the reference is more exact than float32 kernels). Any dtype;
 * what {@link matmul} runs for float64 and when WebAssembly is unavailable.
 */
export function matmulTs(
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: MatmulArgs<TypedArray>,
): void {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const mPanels = Math.ceil(m / 4);
  const nPanels = Math.ceil(n / 4);
  const ap = new Float64Array(mPanels * k * 4);
  const bp = new Float64Array(nPanels * k * 4);
  for (let bt = 0; bt < batch; bt++) {
    // A is [m, k] (stored [k, m] when transA); Bᵀ is [n, k] (B stored [k, n] unless transB).
    if (bt === 0 || aBatchStride !== 0) pack(a, bt * aBatchStride, m, k, transA, ap);
    if (bt === 0 || bBatchStride !== 0) pack(b, bt * bBatchStride, n, k, !transB, bp);
    const oo = bt * m * n;
    for (let ib = 0; ib < mPanels; ib++) {
      const ao = ib * k * 4;
      const i0 = ib * 4;
      for (let jb = 0; jb < nPanels; jb++) {
        const bo = jb * k * 4;
        let c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
        let c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
        for (let p = 0, x = ao, y = bo; p < k; p++, x += 4, y += 4) {
          const a0 = ap[x], a1 = ap[x + 1], a2 = ap[x + 2], a3 = ap[x + 3];
          const b0 = bp[y], b1 = bp[y + 1], b2 = bp[y + 2], b3 = bp[y + 3];
          c00 += a0 * b0;
          c01 += a0 * b1;
          c02 += a0 * b2;
          c03 += a0 * b3;
          c10 += a1 * b0;
          c11 += a1 * b1;
          c12 += a1 * b2;
          c13 += a1 * b3;
          c20 += a2 * b0;
          c21 += a2 * b1;
          c22 += a2 * b2;
          c23 += a2 * b3;
          c30 += a3 * b0;
          c31 += a3 * b1;
          c32 += a3 * b2;
          c33 += a3 * b3;
        }
        const j0 = jb * 4;
        if (i0 + 4 <= m && j0 + 4 <= n) {
          let at = oo + i0 * n + j0;
          out[at] = c00, out[at + 1] = c01, out[at + 2] = c02, out[at + 3] = c03;
          at += n;
          out[at] = c10, out[at + 1] = c11, out[at + 2] = c12, out[at + 3] = c13;
          at += n;
          out[at] = c20, out[at + 1] = c21, out[at + 2] = c22, out[at + 3] = c23;
          at += n;
          out[at] = c30, out[at + 1] = c31, out[at + 2] = c32, out[at + 3] = c33;
          continue;
        }
        // An edge tile: write only the rows and columns inside the matrix.
        const tile = [
          c00,
          c01,
          c02,
          c03,
          c10,
          c11,
          c12,
          c13,
          c20,
          c21,
          c22,
          c23,
          c30,
          c31,
          c32,
          c33,
        ];
        const rows = Math.min(4, m - i0);
        const cols = Math.min(4, n - j0);
        for (let r = 0; r < rows; r++) {
          const at = oo + (i0 + r) * n + j0;
          for (let c = 0; c < cols; c++) out[at + c] = tile[r * 4 + c];
        }
      }
    }
  }
}

// ---- WebAssembly SIMD (float32) ----

/** Columns per B panel: two f32x4 vectors (both modules). */
const NR = 8;
/** Bytes of one packed operand block (A rows, B columns) or of the C block. */
const BLOCK_BYTES = 8 << 20;
/**
 * Bytes of A panels one kernel call streams through per B panel: small
 * enough to stay in L2 (256 KiB-1 MiB per core on current x86 and ARM cores)
 * next to the B panel in L1.
 */
const A_L2_BYTES = 256 << 10;
/**
 * Rows of C narrower than this are copied out element by element: making a
 * view per row cost more than the copy (256 rows of 10: 0.03-0.1 ms).
 */
const NARROW_COPY = 64;
/**
 * Scratch bytes (packed operands, their copies, C) of one job of a batch of
 * small products (see `matmulBatched`): a few hundred µs of work, so that
 * waking the threads is paid rarely, small enough that what the first phase
 * packed is still in a core's L2 (1 MiB here) when the tiles read it. 512 KiB
 * against 2 MiB, the CNN's five conv products alternating processes at load
 * 15-17: medians 42.2 vs 47.9 ms and 42.4 vs 57.1 ms (2 x 6-7 runs).
 */
const BATCH_JOB_BYTES = 512 << 10;
/** The longest block of k (see {@link kBlock}). */
const KC_MAX = 256;
/** The largest wasm memory asked for; beyond it the TypeScript kernel runs. */
const MAX_MEMORY_BYTES = 1 << 30;
/** The memory's declared maximum, in 64 KiB pages (the `.wat` files' import). */
const MAX_PAGES = MAX_MEMORY_BYTES / 65536;
/**
 * Multiply-adds below which a product stays on one thread (about 80 µs of
 * work on one core): waking the workers and waiting for the last one costs
 * 5-20 µs on an idle machine, and much more when the OS has descheduled a
 * worker on a busy one.
 */
const MIN_THREADED_MACS = 1 << 21;

/** Which matmul kernel float32 products use. */
export type MatmulKernel = "relaxed-simd" | "simd" | "typescript";

/** A loaded kernel module: its memory, entry point and A panel height. */
interface WasmMatmul {
  readonly kind: "relaxed-simd" | "simd";
  /** Rows per A panel (tile height): 6 for relaxed-simd, 4 for simd. */
  readonly mr: number;
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  /** Whether `memory` is shared, so that worker threads can run the kernel on it. */
  readonly shared: boolean;
  /** See the `.wat` files: computes `panels` tiles against one B panel. */
  readonly panel: (a: number, b: number, c: number, panels: number, k: number, ldc: number) => void;
  /** A float32 view of `memory` (rebuilt when it grows). */
  view: Float32Array;
  /** `pack.wat` on the same memory (null where it does not compile): SIMD panel packing. */
  readonly pack: PackFunctions | null;
  /** `pack.wat`'s module, for the worker threads (null where it does not compile). */
  readonly packModule: WebAssembly.Module | null;
  /** What a job runs on this thread: `panel` and `pack`'s functions. */
  readonly kernels: JobKernels;
  /** Regions of `memory`: the scratch below, and (shared only) the backend's large arrays. */
  readonly heap: KernelHeap;
  /** The scratch region products pack into (byte offset and length; grows). */
  scratchAt: number;
  scratchBytes: number;
  /** Worker threads on `memory`, once some backend asked for more than one thread. */
  threads?: KernelThreads;
}

/** The two modules, fastest first, with their A panel heights. */
const MODULES = [
  {
    kind: "relaxed-simd",
    mr: 6,
    source: MATMUL_RELAXED_WASM,
    unshared: MATMUL_RELAXED_UNSHARED_WASM,
  },
  { kind: "simd", mr: 4, source: MATMUL_SIMD_WASM, unshared: MATMUL_SIMD_UNSHARED_WASM },
] as const;

/** Instances made so far, by kind (null: this engine refused the module). */
const instances = new Map<WasmMatmul["kind"], WasmMatmul | null>();

/**
 * One instance of the module of `kind`, made once per process; null without
 * WebAssembly, when the engine lacks the module's proposal
 * (`WebAssembly.validate`), or where compiling is refused (a
 * Content-Security-Policy without `wasm-unsafe-eval`). Both modules are
 * under 1 KB, well within the 4 KB that browsers compile synchronously.
 */
function instance(kind: WasmMatmul["kind"]): WasmMatmul | null {
  if (instances.has(kind)) return instances.get(kind)!;
  let made: WasmMatmul | null = null;
  const spec = MODULES.find((m) => m.kind === kind)!;
  // Shared memory first (worker threads can then help); an engine or page
  // without it (a browser page that is not cross-origin isolated hides
  // SharedArrayBuffer) gets the unshared copy of the module.
  const canShare = typeof SharedArrayBuffer === "function" &&
    (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated !== false;
  for (const shared of canShare ? [true, false] : [false]) {
    try {
      if (typeof WebAssembly === "undefined") break;
      const bytes = decodeBase64(shared ? spec.source : spec.unshared);
      if (!WebAssembly.validate(bytes)) continue;
      const module = new WebAssembly.Module(bytes);
      const memory = new WebAssembly.Memory({ initial: 1, maximum: MAX_PAGES, shared });
      const { exports } = new WebAssembly.Instance(module, { env: { memory } });
      const panel = exports.panel as WasmMatmul["panel"];
      const view = new Float32Array(memory.buffer);
      const packModule = compile(shared ? PACK_WASM : PACK_UNSHARED_WASM);
      const packer = packModule && new WebAssembly.Instance(packModule, { env: { memory } });
      const pack = packer === null ? null : {
        rows: packer.exports.pack_rows as PackFn,
        cols: packer.exports.pack_cols as PackFn,
        copyRows: packer.exports.copy_rows as PackFunctions["copyRows"],
        partial: packer.exports.pack_partial as PackFunctions["partial"],
      };
      const kernels = { panel, packRows: pack?.rows ?? null, packCols: pack?.cols ?? null };
      const heap = new KernelHeap(memory, MAX_MEMORY_BYTES);
      made = {
        kind,
        mr: spec.mr,
        module,
        memory,
        shared,
        panel,
        view,
        pack,
        packModule,
        kernels,
        heap,
        scratchAt: 0,
        scratchBytes: 0,
      };
      break;
    } catch {
      // Not compilable here: try unshared, then the caller tries the next kind or TypeScript.
    }
  }
  instances.set(kind, made);
  return made;
}

/** The module given in base64, or null where it does not validate or compile. */
function compile(base64: string): WebAssembly.Module | null {
  try {
    const bytes = decodeBase64(base64);
    return WebAssembly.validate(bytes) ? new WebAssembly.Module(bytes) : null;
  } catch {
    return null;
  }
}

/** `pack.wat`'s exports: lay out whole panels from an operand copied in as stored. */
interface PackFunctions {
  /** Row-major source: row r at `src + r * ld`. */
  readonly rows: PackFn;
  /** Transposed source: logical column c at `src + c * ld`, its rows contiguous. */
  readonly cols: PackFn;
  /** `(src, ld, dst, ldd, bytes, rows)`: a strided copy of rows within the memory. */
  readonly copyRows: (...args: number[]) => void;
  /** `(src, dr, dc, live, width, panel, dst)`: one partial panel, zero-padded. */
  readonly partial: (...args: number[]) => void;
}

/** The float32 kernel chosen for each preference (see {@link wasmFor}), once found. */
const chosen = new Map<MatmulKernel | "auto", WasmMatmul | null>();

/**
 * The WebAssembly kernel float32 products run in for `preference`: `"auto"`
 * takes relaxed SIMD, else SIMD; `"simd"` skips relaxed SIMD; a kind the
 * engine lacks falls back as `"auto"` would; null means the TypeScript
 * kernel (`"typescript"`, or no WebAssembly SIMD here).
 */
function wasmFor(preference: MatmulKernel | "auto"): WasmMatmul | null {
  let found = chosen.get(preference);
  if (found === undefined) {
    found = null;
    if (preference !== "typescript") {
      for (const { kind } of MODULES) {
        if (kind === "relaxed-simd" && preference === "simd") continue;
        found = instance(kind);
        if (found !== null) break;
      }
    }
    chosen.set(preference, found);
  }
  return found;
}

/** The kernel float32 products run in for `preference` (loads the WebAssembly module if needed). */
export function matmulKernel(preference: MatmulKernel | "auto" = "auto"): MatmulKernel {
  return wasmFor(preference)?.kind ?? "typescript";
}

/**
 * The byte offset of a scratch region of at least `bytes` in `w`'s memory
 * (the one from before when it is large enough; else a region half again
 * as large, so that growing sizes do not allocate every time); undefined
 * when the memory cannot grow that far.
 */
function scratch(w: WasmMatmul, bytes: number): number | undefined {
  if (w.scratchBytes < bytes) {
    const old = w.scratchBytes;
    if (old > 0) w.heap.release(w.scratchAt, old);
    w.scratchBytes = 0;
    for (const size of [Math.max(bytes, Math.ceil(old * 1.5)), bytes]) {
      const at = w.heap.alloc(size);
      if (at !== undefined) {
        w.scratchAt = at;
        w.scratchBytes = size;
        break;
      }
    }
    if (w.scratchBytes === 0) return undefined;
  }
  // A shared memory's buffer keeps its old length after growing, an unshared
  // one is detached: either way the view is remade from the current buffer.
  if (w.view.length * 4 !== w.memory.buffer.byteLength) w.view = new Float32Array(w.memory.buffer);
  return w.scratchAt;
}

/**
 * Packs rows `first .. first + count`, columns `c0 .. c0 + width` of the
 * logical [rows, cols] matrix at `offset` of `src` (stored [cols, rows]
 * when `transposed`) into panels of `panel` rows, each [width][panel], the
 * first at `into[at]`: the layout the kernel reads with contiguous loads
 * (one block of k: columns are k). Rows past the block are zeros (they only
 * feed output rows that are never copied out, but zeros keep NaNs and
 * denormals out of the arithmetic). Full panels of 4, 6 and 8 rows take
 * unrolled loops (1.5-2x faster than the general loop in V8).
 */
function packPanels(
  src: TypedArray,
  offset: number,
  rows: number,
  cols: number,
  transposed: boolean,
  first: number,
  count: number,
  c0: number,
  width: number,
  panel: number,
  into: Float32Array,
  at: number,
  partial: PackFunctions["partial"] | null = null,
): void {
  const end = first + count;
  for (let r0 = first, base = at; r0 < end; r0 += panel, base += width * panel) {
    const live = Math.min(panel, end - r0);
    // Source index of element (r0, c0), and the steps to the next row and column.
    const s0 = transposed ? offset + c0 * rows + r0 : offset + r0 * cols + c0;
    const dr = transposed ? 1 : cols;
    const dc = transposed ? rows : 1;
    if (live === panel && packFullPanel(src, s0, dr, dc, width, panel, into, base)) continue;
    if (partial !== null) {
      // `src` lives in the memory `into` views: pack.wat does it.
      partial(
        src.byteOffset + 4 * s0,
        4 * dr,
        4 * dc,
        live,
        width,
        panel,
        into.byteOffset + 4 * base,
      );
      continue;
    }
    for (let w = 0; w < live; w++) {
      for (let c = 0, s = s0 + w * dr, d = base + w; c < width; c++, s += dc, d += panel) {
        into[d] = src[s];
      }
    }
    for (let w = live; w < panel; w++) {
      for (let c = 0, d = base + w; c < width; c++, d += panel) into[d] = 0;
    }
  }
}

/**
 * One full panel of `panel` rows and `width` columns from source index `s`
 * (steps `dr` to the next row, `dc` to the next column) with the copy
 * unrolled over the panel's rows; false for heights without an unrolled form.
 */
function packFullPanel(
  src: TypedArray,
  s: number,
  dr: number,
  dc: number,
  width: number,
  panel: number,
  into: Float32Array,
  d: number,
): boolean {
  const r2 = 2 * dr, r3 = 3 * dr, r4 = 4 * dr, r5 = 5 * dr, r6 = 6 * dr, r7 = 7 * dr;
  if (panel === 8) {
    for (let c = 0; c < width; c++, s += dc, d += 8) {
      into[d] = src[s];
      into[d + 1] = src[s + dr];
      into[d + 2] = src[s + r2];
      into[d + 3] = src[s + r3];
      into[d + 4] = src[s + r4];
      into[d + 5] = src[s + r5];
      into[d + 6] = src[s + r6];
      into[d + 7] = src[s + r7];
    }
  } else if (panel === 6) {
    for (let c = 0; c < width; c++, s += dc, d += 6) {
      into[d] = src[s];
      into[d + 1] = src[s + dr];
      into[d + 2] = src[s + r2];
      into[d + 3] = src[s + r3];
      into[d + 4] = src[s + r4];
      into[d + 5] = src[s + r5];
    }
  } else if (panel === 4) {
    for (let c = 0; c < width; c++, s += dc, d += 4) {
      into[d] = src[s];
      into[d + 1] = src[s + dr];
      into[d + 2] = src[s + r2];
      into[d + 3] = src[s + r3];
    }
  } else {
    return false;
  }
  return true;
}

const align64 = (bytes: number) => Math.ceil(bytes / 64) * 64;

/**
 * Packs panels `skip ..` of rows `first .. first + count` of an operand (all
 * of k) in TypeScript, straight from `src`, block of k by block of k, each
 * block [panels][kb][panel] from float `at` on (the layout `runUnits` in
 * `../threads.ts` walks). The job packs whole panels itself from a copy in
 * the memory (`pack.wat`); this does the last, partial one, or everything
 * where `pack.wat` did not compile.
 */
function packInTs(
  w: WasmMatmul,
  src: TypedArray,
  offset: number,
  rows: number,
  k: number,
  transposed: boolean,
  first: number,
  count: number,
  panel: number,
  kc: number,
  at: number,
  skip: number,
): void {
  const panels = Math.ceil(count / panel);
  if (skip >= panels) return;
  for (let k0 = 0; k0 < k; k0 += kc) {
    const kb = Math.min(kc, k - k0);
    const into = at + (k0 * panels + skip * kb) * panel;
    const r0 = first + skip * panel;
    packPanels(
      src,
      offset,
      rows,
      k,
      transposed,
      r0,
      first + count - r0,
      k0,
      kb,
      panel,
      w.view,
      into,
      w.pack !== null && w.heap.owns(src) ? w.pack.partial : null,
    );
  }
}

/**
 * Rows `first .. first + count` of an operand copied in at byte `raw` (the
 * logical [rows, k] matrix, stored [k, rows] when `transposed`): the whole
 * panels for the job to pack, the partial one packed here.
 */
function packSource(
  w: WasmMatmul,
  raw: number,
  src: TypedArray,
  offset: number,
  rows: number,
  k: number,
  transposed: boolean,
  first: number,
  count: number,
  panel: number,
  kc: number,
  at: number,
): PackSource | undefined {
  const full = Math.floor(count / panel);
  packInTs(w, src, offset, rows, k, transposed, first, count, panel, kc, at, full);
  if (full === 0) return undefined;
  return transposed
    ? { panels: full, src: raw + first * 4, ld: rows * 4, transposed }
    : { panels: full, src: raw + first * k * 4, ld: k * 4, transposed };
}

/**
 * Length of the blocks k is cut into: the B panel of one block (32 bytes
 * per k step) then takes at most 8 KiB of L1, next to the A and C lines
 * streaming past it. Blocks come out nearly equal and a multiple of 4 long
 * (the relaxed-SIMD kernel takes four k steps per iteration): k = 784 is
 * 4 x 196, k = 1000 is 3 x 252 + 244.
 */
export function kBlock(k: number): number {
  const blocks = Math.ceil(k / KC_MAX);
  return Math.ceil(k / blocks / 4) * 4;
}

/**
 * The float32 product in the WebAssembly kernel; false (nothing written)
 * when its memory cannot hold the blocks, so the caller falls back.
 *
 * Blocking: B is packed in blocks of whole panels of 8 columns and A in
 * blocks of whole panels of `mr` rows, each block at most BLOCK_BYTES (one
 * block each for the MLP's shapes, so every operand is packed once; a
 * broadcast operand, batch stride 0, is packed once for all batches), and
 * each block is laid out in blocks of k ({@link kBlock}). The kernel writes
 * an (A block x B block) region of C into wasm memory, padded to whole
 * tiles, and only its real rows and columns are copied to `out`. Inside a
 * block, A is fed to the kernel A_L2_BYTES at a time (a unit of work: a few
 * tens of µs, so that threads share a product finely), each slice against
 * every B panel in turn. `bias` (`addmm`: n values) is added
 * by the kernel when it stores the last block of k.
 */
function matmulWasm(
  w: WasmMatmul,
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: MatmulArgs<TypedArray>,
  threads: number,
  bias: TypedArray | undefined,
): boolean {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const mr = w.mr;
  const kc = kBlock(k);
  const aPanelBytes = k * mr * 4;
  const bPanelBytes = k * NR * 4;
  const nPanelsAll = Math.ceil(n / NR);
  const mPanelsAll = Math.ceil(m / mr);
  // Panels per block: B by its budget; A by its own and by the C block's.
  const nbPanels = Math.max(1, Math.min(nPanelsAll, Math.floor(BLOCK_BYTES / bPanelBytes)));
  // Rows of C start on 64-byte lines: see the units in `../threads.ts`.
  const ldc = align64(nbPanels * NR * 4);
  const mbPanels = Math.max(
    1,
    Math.min(
      mPanelsAll,
      Math.floor(BLOCK_BYTES / aPanelBytes),
      Math.floor(BLOCK_BYTES / (mr * ldc)),
    ),
  );
  const sliceByA = Math.max(1, Math.floor(A_L2_BYTES / aPanelBytes));
  // Batches of products each too small to be threaded alone: one job spans
  // the entries. (Larger ones keep a job per entry: their packed operands
  // then stay in cache between packing and use.)
  if (
    batch > 1 && mbPanels === mPanelsAll && nbPanels === nPanelsAll &&
    mPanelsAll * nPanelsAll * mr * NR * k < MIN_THREADED_MACS
  ) {
    return matmulBatched(w, a, b, out, layout, threads, bias, kc, ldc, sliceByA);
  }
  // Operands that live in the kernel's memory (the cpu backend's large
  // arrays) are packed from where they are; the others are copied into the
  // scratch first, as stored, for packing in WebAssembly (a memcpy, then
  // shuffles: 3-4x faster than packing from JavaScript arrays).
  const pack = w.pack;
  const residentA = pack !== null && w.heap.owns(a);
  const residentB = pack !== null && w.heap.owns(b);
  // The scratch: packed A, packed B, C, the bias row (padded with zeros to
  // whole B panels), then the copies of A and B.
  const bRel = align64(mbPanels * aPanelBytes);
  const cRel = bRel + align64(nbPanels * bPanelBytes);
  const biasRel = cRel + mbPanels * mr * ldc;
  const rawARel = align64(biasRel + (bias === undefined ? 0 : nPanelsAll * NR * 4));
  const rawBRel = rawARel + (pack === null || residentA ? 0 : align64(m * k * 4));
  const base = scratch(w, rawBRel + (pack === null || residentB ? 0 : k * n * 4));
  if (base === undefined) return false;
  const aAt = base, bAt = base + bRel, cAt = base + cRel;
  const biasAt = bias === undefined ? -1 : base + biasRel;
  const rawA = base + rawARel, rawB = base + rawBRel;
  const view = w.view;
  if (bias !== undefined) {
    view.set(bias.subarray(0, n), biasAt / 4);
    view.fill(0, biasAt / 4 + n, biasAt / 4 + nPanelsAll * NR);
  }
  let copiedA = -1; // source offset of the operand now in the raw area
  let copiedB = -1;
  const nBlock = nbPanels * NR;
  const mBlock = mbPanels * mr;
  const singleA = mBlock >= m;
  const singleB = nBlock >= n;
  let packedA = -1; // source offset of the A block in memory when it is all of A
  let packedB = -1;
  for (let bt = 0; bt < batch; bt++) {
    const aOffset = bt * aBatchStride;
    const bOffset = bt * bBatchStride;
    const outOffset = bt * m * n;
    for (let j0 = 0; j0 < n; j0 += nBlock) {
      const cols = Math.min(nBlock, n - j0);
      const jPanels = Math.ceil(cols / NR);
      // Whole B panels the next job packs (the first job of this block of B).
      let packB: PackSource | undefined;
      if (!singleB || packedB !== bOffset) {
        // Bᵀ is the logical [n, k] matrix; B is stored [k, n] unless transB.
        if (pack !== null) {
          if (!residentB && copiedB !== bOffset) {
            view.set(b.subarray(bOffset, bOffset + k * n), rawB / 4);
          }
          copiedB = bOffset;
          const from = residentB ? b.byteOffset + bOffset * 4 : rawB;
          packB = packSource(w, from, b, bOffset, n, k, !transB, j0, cols, NR, kc, bAt / 4);
        } else packInTs(w, b, bOffset, n, k, !transB, j0, cols, NR, kc, bAt / 4, 0);
        packedB = singleB ? bOffset : -1;
      }
      for (let i0 = 0; i0 < m; i0 += mBlock) {
        const rows = Math.min(mBlock, m - i0);
        const iPanels = Math.ceil(rows / mr);
        let packA: PackSource | undefined;
        if (!singleA || packedA !== aOffset) {
          // A is the logical [m, k] matrix, stored [k, m] when transA.
          if (pack !== null) {
            if (!residentA && copiedA !== aOffset) {
              view.set(a.subarray(aOffset, aOffset + m * k), rawA / 4);
            }
            copiedA = aOffset;
            const from = residentA ? a.byteOffset + aOffset * 4 : rawA;
            packA = packSource(w, from, a, aOffset, m, k, transA, i0, rows, mr, kc, aAt / 4);
          } else packInTs(w, a, aOffset, m, k, transA, i0, rows, mr, kc, aAt / 4, 0);
          packedA = singleA ? aOffset : -1;
        }
        const job: PanelJob = {
          aAt,
          bAt,
          cAt,
          iPanels,
          jPanels,
          slice: sliceByA,
          k,
          ldc,
          mr,
          kc,
          biasAt: biasAt < 0 ? -1 : biasAt + j0 * 4,
          packA,
          packB,
        };
        packB = undefined;
        const parts = iPanels * jPanels * mr * NR * k >= MIN_THREADED_MACS
          ? Math.min(threads, w.threads?.available ?? 1)
          : 1;
        if (parts > 1) w.threads!.run(job, parts);
        else runAlone(w.kernels, job);
        copyOut(w, cAt, ldc, rows, cols, n, out, outOffset + i0 * n + j0);
      }
    }
  }
  return true;
}

/**
 * Copies the real `rows` x `cols` of the padded C at byte `cAt` (rows `ldc`
 * bytes apart) to `out` from index `at` on (rows `n` apart).
 */
function copyOut(
  w: WasmMatmul,
  cAt: number,
  ldc: number,
  rows: number,
  cols: number,
  n: number,
  out: TypedArray,
  at: number,
): void {
  if (w.pack !== null && w.heap.owns(out)) {
    // Within the memory: memory.copy, not a typed array's `set`.
    w.pack.copyRows(cAt, ldc, out.byteOffset + at * 4, n * 4, cols * 4, rows);
    return;
  }
  const view = w.view;
  const cFloats = cAt / 4;
  const ldcFloats = ldc / 4;
  if (cols === n && ldcFloats === n) {
    out.set(view.subarray(cFloats, cFloats + rows * n), at);
  } else if (cols < NARROW_COPY) {
    // Narrow rows (an MLP's 10 classes): a loop, not a view per row.
    for (let r = 0; r < rows; r++) {
      for (let c = 0, f = cFloats + r * ldcFloats, o = at + r * n; c < cols; c++) {
        out[o + c] = view[f + c];
      }
    }
  } else {
    for (let r = 0; r < rows; r++) {
      const from = cFloats + r * ldcFloats;
      out.set(view.subarray(from, from + cols), at + r * n);
    }
  }
}

/**
 * {@link matmulWasm} for a batch of products that each fit one block of A
 * and of B and are too small to be threaded alone (a convolution's
 * per-image products: 64 of [32, 144] x [144, 196] in the example CNN): the
 * entries are taken about BATCH_JOB_BYTES of
 * scratch at a time (more where that is too little work to wake the
 * threads for), and each such group is one job whose units span its
 * entries, so products far too small to be split themselves still use every
 * thread. A broadcast operand (batch stride 0) is packed once for the whole
 * batch. Every tile is computed as in a job of one entry (same panels, same
 * blocks of k in the same order), so the result is bitwise the same.
 */
function matmulBatched(
  w: WasmMatmul,
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: MatmulArgs<TypedArray>,
  threads: number,
  bias: TypedArray | undefined,
  kc: number,
  ldc: number,
  slice: number,
): boolean {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const mr = w.mr;
  const iPanels = Math.ceil(m / mr);
  const jPanels = Math.ceil(n / NR);
  const aBytes = align64(iPanels * mr * k * 4);
  const bBytes = align64(jPanels * NR * k * 4);
  const cBytes = iPanels * mr * ldc;
  const copyA = w.pack !== null && !w.heap.owns(a);
  const copyB = w.pack !== null && !w.heap.owns(b);
  // Scratch per entry for what is not broadcast: its packed operands, their copies, C.
  const perEntry = cBytes +
    (aBatchStride === 0 ? 0 : aBytes + (copyA ? m * k * 4 : 0)) +
    (bBatchStride === 0 ? 0 : bBytes + (copyB ? k * n * 4 : 0));
  const macs = iPanels * jPanels * mr * NR * k;
  // Twice the entries that pay for the threads: groups of equal size then still have enough.
  const most = Math.max(
    Math.floor(BATCH_JOB_BYTES / perEntry),
    2 * Math.ceil(MIN_THREADED_MACS / macs),
  );
  const entries = Math.ceil(batch / Math.ceil(batch / most));
  const aEntries = aBatchStride === 0 ? 1 : entries;
  const bEntries = bBatchStride === 0 ? 1 : entries;
  // The scratch: packed A and B, C, the bias row, then the copies of A and B.
  const bRel = aEntries * aBytes;
  const cRel = bRel + bEntries * bBytes;
  const biasRel = cRel + entries * cBytes;
  const rawARel = align64(biasRel + (bias === undefined ? 0 : jPanels * NR * 4));
  const rawBRel = rawARel + (copyA ? align64(aEntries * m * k * 4) : 0);
  const base = scratch(w, rawBRel + (copyB ? bEntries * k * n * 4 : 0));
  if (base === undefined) return false;
  const view = w.view;
  const biasAt = bias === undefined ? -1 : base + biasRel;
  if (bias !== undefined) {
    view.set(bias.subarray(0, n), biasAt / 4);
    view.fill(0, biasAt / 4 + n, biasAt / 4 + jPanels * NR);
  }
  const aAt = base, bAt = base + bRel, cAt = base + cRel;
  for (let e0 = 0; e0 < batch; e0 += entries) {
    const count = Math.min(entries, batch - e0);
    // A is the logical [m, k] matrix (stored [k, m] when transA); Bᵀ is the
    // logical [n, k] one (B stored [k, n] unless transB). A broadcast
    // operand was packed by the first group.
    const packA = e0 === 0 || aBatchStride !== 0
      ? packEntries(w, a, e0 * aBatchStride, aBatchStride === 0 ? 1 : count, m, k, transA, {
        panel: mr,
        kc,
        at: aAt,
        stride: aBytes,
        raw: copyA ? base + rawARel : -1,
      })
      : undefined;
    const packB = e0 === 0 || bBatchStride !== 0
      ? packEntries(w, b, e0 * bBatchStride, bBatchStride === 0 ? 1 : count, n, k, !transB, {
        panel: NR,
        kc,
        at: bAt,
        stride: bBytes,
        raw: copyB ? base + rawBRel : -1,
      })
      : undefined;
    const job: PanelJob = {
      aAt,
      bAt,
      cAt,
      iPanels,
      jPanels,
      slice,
      k,
      ldc,
      mr,
      kc,
      biasAt,
      packA,
      packB,
      batch: count,
      aStride: aBatchStride === 0 ? 0 : aBytes,
      bStride: bBatchStride === 0 ? 0 : bBytes,
      cStride: cBytes,
    };
    const parts = count * macs >= MIN_THREADED_MACS
      ? Math.min(threads, w.threads?.available ?? 1)
      : 1;
    if (parts > 1) w.threads!.run(job, parts);
    else runAlone(w.kernels, job);
    for (let e = 0; e < count; e++) {
      copyOut(w, cAt + e * cBytes, ldc, m, n, n, out, (e0 + e) * m * n);
    }
  }
  return true;
}

/**
 * Lays out `entries` consecutive batch entries of an operand (the logical
 * [rows, k] matrix from `offset` of `src`, entries rows·k apart, stored
 * transposed when `transposed`) for a batched job: entry e's panels go to
 * byte `at + e * stride`. The partial panel of each is packed here; the
 * whole ones are returned for the job to pack (from `src` itself when it
 * lives in the memory, else from a copy at byte `raw`), or packed here too
 * where `pack.wat` did not compile.
 */
function packEntries(
  w: WasmMatmul,
  src: TypedArray,
  offset: number,
  entries: number,
  rows: number,
  k: number,
  transposed: boolean,
  into: { panel: number; kc: number; at: number; stride: number; raw: number },
): PackSource | undefined {
  const { panel, kc, at, stride, raw } = into;
  const full = w.pack === null ? 0 : Math.floor(rows / panel);
  for (let e = 0; e < entries; e++) {
    const from = offset + e * rows * k;
    packInTs(w, src, from, rows, k, transposed, 0, rows, panel, kc, (at + e * stride) / 4, full);
  }
  if (full === 0) return undefined;
  if (raw >= 0) w.view.set(src.subarray(offset, offset + entries * rows * k), raw / 4);
  return {
    panels: full,
    src: raw >= 0 ? raw : src.byteOffset + offset * 4,
    ld: transposed ? rows * 4 : k * 4,
    transposed,
    stride: rows * k * 4,
  };
}

/** Starts `w`'s worker threads (once per process), enough for `threads` in all. */
function startThreads(w: WasmMatmul, threads: number): KernelThreads | undefined {
  if (w.shared && w.threads === undefined) {
    w.threads = new KernelThreads(
      w.module,
      w.packModule,
      w.memory,
      w.kernels,
      Math.max(threads, MAX_THREADS) - 1,
    );
  }
  return w.threads;
}

/**
 * Starts the float32 matmul's worker threads for up to `threads` threads in
 * all (products start them on first use anyway, and run on one thread until
 * they are up) and resolves with the threads products can use once they
 * have started: 1 where WebAssembly shared memory or workers are missing.
 * Also forgets that workers were late (they are, on a machine busier than
 * its cores, and products then run alone for a while).
 */
export async function startMatmulThreads(threads: number = MAX_THREADS): Promise<number> {
  const w = wasmFor("auto");
  const pool = w === null || threads <= 1 ? undefined : startThreads(w, threads);
  if (pool === undefined) return 1;
  pool.resetLateness();
  return await pool.started;
}

/**
 * A float32 array of `numel` values in the shared memory of the matmul
 * kernel `preference` runs in, so that products read it without copying
 * it in; undefined where that memory is not shared (no worker threads, and
 * growing it would detach the array) or cannot grow. Give it back with
 * {@link releaseKernelFloats}.
 */
export function kernelFloats(
  numel: number,
  preference: MatmulKernel | "auto" = "auto",
): Float32Array | undefined {
  return kernelArray(numel, preference, (heap, at) => heap.floats(at, numel));
}

/**
 * {@link kernelFloats} for int32 values (a max pool's positions, which
 * WebAssembly kernels then write in place).
 */
export function kernelInts(
  numel: number,
  preference: MatmulKernel | "auto" = "auto",
): Int32Array | undefined {
  return kernelArray(numel, preference, (heap, at) => heap.ints(at, numel));
}

/** `numel` 4-byte values in the kernel's shared memory, viewed by `view`; undefined as above. */
function kernelArray<T>(
  numel: number,
  preference: MatmulKernel | "auto",
  view: (heap: KernelHeap, at: number) => T,
): T | undefined {
  const w = wasmFor(preference);
  if (w === null || !w.shared) return undefined;
  const at = w.heap.alloc(numel * 4);
  return at === undefined ? undefined : view(w.heap, at);
}

/**
 * Gives an array from {@link kernelFloats} or {@link kernelInts} back to its
 * memory; false (and nothing done) for any other array.
 */
export function releaseKernelFloats(array: Float32Array | Int32Array): boolean {
  for (const w of instances.values()) {
    if (w !== null && w.heap.owns(array)) {
      w.heap.release(array.byteOffset, array.byteLength);
      return true;
    }
  }
  return false;
}

/**
 * The shared memory that holds every one of `arrays` (arrays from
 * {@link kernelFloats}), or null where one is a host array or they lie in
 * different memories: other WebAssembly loops can then run on them in place.
 */
export function residentMemory(...arrays: ArrayBufferView[]): WebAssembly.Memory | null {
  for (const w of instances.values()) {
    if (w !== null && w.shared && arrays.every((a) => w.heap.owns(a))) return w.memory;
  }
  return null;
}

/** Products that ran on worker threads so far in this process. */
export function threadedMatmuls(): number {
  return wasmFor("auto")?.threads?.threadedJobs ?? 0;
}

/** Threads one process's matmul uses at most (this one and its workers). */
export const MAX_THREADS: number = Math.max(
  1,
  Math.min(
    16,
    (globalThis.navigator as { hardwareConcurrency?: number } | undefined)
      ?.hardwareConcurrency ?? 1,
  ),
);

/**
 * Batched matmul (see `MatmulArgs`): float32 in the WebAssembly SIMD
 * kernel when the engine has WebAssembly SIMD (accumulating in float32), over
 * up to `threads` threads (this one and workers on the kernel's shared
 * memory) for products large enough to pay for them; everything else in
 * {@link matmulTs}. `kernel` picks the float32 kernel (see {@link matmulKernel}).
 */
export function matmul(
  layout: MatmulArgs<TypedArray>,
  threads = 1,
  kernel: MatmulKernel | "auto" = "auto",
): void {
  matmulBias(layout, undefined, threads, kernel);
}

/**
 * {@link matmul}, then `bias` (n values, or none) added to every row of
 * the output, rounded as adding it afterwards would round it (`addmm`):
 * the WebAssembly kernel adds it to its finished sums before storing them.
 */
export function matmulBias(
  layout: MatmulArgs<TypedArray>,
  bias: TypedArray | undefined,
  threads = 1,
  kernel: MatmulKernel | "auto" = "auto",
): void {
  const { a, b, out, m, n, k } = layout;
  if (layout.dtype === "float32" && m > 0 && n > 0 && k > 0) {
    const w = wasmFor(kernel);
    if (w !== null) {
      if (threads > 1) startThreads(w, threads);
      if (matmulWasm(w, a, b, out, layout, threads, bias)) return;
    }
  }
  matmulTs(a, b, out, layout);
  if (bias !== undefined) addBiasRows(out, bias, layout.batch * m, n);
}

/** Adds `bias` (n values) to each of the `rows` rows of `out`, as a composed add rounds it. */
export function addBiasRows(out: TypedArray, bias: TypedArray, rows: number, n: number): void {
  for (let r = 0, at = 0; r < rows; r++, at += n) {
    for (let j = 0; j < n; j++) out[at + j] += bias[j];
  }
}
