/**
 * Worker threads for the cpu backend's float32 matmul: every thread runs the
 * same WebAssembly kernel over one shared memory, each on its own share of
 * the packed panels, so a product uses every core while the kernel call
 * stays synchronous (the calling thread takes a share itself, then waits
 * with `Atomics.wait`).
 *
 * Threads start in the background the first time a backend asks for them;
 * products run on the calling thread alone until all of them are ready, so
 * nothing ever waits for a thread to start. In Deno they are
 * `node:worker_threads` workers, unref'd, because a web Worker keeps the
 * process alive after the program ends; in browsers they are web Workers
 * made from a Blob URL (which needs a cross-origin isolated page for the
 * shared memory; elsewhere the backend stays on one thread).
 * @module
 */

/** Control words (Int32Array indices) shared with the workers. */
const GEN = 0;
const PENDING = 1;
const READY = 2;
/** The next unit to take (see {@link runUnits}). */
const NEXT = 3;
/** The job's parameters start here; see {@link PanelJob}. */
const PARAMS = 4;
/**
 * Set (for good) when a thread's share threw: every thread then leaves the
 * job (a thread waiting for the packing phase would otherwise wait for a
 * unit that is never finished), and the calling thread redoes it alone.
 */
const FAULT = 32;
const CONTROL_WORDS = 33;
/**
 * A worker re-checks the generation this often even if no notify came: a
 * wake-up lost anyway (the protocol below loses none) then costs a second,
 * not the threads.
 */
const IDLE_RECHECK_MS = 1000;
/** A share that takes this long means a worker died: give up on the threads. */
const STALL_MS = 60_000;
/**
 * Products run on the calling thread alone for this long (doubling up to
 * the maximum while it keeps happening) after the workers made it wait
 * longer than its own share took: on a machine busier than its cores the OS
 * deschedules a worker mid-unit, and waiting for it costs more than doing
 * the work alone.
 */
const ALONE_MIN_MS = 50;
const ALONE_MAX_MS = 2000;
/** Waits shorter than this are never counted as late. */
const LATE_MS = 0.5;

/**
 * A product over packed panels (byte offsets into the shared memory). Its
 * work is cut into units (an L2-sized slice of A panels against one B panel,
 * one kernel call per block of k, some 10-60 µs at these sizes), that threads
 * take in turn from a shared counter: a thread the OS has descheduled (the
 * machine may be busier than its core count) holds up at most the unit it
 * is in, and the calling thread finishes the rest itself.
 */
export interface PanelJob {
  readonly aAt: number;
  readonly bAt: number;
  readonly cAt: number;
  /** A panels (of `mr` rows) and B panels (of 8 columns). */
  readonly iPanels: number;
  readonly jPanels: number;
  /** A panels per kernel call (an L2-sized slice). */
  readonly slice: number;
  readonly k: number;
  /** Bytes per row of C. */
  readonly ldc: number;
  readonly mr: number;
  /**
   * Length of a block of k: A and B are packed block by block of k (each
   * block [panels][kc][mr or 8]), and a unit runs its tiles through every
   * block in order, so the B panel of one block stays in L1.
   */
  readonly kc: number;
  /** Byte offset of the bias row (`addmm`, padded to whole B panels), or -1. */
  readonly biasAt: number;
  /** Whole A panels the job packs first (from a copy of A in the memory), or none. */
  readonly packA?: PackSource;
  /** Whole B panels the job packs first, or none. */
  readonly packB?: PackSource;
  /**
   * Products in the job (a batch, 1 if absent): entry e's packed A, packed B
   * and C start `aStride`, `bStride`, `cStride` bytes after entry 0's (a
   * stride of 0: an operand broadcast over the batch, packed once). Units
   * span the entries, so many small products keep every thread busy.
   */
  readonly batch?: number;
  readonly aStride?: number;
  readonly bStride?: number;
  readonly cStride?: number;
}

/**
 * Whole panels of an operand to lay out in the job's first phase, by every
 * thread, before any tile is computed: `panels` panels from the operand's
 * copy at byte `src` (its first row, column 0), rows `ld` bytes apart, or
 * columns `ld` bytes apart when `transposed` (see `pack.wat`). They go to
 * the job's `aAt` / `bAt` in blocks of k, like every packed panel.
 */
export interface PackSource {
  readonly panels: number;
  readonly src: number;
  readonly ld: number;
  readonly transposed: boolean;
  /** Bytes from one batch entry's copy to the next's (batched jobs whose operand is not broadcast). */
  readonly stride?: number;
}

/** The functions a job runs: the kernel, and `pack.wat`'s (null where it does not compile). */
export interface JobKernels {
  readonly panel: PanelFn;
  readonly packRows: PackFn | null;
  readonly packCols: PackFn | null;
}

/** `pack.wat`'s `pack_rows` / `pack_cols`: `(src, ld, dst, panels, width, cols)`. */
export type PackFn = (
  src: number,
  ld: number,
  dst: number,
  panels: number,
  width: number,
  cols: number,
) => void;

/** The kernel export: `panel(a, b, c, panels, k, ldc, flags, bias)` (see the `.wat` files). */
export type PanelFn = (
  a: number,
  b: number,
  c: number,
  panels: number,
  k: number,
  ldc: number,
  flags: number,
  bias: number,
) => void;

/**
 * Takes units of the job whose parameters are in `p` (from index 4) until
 * none is left, running each through `panel`. Self-contained: its source
 * text is also the workers' code, so main thread and workers cannot
 * disagree on what a unit is.
 */
function runUnits(
  panel: PanelFn,
  packRows: PackFn | null,
  packCols: PackFn | null,
  p: Int32Array,
  mayBlock: boolean,
): void {
  const aAt = p[4], bAt = p[5], cAt = p[6], iPanels = p[7], jPanels = p[8];
  const slice = p[9], k = p[10], ldc = p[11], mr = p[12], kc = p[14], biasAt = p[15];
  // Phase 1: whole panels of A, then of B, a few per unit, each through every
  // block of k; the thread finishing the last one lets the others on.
  // A batched job: `batch` products, entry e's operands `aStride`, `bStride`,
  // `cStride` bytes on (0: broadcast, packed once), its sources p[30], p[31].
  const batch = p[26], aStride = p[27], bStride = p[28], cStride = p[29];
  const groupsA = Math.ceil(p[16] / 4), groupsB = Math.ceil(p[20] / 4);
  const unitsA = groupsA * (aStride > 0 ? batch : 1);
  const packUnits = unitsA + groupsB * (bStride > 0 ? batch : 1);
  if (packUnits > 0) {
    // (A thread without `pack.wat` takes no pack unit, but still waits.)
    while (packRows !== null && packCols !== null) {
      const unit = Atomics.add(p, 24, 1);
      if (unit >= packUnits) break;
      const isA = unit < unitsA;
      const o = isA ? 16 : 20;
      const groups = isA ? groupsA : groupsB;
      const u = isA ? unit : unit - unitsA;
      const e = Math.floor(u / groups);
      const width = isA ? mr : 8, total = isA ? iPanels : jPanels;
      const at = isA ? aAt + e * aStride : bAt + e * bStride;
      const first = 4 * (u - e * groups);
      const count = Math.min(4, p[o] - first);
      const ld = p[o + 2], transposed = p[o + 3] === 1;
      const pack = transposed ? packCols : packRows;
      // Panel `first`: its first row (row-major source) or column (transposed).
      const src = p[o + 1] + e * p[isA ? 30 : 31] + first * width * (transposed ? 4 : ld);
      for (let k0 = 0; k0 < k; k0 += kc) {
        const kb = Math.min(kc, k - k0);
        const dst = at + (k0 * total + first * kb) * width * 4;
        pack(src + (transposed ? k0 * ld : k0 * 4), ld, dst, count, width, kb);
      }
      if (Atomics.add(p, 25, 1) === packUnits - 1) Atomics.notify(p, 25);
    }
    for (let done = Atomics.load(p, 25); done < packUnits; done = Atomics.load(p, 25)) {
      // A thread that faulted may have taken a unit it never finishes.
      if (Atomics.load(p, 32) !== 0) return;
      if (mayBlock) Atomics.wait(p, 25, done, 1);
    }
  }
  // Phase 2: the tiles.
  // A unit's tiles are two B panels wide: 64 bytes of each row of C, one
  // cache line (C is 64-byte aligned, `ldc` a multiple of 64), so two
  // threads never write the same line (with one panel per unit, neighbours
  // on two cores fought over every line of C they stored).
  const pairs = Math.ceil(jPanels / 2);
  const perEntry = Math.ceil(iPanels / slice) * pairs;
  const units = perEntry * batch;
  for (;;) {
    const taken = Atomics.add(p, 3, 1);
    if (taken >= units) return;
    const e = Math.floor(taken / perEntry);
    const unit = taken - e * perEntry;
    const s = Math.floor(unit / pairs);
    const j0 = 2 * (unit - s * pairs);
    const j1 = Math.min(j0 + 2, jPanels);
    const ip = s * slice;
    const count = Math.min(slice, iPanels - ip);
    const c = cAt + e * cStride + ip * mr * ldc;
    const aEntry = aAt + e * aStride, bEntry = bAt + e * bStride;
    // Every block of k in order, by this thread: the sums run in the same
    // order whatever the thread count, so the result is bitwise the same.
    for (let k0 = 0; k0 < k; k0 += kc) {
      const kb = Math.min(kc, k - k0);
      const flags = (k0 > 0 ? 1 : 0) | (biasAt >= 0 && k0 + kb >= k ? 2 : 0);
      const a = aEntry + (k0 * iPanels + ip * kb) * mr * 4;
      for (let jp = j0; jp < j1; jp++) {
        panel(
          a,
          bEntry + (k0 * jPanels + jp * kb) * 32,
          c + jp * 32,
          count,
          kb,
          ldc,
          flags,
          biasAt + jp * 32,
        );
      }
    }
  }
}

/** The worker's code: instantiate the kernel on the shared memory, then serve jobs forever. */
function workerSource(deno: boolean): string {
  const serve = `
const runUnits = ${runUnits.toString()};
function serve(module, packModule, memory, control, part) {
  const panel = new WebAssembly.Instance(module, { env: { memory } }).exports.panel;
  const packer = packModule && new WebAssembly.Instance(packModule, { env: { memory } }).exports;
  const p = new Int32Array(control);
  Atomics.add(p, ${READY}, 1);
  Atomics.notify(p, ${READY});
  let gen = 0;
  for (;;) {
    while (Atomics.load(p, ${GEN}) === gen) Atomics.wait(p, ${GEN}, gen, ${IDLE_RECHECK_MS});
    gen = Atomics.load(p, ${GEN});
    let fault;
    try {
      if (part < p[${PARAMS + 9}]) {
        runUnits(panel, packer ? packer.pack_rows : null, packer ? packer.pack_cols : null, p, true);
      }
    } catch (e) {
      // Before PENDING: the caller must see it once this job is done.
      Atomics.store(p, ${FAULT}, 1);
      fault = e;
    }
    if (Atomics.sub(p, ${PENDING}, 1) === 1) Atomics.notify(p, ${PENDING});
    // Then the worker ends, its error event telling the page or process why.
    if (fault !== undefined) throw fault;
  }
}
`;
  return deno
    ? serve +
      `const { workerData: d } = require("node:worker_threads");\nserve(d.module, d.packModule, d.memory, d.control, d.part);\n`
    : serve +
      `onmessage = (e) =>\n  serve(e.data.module, e.data.packModule, e.data.memory, e.data.control, e.data.part);\n`;
}

/** Whether this thread may block in `Atomics.wait` (not a browser's main thread). */
function canBlock(): boolean {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

/** A started group of workers sharing one kernel memory. */
export class KernelThreads {
  readonly #control = new SharedArrayBuffer(CONTROL_WORDS * 4);
  readonly #p = new Int32Array(this.#control);
  readonly #workers: number;
  readonly #kernels: JobKernels;
  readonly #block = canBlock();
  #failed = false;
  /** Until when products run on this thread alone (workers were late). */
  #aloneUntil = 0;
  #aloneMs = ALONE_MIN_MS;
  readonly #starting: Promise<void>;
  #started: Promise<number> | undefined;

  /**
   * Starts `workers` workers (in the background) on `module` (and
   * `packModule`, `pack.wat`, where it compiled) over `memory`; `kernels`
   * are this thread's instances of them.
   */
  constructor(
    module: WebAssembly.Module,
    packModule: WebAssembly.Module | null,
    memory: WebAssembly.Memory,
    kernels: JobKernels,
    workers: number,
  ) {
    this.#workers = workers;
    this.#kernels = kernels;
    this.#starting = this.#start(module, packModule, memory).catch(() => {
      this.#failed = true;
    });
  }

  /**
   * Resolves with {@link available} once every worker has started, or 1 if
   * one failed (polled only when asked for, so nothing runs in the
   * background otherwise).
   */
  get started(): Promise<number> {
    this.#started ??= this.#starting.then(() => this.#whenReady());
    return this.#started;
  }

  /** Products run on worker threads so far (a count, for tests and benchmarks). */
  threadedJobs = 0;

  /** Forgets that workers were late: the next products use every thread again. */
  resetLateness(): void {
    this.#aloneUntil = 0;
    this.#aloneMs = ALONE_MIN_MS;
  }

  /** Polls (without blocking this thread) until every worker is ready or one failed. */
  async #whenReady(): Promise<number> {
    const since = performance.now();
    while (!this.#ready && !this.#failed && this.#workers > 0) {
      if (performance.now() - since > STALL_MS) return 1;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return this.#failed || !this.#ready ? 1 : this.#workers + 1;
  }

  async #start(
    module: WebAssembly.Module,
    packModule: WebAssembly.Module | null,
    memory: WebAssembly.Memory,
  ): Promise<void> {
    const control = this.#control;
    const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
    if (isDeno) {
      // A computed specifier keeps bundlers for the browser away from it.
      const specifier = "node:worker_threads";
      const { Worker: NodeWorker } = await import(specifier) as {
        Worker: new (code: string, options: object) => {
          unref(): void;
          on(event: string, fn: (e: unknown) => void): void;
        };
      };
      const code = workerSource(true);
      for (let part = 1; part <= this.#workers; part++) {
        const worker = new NodeWorker(code, {
          eval: true,
          workerData: { module, packModule, memory, control, part },
        });
        worker.on("error", () => this.#failed = true);
        // The program may end while workers wait for jobs: let it.
        worker.unref();
      }
    } else {
      const url = URL.createObjectURL(new Blob([workerSource(false)], { type: "text/javascript" }));
      for (let part = 1; part <= this.#workers; part++) {
        const worker = new Worker(url);
        worker.onerror = () => this.#failed = true;
        worker.postMessage({ module, packModule, memory, control, part });
      }
    }
  }

  get #ready(): boolean {
    return Atomics.load(this.#p, READY) >= this.#workers;
  }

  /**
   * Threads a job can use now: 1 until every worker has started, if one
   * failed, or for a while after workers were late; else all of them.
   */
  get available(): number {
    if (this.#failed || !this.#ready || performance.now() < this.#aloneUntil) return 1;
    return this.#workers + 1;
  }

  /**
   * Runs `job` on up to `parts` threads (this one included); returns when all are done.
   *
   * Why no wake-up is lost and no job sees another's counters:
   * - This thread writes the parameters (plain stores), sets PENDING to the
   *   worker count, then bumps GEN and notifies; these atomics are
   *   sequentially consistent, so a worker that reads the new GEN also
   *   reads the new parameters.
   * - Every worker, `parts` or not, decrements PENDING exactly once per
   *   generation it sees, and GEN is bumped again only once PENDING is 0.
   *   So between two of a worker's waits GEN moves by exactly one (a worker
   *   cannot skip or serve a generation twice), and after its decrement a
   *   worker reads nothing but GEN: writing the next job's parameters
   *   cannot race with it.
   * - `Atomics.wait` compares and sleeps atomically with respect to
   *   `notify`: a worker not yet back at its wait when GEN moves (slow to
   *   start, descheduled after its decrement) sees "not-equal" and goes on.
   *   Every wait re-reads its word in a loop and has a timeout besides.
   * - Units (NEXT, then p[24] for packing) are handed out by `Atomics.add`,
   *   so each is taken once, by whichever thread comes first; a thread the
   *   OS deschedules holds up only the unit it is in.
   * - Products that run alone (small ones, the back-off after late
   *   workers) never touch these words ({@link runAlone} has its own), so
   *   switching between the two cannot leave a generation half-served.
   * What could break it is a share that throws: its thread never finishes
   * its units (packing waits for them forever) and, before FAULT, a dead
   * worker went unnoticed by this thread (its error event cannot arrive
   * while this thread waits) until the next job stalled for STALL_MS.
   */
  run(job: PanelJob, parts: number): void {
    const p = this.#p;
    writeParams(p, job, parts);
    this.threadedJobs++;
    Atomics.store(p, PENDING, this.#workers);
    Atomics.add(p, GEN, 1);
    Atomics.notify(p, GEN);
    const began = performance.now();
    const { panel, packRows, packCols } = this.#kernels;
    try {
      runUnits(panel, packRows, packCols, p, this.#block);
    } catch (e) {
      // Let the workers leave the job before the error goes up: a job posted
      // while they were still in this one would share its counters.
      Atomics.store(p, FAULT, 1);
      this.#failed = true;
      this.#waitForWorkers(performance.now());
      throw e;
    }
    const started = performance.now();
    this.#waitForWorkers(started);
    if (Atomics.load(p, FAULT) !== 0) {
      // A worker's share threw (its units are missing, or the packing was
      // abandoned): redo the whole job here, which gives the same bits.
      this.#failed = true;
      runAlone(this.#kernels, job);
      return;
    }
    const waited = performance.now() - started;
    if (waited > LATE_MS && waited > started - began) {
      this.#aloneUntil = performance.now() + this.#aloneMs;
      this.#aloneMs = Math.min(2 * this.#aloneMs, ALONE_MAX_MS);
    } else if (4 * waited < started - began) {
      this.#aloneMs = ALONE_MIN_MS;
    }
  }

  /** Waits until every worker has left the job; throws after STALL_MS from `since`. */
  #waitForWorkers(since: number): void {
    const p = this.#p;
    for (let left = Atomics.load(p, PENDING); left !== 0; left = Atomics.load(p, PENDING)) {
      if (this.#block) Atomics.wait(p, PENDING, left, 1000);
      if (performance.now() - since > STALL_MS) {
        this.#failed = true;
        throw new Error(
          `cpu matmul: ${left} of ${this.#workers} worker threads did not finish in ${
            STALL_MS / 1000
          } s; later products run on one thread`,
        );
      }
    }
  }
}

const alone = new Int32Array(CONTROL_WORDS);

/** Runs `job` on this thread alone. */
export function runAlone(kernels: JobKernels, job: PanelJob): void {
  writeParams(alone, job, 1);
  runUnits(kernels.panel, kernels.packRows, kernels.packCols, alone, false);
}

function writeParams(p: Int32Array, job: PanelJob, parts: number): void {
  p[NEXT] = 0;
  p[PARAMS] = job.aAt;
  p[PARAMS + 1] = job.bAt;
  p[PARAMS + 2] = job.cAt;
  p[PARAMS + 3] = job.iPanels;
  p[PARAMS + 4] = job.jPanels;
  p[PARAMS + 5] = job.slice;
  p[PARAMS + 6] = job.k;
  p[PARAMS + 7] = job.ldc;
  p[PARAMS + 8] = job.mr;
  p[PARAMS + 9] = parts;
  p[PARAMS + 10] = job.kc;
  p[PARAMS + 11] = job.biasAt;
  for (const [at, source] of [[16, job.packA], [20, job.packB]] as const) {
    p[at] = source?.panels ?? 0;
    p[at + 1] = source?.src ?? 0;
    p[at + 2] = source?.ld ?? 0;
    p[at + 3] = source?.transposed ? 1 : 0;
  }
  p[24] = 0; // the next pack unit
  p[25] = 0; // pack units done
  p[26] = job.batch ?? 1;
  p[27] = job.aStride ?? 0;
  p[28] = job.bStride ?? 0;
  p[29] = job.cStride ?? 0;
  p[30] = job.packA?.stride ?? 0;
  p[31] = job.packB?.stride ?? 0;
}
