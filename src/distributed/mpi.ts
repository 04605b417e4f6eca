/**
 * The `"mpi"` process group: ranks are processes started by an MPI launcher
 * (`mpiexec -n N deno run -A train.ts`, `srun --mpi=pmi2`), on one machine
 * or many. MPI is called through Deno's FFI on the MPICH ABI
 * (`libmpich.so.12`: Debian's `mpich`; Intel MPI and Cray MPICH share it),
 * whose handles are plain integers (`MPI_COMM_WORLD = 0x44000000`).
 *
 * MPI is started with `MPI_THREAD_MULTIPLE` and every call that can wait is
 * an FFI symbol marked `nonblocking`, so it runs on a helper thread and the
 * event loop goes on. Up to {@link DIRECT_RANKS} ranks, a collective is ONE
 * meeting of the ranks: every rank posts, to every other rank, its header
 * and then its data (two messages on one tag, which MPI keeps in order) and
 * the matching receives, tests for completion on the calling thread for a
 * few milliseconds, then waits for the rest in one `MPI_Waitall` on a helper
 * thread; then it compares the headers and combines the data in rank
 * order (so every rank gets the same bits). Float32 sums and averages of
 * ranks that all share one machine (DDP's gradients) meet in an MPI-3
 * shared window instead of messages (`mpi_node.ts`): the meetings then
 * carry only headers. A rank that called something
 * else still sends one header and one data message, so the messages stay
 * paired and a mismatch (also one whose data is longer than expected: MPI
 * reports the truncation, errors are returned, not fatal) is an error on
 * every rank. More ranks first agree on the header (point to point), then
 * run MPI's blocking collective on a helper thread, which scales better. A
 * rank whose program throws tells the others over a failure channel (a
 * receive every rank keeps posted, tested while a collective waits) before
 * it exits.
 * A failed collective ends the job with `MPI_Abort` shortly after the error
 * is reported, as MPI's own errors do: the ranks cannot agree any more.
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import { bytesOf } from "./bytes.ts";
import { ReduceArea, ReduceAreas } from "./wasm_reduce.ts";
import { NodeSum } from "./mpi_node.ts";
import {
  check,
  MPI_ANY_SOURCE,
  MPI_BYTE,
  MPI_COMM_TYPE_SHARED,
  MPI_COMM_WORLD,
  MPI_DOUBLE,
  MPI_ERR_IN_STATUS,
  MPI_ERR_PENDING,
  MPI_ERR_TRUNCATE,
  MPI_ERRORS_RETURN,
  MPI_FLOAT,
  MPI_IN_PLACE,
  MPI_INFO_NULL,
  MPI_INT,
  MPI_REQUEST_NULL,
  MPI_SUM,
  MPI_THREAD_MULTIPLE,
  MPI_UNDEFINED,
  type MpiLibrary,
  STATUS_ERROR,
  STATUS_WORDS,
  SYMBOLS,
} from "./mpi_abi.ts";
import {
  type AllReduceFill,
  type AllReduceTake,
  allReduceViaHost,
  checkHeaders,
  checkPair,
  type CollectiveCall,
  describeHeader,
  DistributedError,
  HEADER_WORDS,
  type ProcessGroupBackend,
  type ProcessGroupInit,
  reduceInto,
  SYNC_WORDS,
} from "./backend.ts";

const TAG_HEADER = 0x6d67;
const TAG_FAILURE = 0x6d68;
const TAG_CALL = 0x6d69;
/**
 * Up to this many ranks a collective is one point-to-point meeting (each
 * rank sends its whole array to each other rank: (N - 1) x the bytes, one
 * latency); beyond, MPI's own collective algorithms (log N latencies, less
 * traffic per rank).
 */
const DIRECT_RANKS = 4;
/** Shared windows kept per group (a DDP step sums the same length every time). */
const NODE_WINDOWS = 4;
/** How often a rank waiting in a collective looks at the failure channel. */
const FAILURE_POLL_MS = 20;
/** Sleep between tests of a blocking `allGatherSync`. */
const SYNC_POLL_MS = 0.2;
/**
 * How long a collective first tests for completion on the calling thread
 * (`MPI_Testall` in a loop) before it waits on a helper thread:
 * `MULTIGRAD_MPI_SPIN_MS`, default 10. On a busy machine handing the wait
 * to a helper thread and back costs more than a short spin (a DDP step of 2
 * cpu ranks: 62-71% -> 73-77% of the two-process ceiling at load 4-5).
 */
function spinMs(): number {
  const value = Number(envVar("MULTIGRAD_MPI_SPIN_MS") ?? 10);
  return Number.isFinite(value) && value >= 0 ? value : 10;
}
/**
 * How often a collective waiting for a late rank tests for its arrival,
 * after the spin: every millisecond at first, then every eighth of the
 * time waited so far, up to {@link LATE_POLL_MAX_MS}. Noticing the arrival
 * then costs at most 1/8 more than the wait itself, and a rank idling in a
 * collective (rank 0 evaluating, a launcher's job waiting for its command)
 * wakes 20 times a second instead of 1,000: every wake takes MPI's progress
 * engine and a timer, 4.6% of a core at 1 ms here, taken from the ranks
 * that compute when the cores are shared.
 */
const LATE_POLL_MS = 1;
/** The longest pause between tests for a late rank (see {@link LATE_POLL_MS}). */
const LATE_POLL_MAX_MS = 50;

/** The pause before the next test for a late rank, `waitedMs` into the wait. */
function latePollMs(waitedMs: number): number {
  return Math.min(LATE_POLL_MAX_MS, Math.max(LATE_POLL_MS, waitedMs / 8));
}
/** How long each timer tick of a waiting send or recv tests for progress. */
const P2P_TICK_SPIN_MS = 0.25;
const FAILURE_BYTES = 2048;
/** Grace period between reporting a failed collective and `MPI_Abort`. */
const ABORT_AFTER_MS = 1000;
/** How long a failing rank waits, after telling the others, before it ends the job. */
const FAILURE_GRACE_MS = 500;

/** Library names tried in order (after `MULTIGRAD_MPI_LIB`). */
const LIBRARY_NAMES = ["libmpich.so.12", "libmpich.so", "libmpich.12.dylib", "libmpi.so.12"];

let library: MpiLibrary | null = null;
let started = false;
let aborting = false;
let worldRank = -1;
const live = new Set<MpiBackend>();

function envVar(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function loadLibrary(): MpiLibrary {
  if (library) return library;
  if (typeof globalThis.Deno?.dlopen !== "function") {
    throw new Error(
      'the "mpi" process-group backend needs Deno\'s FFI (Deno.dlopen): run with --allow-ffi (or -A)',
    );
  }
  const override = envVar("MULTIGRAD_MPI_LIB");
  const names = override ? [override] : LIBRARY_NAMES;
  const reasons: string[] = [];
  for (const name of names) {
    try {
      library = Deno.dlopen(name, SYMBOLS);
      keepLoaded(name);
      return library;
    } catch (error) {
      reasons.push(`${name}: ${(error as Error).message}`);
    }
  }
  throw new Error(
    `the "mpi" process-group backend needs MPICH's library (libmpich.so.12, or an ABI-compatible MPI such as Intel MPI or Cray MPICH) and found none: install it with \`apt-get install mpich\` (Debian, Ubuntu; \`dnf install mpich\` on Fedora), or set MULTIGRAD_MPI_LIB to the library's path (${
      reasons.join("; ")
    })`,
  );
}

/**
 * @internal Whether MPICH's library loads (for `isMpiAvailable`): false,
 * never an error, without FFI permission or the library.
 */
export function mpiLibraryLoads(): boolean {
  try {
    loadLibrary();
    return true;
  } catch {
    return false;
  }
}

/**
 * Marks the MPI library never to be unloaded (glibc's `RTLD_NODELETE`, applied with
 * `RTLD_NOLOAD` to the copy `Deno.dlopen` loaded), where the C library offers `dlopen`.
 *
 * Why: Deno closes a `Deno.dlopen` library when the runtime shuts down, also while a helper
 * thread is still inside a nonblocking MPI call (a wait that timed out, a window allocation a
 * dead rank never joined). That thread then returned into unmapped code: a segmentation fault
 * instead of the error that ended the rank, in about 1 of 20 runs of the failure tests under
 * load (a core dump showed libmpich and libucp unmapped under the crashed thread; bench/NOTES.md,
 * 2026-11-27 09:40). Kept mapped, the thread ends with the process.
 * @internal
 */
export function keepLoaded(name: string): void {
  if (Deno.build.os !== "linux") return;
  const RTLD_NOW = 2, RTLD_NOLOAD = 4, RTLD_NODELETE = 0x1000;
  for (const libc of ["libc.so.6", "libdl.so.2"]) {
    let c: Deno.DynamicLibrary<{ dlopen: { parameters: ["buffer", "i32"]; result: "pointer" } }>;
    try {
      c = Deno.dlopen(libc, { dlopen: { parameters: ["buffer", "i32"], result: "pointer" } });
    } catch {
      continue;
    }
    try {
      const path = new TextEncoder().encode(`${name}\0`);
      if (c.symbols.dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) !== null) return;
    } finally {
      c.close();
    }
  }
}

/** A meeting's posted messages (see `MpiBackend.#post`). */
interface Meeting {
  readonly peers: readonly number[];
  readonly headers: readonly Int32Array[];
  readonly requests: RequestSet;
  /** The ranks whose header has not arrived. */
  missing(): number[];
}

/**
 * Requests tested to their end. `MPI_Testall` (and a wait) returns
 * `MPI_ERR_IN_STATUS` as soon as one request fails, while others may still
 * be pending (`MPI_ERR_PENDING` in their status; a late rank's header, say):
 * those are tested on, and each request keeps the status it ended with, so
 * nothing is read from a receive that has not completed.
 */
class RequestSet {
  /** The handles (MPI sets those that ended to MPI_REQUEST_NULL). */
  readonly handles: Int32Array;
  /** Each request's status once it has ended. */
  readonly statuses: Int32Array;
  readonly #lib: MpiLibrary;
  readonly #scratch: Int32Array;
  readonly #ended: Uint8Array;
  readonly #flag = new Int32Array(1);
  #failed = false;

  constructor(lib: MpiLibrary, handles: Int32Array) {
    this.#lib = lib;
    this.handles = handles;
    this.statuses = new Int32Array(handles.length * STATUS_WORDS);
    this.#scratch = new Int32Array(handles.length * STATUS_WORDS);
    this.#ended = new Uint8Array(handles.length);
  }

  /** One `MPI_Testall`: the set's code once every request has ended (see {@link settled}), else null. */
  test(): number | null {
    const code = this.#lib.symbols.MPI_Testall(
      this.handles.length,
      this.handles,
      this.#flag,
      this.#scratch,
    );
    if (code !== MPI_ERR_IN_STATUS) {
      check("MPI_Testall", code);
      if (!this.#flag[0]) return null;
    }
    return this.settled(code);
  }

  /** Tests until the set has ended or `until` (a `performance.now()` time): its code, else null. */
  testUntil(until: number): number | null {
    let code: number | null;
    do code = this.test(); while (code === null && performance.now() < until);
    return code;
  }

  /** A blocking `MPI_Waitall` of the set, on a helper thread (then {@link settled} with its code). */
  waitAll(): Promise<number> {
    return this.#lib.symbols.MPI_Waitall(this.handles.length, this.handles, this.#scratch);
  }

  /**
   * After a test or wait that returned `code` with every request done or
   * failed: the set's code (0, or `MPI_ERR_IN_STATUS` when one failed, its
   * status saying how), or null while one is still pending.
   */
  settled(code: number): number | null {
    const failed = code === MPI_ERR_IN_STATUS;
    if (!failed) check("MPI_Waitall", code);
    let pending = false;
    for (let i = 0; i < this.handles.length; i++) {
      const status = this.#scratch.subarray(i * STATUS_WORDS, (i + 1) * STATUS_WORDS);
      if (failed && status[STATUS_ERROR] === MPI_ERR_PENDING) pending = true;
      else if (!this.#ended[i]) {
        this.statuses.set(status, i * STATUS_WORDS);
        this.#ended[i] = 1;
      }
    }
    this.#failed ||= failed;
    if (pending) return null;
    return this.#failed ? MPI_ERR_IN_STATUS : 0;
  }
}

/** What a rank sends or expects when a collective moves no data to or from it. */
const NOTHING = new Uint8Array(0);

/** A new zeroed array of `like`'s type, of `length` elements (default `like`'s). */
function makeLike(like: TypedArray, length = like.length): TypedArray {
  return new (like.constructor as Float32ArrayConstructor)(length);
}

/** Blocks the thread for `ms` (a failing rank's last moment, so peers can report it). */
// Made on first use: browsers without cross-origin isolation have no SharedArrayBuffer.
let sleeper: Int32Array | null = null;
function sleepSync(ms: number): void {
  try {
    sleeper ??= new Int32Array(new SharedArrayBuffer(4));
    Atomics.wait(sleeper, 0, 0, ms);
  } catch {
    // Atomics.wait is refused on this thread: exit without the grace period.
  }
}

function datatype(call: CollectiveCall): number {
  switch (call.dtype) {
    case "float32":
      return MPI_FLOAT;
    case "int32":
      return MPI_INT;
    case "float64":
      return MPI_DOUBLE;
    default:
      throw new TypeError(`mpi: ${describeHeader(call.header)} has no data type`);
  }
}

/** Tells every other rank of every live group that this process is failing. */
function reportFailure(error: unknown): void {
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  for (const group of live) group.announceFailure(text);
}

function onUncaught(event: ErrorEvent | PromiseRejectionEvent): void {
  const lib = library;
  if (!lib || (live.size === 0 && !aborting)) return;
  const error = "error" in event ? event.error : (event as PromiseRejectionEvent).reason;
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  console.error(`multigrad mpi rank ${worldRank}: uncaught ${text}`);
  if (!aborting) {
    // Tell the others, and give them a moment to print which rank failed.
    reportFailure(error);
    sleepSync(FAILURE_GRACE_MS);
  }
  // End the job the MPI way: exiting while an MPI call may be blocked on a
  // helper thread can crash, and the launcher then ends every rank anyway.
  lib.symbols.MPI_Abort(MPI_COMM_WORLD, 1);
}

function onUnload(): void {
  const lib = library;
  if (!lib || !started || aborting) return;
  for (const group of live) group.close();
  const finalized = new Int32Array(1);
  lib.symbols.MPI_Finalized(finalized);
  if (!finalized[0]) lib.symbols.MPI_Finalize();
}

/** MPI's start, once per process (the first `initProcessGroup` makes it; later ones wait for it). */
let starting: Promise<void> | null = null;

/**
 * The least time MPI_Init may wait for the job's other ranks, whatever the
 * collectives' `timeoutMs`: starting a Deno process took over 500 ms on a
 * loaded 2-core machine, so a short collective timeout failed healthy jobs
 * at their start (the tcp backend's rendezvous has the same floor).
 */
const INIT_MIN_MS = 10_000;

function startMpi(lib: MpiLibrary, timeoutMs: number): Promise<void> {
  // A failed start stays failed: a late MPI_Init may still be running.
  starting ??= initMpi(lib, Math.max(timeoutMs, INIT_MIN_MS));
  return starting;
}

async function initMpi(lib: MpiLibrary, timeoutMs: number): Promise<void> {
  const flag = new Int32Array(1);
  check("MPI_Initialized", lib.symbols.MPI_Initialized(flag));
  if (!flag[0]) {
    const provided = new Int32Array(1);
    // MPI_Init waits for every rank of the job (their launch data): on a
    // helper thread, so that a rank that never starts is an error at
    // `timeoutMs`, not a hang. No MPI call may follow then; the error ends
    // this rank, and the launcher the job.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), timeoutMs);
    });
    const code = await Promise.race([
      lib.symbols.MPI_Init_thread(null, null, MPI_THREAD_MULTIPLE, provided),
      late,
    ]);
    clearTimeout(timer);
    if (code === "late") {
      const rank = ["PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]
        .map(envVar).find((v) => v !== undefined);
      throw new Error(
        `initProcessGroup (mpi)${
          rank === undefined ? "" : ` on rank ${rank}`
        }: MPI_Init did not return within ${timeoutMs} ms: not every rank of the job has started (one hung or died before initProcessGroup, or the launcher started fewer)`,
      );
    }
    check("MPI_Init_thread", code);
    // Calls come from the event loop's thread while a helper thread waits
    // in MPI (a test of the failure channel or of a send during a blocking
    // wait): only MPI_THREAD_MULTIPLE allows that.
    if (provided[0] < MPI_THREAD_MULTIPLE) {
      throw new Error(
        `mpi: the MPI library gives thread level ${
          provided[0]
        }; multigrad needs MPI_THREAD_MULTIPLE (${MPI_THREAD_MULTIPLE}): use an MPI built with thread support (Debian's mpich is)`,
      );
    }
  }
  // A truncated receive (a rank that sent more than this one expects) must
  // come back as an error to report, not end the job: MPICH reports errors
  // of multi-request waits on MPI_COMM_WORLD's handler.
  check(
    "MPI_Comm_set_errhandler",
    lib.symbols.MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
  );
  started = true;
  globalThis.addEventListener("error", onUncaught);
  globalThis.addEventListener("unhandledrejection", onUncaught);
  globalThis.addEventListener("unload", onUnload);
}

/** This rank's end of an MPI process group (a duplicate of MPI_COMM_WORLD). */
class MpiBackend implements ProcessGroupBackend {
  readonly rank: number;
  readonly worldSize: number;
  readonly #lib: MpiLibrary;
  readonly #comm: number;
  /** `allGatherSync`'s own communicator. */
  readonly #syncComm: number;
  /** Point-to-point messages (header, then data, on the user's tag) and their acknowledgements. */
  readonly #p2pComms: readonly [number, number];
  readonly #spinMs = spinMs();
  /** Whether this is a sub-group (`newGroup`), not the whole job. */
  readonly #sub: boolean;
  readonly #timeoutMs: number;
  // The failure channel: a receive kept posted for another rank's last words.
  readonly #failureRequest = new Int32Array([MPI_REQUEST_NULL]);
  /**
   * Whether a helper thread's wait holds the failure channel's request
   * (`#waitAll`): the loop's thread must not test it then, or both could
   * complete it (MPICH asserts on the request's count).
   */
  #failureHeld = false;
  /** Whether another rank's failure message has arrived. */
  #failureSeen = false;
  readonly #failureBuffer = new Uint8Array(FAILURE_BYTES);
  /** Receive arrays reused by all-reduces, by type, length and sending rank. */
  readonly #scratch = new Map<string, TypedArray>();
  /** Memory for float32 sums, by length (made once the world size is known). */
  readonly #areas: ReduceAreas;
  /**
   * A communicator of this group's ranks when they all share this machine
   * (and there are at most {@link DIRECT_RANKS}), for float32 sums in
   * shared windows ({@link NodeSum}); else null.
   */
  readonly #nodeComm: number | null;
  /** Shared windows for float32 sums, by length (at most {@link NODE_WINDOWS}). */
  readonly #nodeSums = new Map<number, NodeSum>();
  #closed = false;

  /** This rank's end of a group over (duplicates of) `parent`. */
  constructor(lib: MpiLibrary, timeoutMs: number, parent = MPI_COMM_WORLD) {
    this.#lib = lib;
    this.#timeoutMs = timeoutMs;
    this.#sub = parent !== MPI_COMM_WORLD;
    const comm = new Int32Array(1);
    check("MPI_Comm_dup", lib.symbols.MPI_Comm_dup(parent, comm));
    this.#comm = comm[0];
    check("MPI_Comm_dup", lib.symbols.MPI_Comm_dup(parent, comm));
    this.#syncComm = comm[0];
    const p2p = [0, 1].map(() => {
      check("MPI_Comm_dup", lib.symbols.MPI_Comm_dup(parent, comm));
      return comm[0];
    });
    this.#p2pComms = [p2p[0], p2p[1]];
    for (const c of [this.#comm, this.#syncComm, ...p2p]) {
      check("MPI_Comm_set_errhandler", lib.symbols.MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    }
    const value = new Int32Array(1);
    check("MPI_Comm_rank", lib.symbols.MPI_Comm_rank(this.#comm, value));
    this.rank = value[0];
    if (parent === MPI_COMM_WORLD) worldRank = this.rank;
    check("MPI_Comm_size", lib.symbols.MPI_Comm_size(this.#comm, value));
    this.worldSize = value[0];
    this.#areas = new ReduceAreas((length) => ReduceArea.create(this.worldSize, length));
    this.#nodeComm = this.#sharedMachine();
    check(
      "MPI_Irecv",
      lib.symbols.MPI_Irecv(
        this.#failureBuffer,
        FAILURE_BYTES,
        MPI_BYTE,
        MPI_ANY_SOURCE,
        TAG_FAILURE,
        this.#comm,
        this.#failureRequest,
      ),
    );
  }

  /**
   * A communicator over this group's ranks when all share this machine,
   * else null (`MPI_Comm_split_type`, a collective every rank reaches in
   * its constructor). `MULTIGRAD_MPI_SHARED_MEMORY`: `0` keeps sums in
   * messages, `1` requires shared memory (an error where the ranks do not
   * share a machine); set it for every rank alike.
   */
  #sharedMachine(): number | null {
    const wanted = envVar("MULTIGRAD_MPI_SHARED_MEMORY");
    if (this.worldSize < 2 || this.worldSize > DIRECT_RANKS || wanted === "0") return null;
    const lib = this.#lib;
    const node = new Int32Array(1);
    check(
      "MPI_Comm_split_type",
      lib.symbols.MPI_Comm_split_type(this.#comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node),
    );
    const size = new Int32Array(1);
    check("MPI_Comm_size", lib.symbols.MPI_Comm_size(node[0], size));
    if (size[0] === this.worldSize) return node[0];
    lib.symbols.MPI_Comm_free(node);
    if (wanted === "1") {
      throw new Error(
        `mpi: MULTIGRAD_MPI_SHARED_MEMORY=1, but only ${
          size[0]
        } of the group's ${this.worldSize} ranks share rank ${this.rank}'s machine`,
      );
    }
    return null;
  }

  /** Sends `text` (why this rank fails) to every other rank. */
  announceFailure(text: string): void {
    if (this.#closed) return;
    const payload = new Uint8Array(FAILURE_BYTES);
    const view = new DataView(payload.buffer);
    const { written } = new TextEncoder().encodeInto(text, payload.subarray(8));
    view.setInt32(0, worldRank, true);
    view.setInt32(4, written, true);
    for (let q = 0; q < this.worldSize; q++) {
      if (q === this.rank) continue;
      this.#lib.symbols.MPI_Send(payload, 8 + written, MPI_BYTE, q, TAG_FAILURE, this.#comm);
    }
  }

  /** Withdraws the failure channel and frees the communicator (no communication). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    live.delete(this);
    if (this.#failureRequest[0] !== MPI_REQUEST_NULL && !this.#failureHeld) {
      this.#lib.symbols.MPI_Cancel(this.#failureRequest);
      this.#lib.symbols.MPI_Wait(this.#failureRequest, Deno.UnsafePointer.create(1n));
    }
    this.#lib.symbols.MPI_Comm_free(new Int32Array([this.#comm]));
    this.#lib.symbols.MPI_Comm_free(new Int32Array([this.#syncComm]));
    for (const c of this.#p2pComms) this.#lib.symbols.MPI_Comm_free(new Int32Array([c]));
    // The shared windows stay until MPI_Finalize: freeing one is a
    // collective, and a rank may leave while another has failed.
    if (this.#nodeComm !== null) this.#lib.symbols.MPI_Comm_free(new Int32Array([this.#nodeComm]));
  }

  #failureFromPeer(call: CollectiveCall): DistributedError {
    const view = new DataView(this.#failureBuffer.buffer);
    const rank = view.getInt32(0, true);
    const length = view.getInt32(4, true);
    const text = new TextDecoder().decode(this.#failureBuffer.subarray(8, 8 + length));
    return new DistributedError(
      `${describeHeader(call.header)} on rank ${this.rank}: rank ${rank}${
        this.#sub ? " of the whole job" : ""
      } failed: ${text}`,
      [rank],
    );
  }

  /**
   * Waits (on a helper thread) until every request in `requests` is done,
   * watching the failure channel too. `onTimeout` explains which requests
   * were still pending when the deadline passed.
   */
  async #waitAll(
    call: CollectiveCall,
    requests: Int32Array,
    deadline: number,
    onTimeout: (pending: number[]) => DistributedError,
  ): Promise<void> {
    const n = requests.length;
    const all = new Int32Array(n + 1);
    all.set(requests);
    all[n] = this.#failureRequest[0];
    const outCount = new Int32Array(1);
    const indices = new Int32Array(n + 1);
    const ignore = Deno.UnsafePointer.create(1n);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      while (Array.from(all.subarray(0, n)).some((r) => r !== MPI_REQUEST_NULL)) {
        const left = deadline - performance.now();
        const timedOut = new Promise<"timeout">((resolve) => {
          timer = setTimeout(() => resolve("timeout"), Math.max(0, left));
        });
        this.#failureHeld = true;
        const done = this.#lib.symbols.MPI_Waitsome(n + 1, all, outCount, indices, ignore);
        const result = await Promise.race([done, timedOut]);
        clearTimeout(timer);
        if (result === "timeout") {
          // The wait still holds the request; the job ends (#fail).
          const pending: number[] = [];
          all.subarray(0, n).forEach((r, i) => r !== MPI_REQUEST_NULL && pending.push(i));
          throw onTimeout(pending);
        }
        this.#failureHeld = false;
        this.#failureRequest[0] = all[n];
        check("MPI_Waitsome", result);
        if (outCount[0] === MPI_UNDEFINED) break;
        for (let i = 0; i < outCount[0]; i++) {
          if (indices[i] !== n) continue;
          this.#failureSeen = true;
          throw this.#failureFromPeer(call);
        }
      }
    } catch (error) {
      this.#fail(error);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** After a failed collective, the job ends (the ranks no longer agree on where they are). */
  #fail(error: unknown): void {
    abortSoon(this.#lib, this.rank, error);
  }

  /** Sends this rank's header to every rank and checks theirs. */
  async #agree(call: CollectiveCall, deadline: number): Promise<void> {
    const n = this.worldSize;
    if (n === 1) return;
    const headers = Array.from(
      { length: n },
      (_, q) => q === this.rank ? call.header : new Int32Array(HEADER_WORDS),
    );
    const peers: number[] = [];
    for (let q = 0; q < n; q++) if (q !== this.rank) peers.push(q);
    const requests = new Int32Array(peers.length);
    const slot = new Int32Array(1);
    const post = (what: "MPI_Irecv" | "MPI_Isend", buffer: Int32Array, q: number) => {
      const code = this.#lib.symbols[what](
        buffer,
        HEADER_WORDS,
        MPI_INT,
        q,
        TAG_HEADER,
        this.#comm,
        slot,
      );
      check(what, code);
    };
    peers.forEach((q, i) => {
      post("MPI_Irecv", headers[q], q);
      requests[i] = slot[0];
    });
    for (const q of peers) {
      post("MPI_Isend", call.header, q);
      // Nobody waits for the sends (one helper-thread hop less per
      // collective): they have completed once every rank holds our header,
      // which the data exchange after this needs anyway.
      check("MPI_Request_free", this.#lib.symbols.MPI_Request_free(slot));
    }
    await this.#waitAll(
      call,
      requests,
      deadline,
      (pending) => this.#lateError(call, pending.map((i) => peers[i])),
    );
    // A mismatch leaves MPI in order (every exchange completed): no abort.
    checkHeaders(headers);
  }

  /**
   * Agrees on the call, then runs `exchange` (a blocking MPI collective on a
   * helper thread): once every rank has sent its header, all are inside the
   * same collective, and MPI's blocking algorithms progress faster than its
   * nonblocking schedules.
   */
  async #run(call: CollectiveCall, exchange: () => Promise<number>): Promise<void> {
    this.#checkOpen(call);
    const deadline = performance.now() + this.#timeoutMs;
    await this.#agree(call, deadline);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), Math.max(0, deadline - performance.now()));
    });
    const result = await Promise.race([exchange(), timedOut]);
    clearTimeout(timer);
    if (result === "timeout") {
      const error = new DistributedError(
        `${
          describeHeader(call.header)
        } on rank ${this.rank}: every rank joined, but the data exchange did not finish within ${this.#timeoutMs} ms: a rank died or hung`,
        [],
      );
      this.#fail(error);
      throw error;
    }
    check(call.kind, result);
  }

  /** Whether another rank's failure message has arrived (the failure channel, tested without waiting). */
  #peerFailed(): boolean {
    if (this.#failureSeen) return true;
    if (this.#failureHeld || this.#failureRequest[0] === MPI_REQUEST_NULL) return false;
    const flag = new Int32Array(1);
    check(
      "MPI_Test",
      this.#lib.symbols.MPI_Test(this.#failureRequest, flag, Deno.UnsafePointer.create(1n)),
    );
    this.#failureSeen = flag[0] !== 0;
    return this.#failureSeen;
  }

  /**
   * Resolves with the MPI code `done` (a wait on a helper thread) resolves
   * with, unless a rank reports its failure first or the deadline passes
   * (`late()` then names the ranks not heard of); either ends the job.
   */
  async #settle(
    call: CollectiveCall,
    done: Promise<number>,
    deadline: number,
    late: () => number[],
  ): Promise<number> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let poll: ReturnType<typeof setInterval> | undefined;
    try {
      return await new Promise<number>((resolve, reject) => {
        timer = setTimeout(() => {
          const ranks = late();
          reject(
            ranks.length > 0 ? this.#lateError(call, ranks) : new DistributedError(
              `${
                describeHeader(call.header)
              } on rank ${this.rank}: every rank joined, but the data exchange did not finish within ${this.#timeoutMs} ms: a rank died or hung`,
              ranks,
            ),
          );
        }, Math.max(0, deadline - performance.now()));
        poll = setInterval(() => {
          if (this.#peerFailed()) reject(this.#failureFromPeer(call));
        }, FAILURE_POLL_MS);
        done.then(resolve, reject);
      });
    } catch (error) {
      this.#fail(error);
      throw error;
    } finally {
      clearTimeout(timer);
      clearInterval(poll);
    }
  }

  /**
   * One meeting of the ranks (see the module's comment): sends the header
   * and then `payload` (or `payload(q)`) to every other rank q, receives each rank's header and
   * its data into `into(q)` (as long as this rank expects it to be), and
   * checks the headers once everything has arrived.
   */
  async #meet(
    call: CollectiveCall,
    payload: Uint8Array | ((q: number) => Uint8Array),
    into: (q: number) => Uint8Array,
  ): Promise<void> {
    this.#checkOpen(call);
    const deadline = performance.now() + this.#timeoutMs;
    const meeting = this.#post(this.#comm, call, payload, into);
    const { requests } = meeting;
    const spin = (until: number) => requests.testUntil(until);
    // See spinMs(): most meetings complete within the spin.
    let code = spin(performance.now() + this.#spinMs);
    if (code === null && meeting.missing().length > 0) {
      // A rank is late. MPICH's blocking wait polls a core at full speed
      // for as long as it waits, taking it from the late rank (or another
      // job) when the cores are shared: look on timers instead (every
      // millisecond at first, see latePollMs), until every rank's header is in.
      code = await this.#awaitHeaders(call, meeting, deadline, () => spin(0));
    }
    // Every rank is in: the data is moving, which takes a few progress calls.
    code ??= spin(performance.now() + this.#spinMs);
    if (code === null) {
      code = requests.settled(
        await this.#settle(call, requests.waitAll(), deadline, () => meeting.missing()),
      );
    }
    // A request failed early (a rank sent more than this one expects)
    // while others still wait for a later rank: test on until they end.
    code ??= await this.#awaitHeaders(call, meeting, deadline, () => spin(0), true);
    this.#verify(call, meeting, code!);
  }

  /**
   * Tests `meeting` (`test()`: its code when done, else null) on timers
   * ({@link latePollMs}) until it is done (its code) or every rank's
   * header has arrived (null; with `untilDone`, only when done), failing
   * on another rank's failure or at `deadline`.
   */
  async #awaitHeaders(
    call: CollectiveCall,
    meeting: Meeting,
    deadline: number,
    test: () => number | null,
    untilDone = false,
  ): Promise<number | null> {
    const began = deadline - this.#timeoutMs;
    try {
      for (;;) {
        const pause = latePollMs(performance.now() - began);
        await new Promise((resolve) => setTimeout(resolve, pause));
        const code = test();
        if (code !== null) return code;
        const missing = meeting.missing();
        if (missing.length === 0 && !untilDone) return null;
        if (this.#peerFailed()) throw this.#failureFromPeer(call);
        if (performance.now() <= deadline) continue;
        if (missing.length > 0) throw this.#lateError(call, missing);
        throw new DistributedError(
          `${
            describeHeader(call.header)
          } on rank ${this.rank}: every rank joined, but the data exchange did not finish within ${this.#timeoutMs} ms: a rank died or hung`,
          [],
        );
      }
    } catch (error) {
      this.#fail(error);
      throw error;
    }
  }

  /** Posts a meeting's receives and sends on `comm` (see {@link #meet}). */
  #post(
    comm: number,
    call: CollectiveCall,
    payload: Uint8Array | ((q: number) => Uint8Array),
    into: (q: number) => Uint8Array,
  ): Meeting {
    const peers: number[] = [];
    for (let q = 0; q < this.worldSize; q++) if (q !== this.rank) peers.push(q);
    // A header's first word is the collective's kind (>= 1): 0 = not arrived.
    const headers = Array.from(
      { length: this.worldSize },
      (_, q) => q === this.rank ? call.header : new Int32Array(HEADER_WORDS),
    );
    const requests = new Int32Array(4 * peers.length);
    const slot = new Int32Array(1);
    let posted = 0;
    const post = (what: "MPI_Irecv" | "MPI_Isend", buffer: ArrayBufferView, q: number) => {
      const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
      check(what, this.#lib.symbols[what](bytes, bytes.length, MPI_BYTE, q, TAG_CALL, comm, slot));
      requests[posted++] = slot[0];
    };
    for (const q of peers) {
      post("MPI_Irecv", headers[q], q);
      post("MPI_Irecv", into(q), q);
    }
    for (const q of peers) {
      post("MPI_Isend", call.header, q);
      post("MPI_Isend", typeof payload === "function" ? payload(q) : payload, q);
    }
    return {
      peers,
      headers,
      requests: new RequestSet(this.#lib, requests),
      missing: () => peers.filter((q) => headers[q][0] === 0),
    };
  }

  /** After a meeting's wait returned `code`: the headers must agree and every receive have succeeded. */
  #verify(call: CollectiveCall, meeting: Meeting, code: number): void {
    if (code !== MPI_ERR_IN_STATUS) check("MPI_Waitall", code);
    // Every message arrived (also those of a rank that called something
    // else), so every rank sees every header: a mismatch fails everywhere.
    checkHeaders(meeting.headers);
    if (code === MPI_ERR_IN_STATUS) {
      const { peers } = meeting;
      const { statuses } = meeting.requests;
      // The data receive from peers[i] is request 2i + 1.
      const errors = peers.map((_, i) => statuses[(2 * i + 1) * STATUS_WORDS + STATUS_ERROR]);
      const failed = peers.filter((_, i) => errors[i] !== 0);
      throw new DistributedError(
        `${describeHeader(call.header)} on rank ${this.rank}: the data of ${
          failed.length === 1 ? "rank" : "ranks"
        } ${failed.join(", ")} could not be received (${
          errors.includes(MPI_ERR_TRUNCATE)
            ? "longer than the header says"
            : `MPI errors ${errors.join(", ")}`
        })`,
        failed,
      );
    }
  }

  /**
   * A meeting on a communicator of its own (so it may overtake collectives
   * still in flight), waited for on this thread: `MPI_Testall`, then a
   * short blocking sleep, until done, a rank's failure, or the deadline.
   */
  allGatherSync(call: CollectiveCall, data: Int32Array): Int32Array[] {
    this.#checkOpen(call);
    if (data.length > SYNC_WORDS) {
      throw new RangeError(
        `${describeHeader(call.header)}: at most ${SYNC_WORDS} words, got ${data.length}`,
      );
    }
    const parts = Array.from(
      { length: this.worldSize },
      (_, q) => q === this.rank ? data.slice() : new Int32Array(data.length),
    );
    if (this.worldSize === 1) return parts;
    const deadline = performance.now() + this.#timeoutMs;
    const meeting = this.#post(this.#syncComm, call, bytesOf(data), (q) => bytesOf(parts[q]));
    let code: number | null;
    try {
      for (;;) {
        code = meeting.requests.test();
        if (code !== null) break;
        if (this.#peerFailed()) throw this.#failureFromPeer(call);
        if (performance.now() > deadline) throw this.#lateError(call, meeting.missing());
        sleepSync(SYNC_POLL_MS);
      }
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    this.#verify(call, meeting, code);
    return parts;
  }

  /** The error of a collective whose `late` ranks did not arrive in time. */
  #lateError(call: CollectiveCall, late: readonly number[]): DistributedError {
    return new DistributedError(
      `${describeHeader(call.header)} on rank ${this.rank}: ${
        late.length === 1 ? "rank" : "ranks"
      } ${
        late.join(", ")
      } did not join within ${this.#timeoutMs} ms: a rank hung, died, or skipped this collective`,
      late,
    );
  }

  #checkOpen(call: CollectiveCall): void {
    if (this.#closed) {
      throw new DistributedError(
        `${describeHeader(call.header)}: this rank (${this.rank}) already left the process group`,
        [this.rank],
      );
    }
  }

  /** Every rank's `data` in rank order (this rank's is `data` itself); `fresh`: new arrays, else reused ones. */
  async #gather(call: CollectiveCall, data: TypedArray, fresh: boolean): Promise<TypedArray[]> {
    const parts = Array.from(
      { length: this.worldSize },
      (_, q) =>
        q === this.rank ? data : fresh ? makeLike(data) : this.#scratchFor(data, data.length, q),
    );
    await this.#meet(call, bytesOf(data), (q) => bytesOf(parts[q]));
    return parts;
  }

  /** A reused receive array for rank `q`, of `like`'s type and `length` elements. */
  #scratchFor(like: TypedArray, length: number, q: number): TypedArray {
    const key = `${like.constructor.name}:${length}:${q}`;
    let array = this.#scratch.get(key);
    if (!array) {
      // Sizes change rarely (a DDP step moves the same buckets every time).
      if (this.#scratch.size >= 4 * this.worldSize) this.#scratch.clear();
      array = makeLike(like, length);
      this.#scratch.set(key, array);
    }
    return array;
  }

  async allReduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const op = call.op ?? "sum";
    if (this.worldSize <= DIRECT_RANKS) {
      if (this.worldSize === 1) return;
      if (data instanceof Float32Array && this.#sumsFloats(call, data.length)) {
        return this.allReduceVia(call, data.length, (own) => {
          own.set(data);
          return Promise.resolve();
        }, (sum) => data.set(sum));
      }
      const parts = await this.#gather(call, data, false);
      const inPlace = this.worldSize === 2 && data instanceof Float32Array &&
        (op === "sum" || op === "avg");
      // reduceInto writes rank 0's values into `data` first: a later rank
      // keeps its own (except in the two-rank float pass, elementwise in place).
      if (this.rank !== 0 && !inPlace) parts[this.rank] = data.slice();
      reduceInto(data, parts, 0, data.length, op);
      return;
    }
    if (op !== "sum" && op !== "avg") {
      // MPI_MAX and MPI_MIN let NaN win or lose by operand order, so ranks
      // could disagree (and MPI_PROD rounds in its own order): gather and
      // combine in rank order instead, as every op but the sum does.
      const parts = await this.allGather(call, data);
      reduceInto(data, parts, 0, data.length, op);
      return;
    }
    await this.#run(call, () =>
      this.#lib.symbols.MPI_Allreduce(
        Deno.UnsafePointer.create(MPI_IN_PLACE),
        data,
        data.length,
        datatype(call),
        MPI_SUM,
        this.#comm,
      ));
    if (op === "avg") {
      const n = this.worldSize;
      for (let i = 0; i < data.length; i++) data[i] /= n;
    }
  }

  /**
   * Float32 sum or average of a few ranks: `fill` writes straight into this
   * rank's part of the WebAssembly area, and `take` reads the SIMD sum
   * there. Otherwise through a host array.
   */
  allReduceVia(
    call: CollectiveCall,
    numel: number,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    if (this.#sumsFloats(call, numel)) {
      if (this.#nodeComm !== null) return this.#reduceInNode(call, numel, fill, take);
      const area = this.#areas.take(numel);
      if (area) return this.#reduceInArea(call, area, fill, take);
    }
    return allReduceViaHost(this, call, numel, fill, take);
  }

  /** Whether `call` is a float32 sum or average of a few ranks (which meet in shared or WebAssembly memory). */
  #sumsFloats(call: CollectiveCall, numel: number): boolean {
    const op = call.op ?? "sum";
    return this.worldSize > 1 && this.worldSize <= DIRECT_RANKS && call.dtype === "float32" &&
      (op === "sum" || op === "avg") && numel > 0 &&
      (this.#nodeComm !== null || this.#areas.available);
  }

  /**
   * A float32 sum or average of ranks on one machine in a shared window
   * ({@link NodeSum}): fill this rank's part, meet, sum this rank's chunk
   * of every part, meet, take the result. The meetings carry only headers,
   * so they also check that every rank called the same collective.
   */
  async #reduceInNode(
    call: CollectiveCall,
    numel: number,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    const meet = () => this.#meet(call, NOTHING, () => NOTHING);
    let sums = this.#nodeSums.get(numel);
    if (!sums) {
      // Making (and freeing) a window is a collective: first make sure
      // every rank is in this call with this length.
      await meet();
      const deadline = performance.now() + this.#timeoutMs;
      const settle = (done: Promise<number>) => this.#settle(call, done, deadline, () => []);
      if (this.#nodeSums.size >= NODE_WINDOWS) {
        const [[oldest, window]] = this.#nodeSums;
        this.#nodeSums.delete(oldest);
        await window.free(settle);
      }
      sums = await NodeSum.allocate(
        this.#lib,
        this.#nodeComm!,
        this.rank,
        this.worldSize,
        numel,
        settle,
      );
      this.#nodeSums.set(numel, sums);
    }
    const parity = sums.begin();
    await fill(sums.own(parity), 0);
    sums.sync();
    await meet();
    sums.sync();
    sums.sumChunk(parity, call.op ?? "sum");
    sums.sync();
    await meet();
    sums.sync();
    take(sums.result(parity), 0);
  }

  /** The ranks' values meet in `area` (`fill` writes this rank's part) and are summed with SIMD. */
  async #reduceInArea(
    call: CollectiveCall,
    area: ReduceArea,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    const own = area.part(this.rank);
    await fill(own, 0);
    await this.#meet(call, bytesOf(own), (q) => bytesOf(area.part(q)));
    take(area.reduce(call.op ?? "sum"), 0);
    this.#areas.giveBack(area);
  }

  async broadcast(call: CollectiveCall, data: TypedArray): Promise<void> {
    const src = call.src ?? 0;
    if (this.worldSize <= DIRECT_RANKS) {
      if (this.worldSize === 1) return;
      const bytes = bytesOf(data);
      await this.#meet(
        call,
        this.rank === src ? bytes : NOTHING,
        (q) => q === src ? bytes : NOTHING,
      );
      return;
    }
    await this.#run(
      call,
      () => this.#lib.symbols.MPI_Bcast(data, data.length, datatype(call), src, this.#comm),
    );
  }

  /** One array of every rank's data ({@link allGatherInto}), returned as its parts. */
  async allGather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[]> {
    const m = data.length;
    const all = makeLike(data, m * this.worldSize);
    await this.allGatherInto(call, data, all);
    return Array.from({ length: this.worldSize }, (_, q) => all.subarray(q * m, (q + 1) * m));
  }

  /**
   * A few ranks: one meeting in which every rank's data lands straight in
   * its part of `out`; more: `MPI_Allgather` into `out`.
   */
  async allGatherInto(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const m = data.length;
    const own = out.subarray(this.rank * m, (this.rank + 1) * m);
    const aliased = own.buffer === data.buffer && own.byteOffset === data.byteOffset;
    if (this.worldSize <= DIRECT_RANKS) {
      if (this.worldSize > 1) {
        await this.#meet(call, bytesOf(data), (q) => bytesOf(out.subarray(q * m, (q + 1) * m)));
      }
      if (!aliased) own.set(data);
      return;
    }
    // MPI forbids a send buffer inside the receive buffer (MPI_IN_PLACE
    // would do, but this binding's send buffer is a plain buffer).
    const send = aliased ? data.slice() : data;
    await this.#run(
      call,
      () =>
        this.#lib.symbols.MPI_Allgather(
          send,
          m,
          datatype(call),
          out,
          m,
          datatype(call),
          this.#comm,
        ),
    );
  }

  /** {@link reduceScatterInto} a new array. */
  async reduceScatter(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const out = makeLike(data, data.length / this.worldSize);
    await this.reduceScatterInto(call, data, out);
    return out;
  }

  async reduceScatterInto(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const op = call.op ?? "sum";
    const n = this.worldSize;
    const part = data.length / n;
    const own = data.subarray(this.rank * part, (this.rank + 1) * part);
    if (n <= DIRECT_RANKS || (op !== "sum" && op !== "avg")) {
      // Direct: each rank sends every other rank q only part q. Many ranks
      // with max or min gather everything (MPI's MAX and MIN are not
      // NaN-stable across operand orders).
      const parts = n <= DIRECT_RANKS
        ? await this.#scatterParts(call, data, part)
        : (await this.allGather(call, data)).map((all) =>
          all.subarray(this.rank * part, (this.rank + 1) * part)
        );
      parts[this.rank] = own;
      reduceInto(out, parts, 0, part, op);
      return;
    }
    await this.#run(call, () =>
      this.#lib.symbols.MPI_Reduce_scatter_block(
        data,
        out,
        part,
        datatype(call),
        MPI_SUM,
        this.#comm,
      ));
    if (op === "avg") { for (let i = 0; i < part; i++) out[i] /= n; }
  }

  /** One meeting in which rank q receives part q of every rank's `data`; returns the parts this rank got, by sender. */
  async #scatterParts(call: CollectiveCall, data: TypedArray, part: number): Promise<TypedArray[]> {
    const parts = Array.from(
      { length: this.worldSize },
      (_, q) => q === this.rank ? data : this.#scratchFor(data, part, q),
    );
    await this.#meet(
      call,
      (q) => bytesOf(data.subarray(q * part, (q + 1) * part)),
      (q) => bytesOf(parts[q]),
    );
    return parts;
  }

  /** Parts `[q * part, (q + 1) * part)` of `data`, as bytes. */
  static #part(data: TypedArray, q: number, part: number): Uint8Array {
    return bytesOf(data.subarray(q * part, (q + 1) * part));
  }

  async allToAll(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const n = this.worldSize;
    const part = data.length / n;
    const out = makeLike(data);
    if (n <= DIRECT_RANKS) {
      if (n > 1) {
        await this.#meet(
          call,
          (q) => MpiBackend.#part(data, q, part),
          (q) => MpiBackend.#part(out, q, part),
        );
      }
      out.set(data.subarray(this.rank * part, (this.rank + 1) * part), this.rank * part);
      return out;
    }
    const type = datatype(call);
    await this.#run(
      call,
      () => this.#lib.symbols.MPI_Alltoall(data, part, type, out, part, type, this.#comm),
    );
    return out;
  }

  async gather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[] | null> {
    const n = this.worldSize;
    const dst = call.dst ?? 0;
    const mine = this.rank === dst;
    if (n <= DIRECT_RANKS) {
      const parts = Array.from(
        { length: n },
        (_, q) => q === this.rank ? data.slice() : makeLike(data, mine ? data.length : 0),
      );
      if (n > 1) {
        await this.#meet(
          call,
          (q) => q === dst ? bytesOf(data) : NOTHING,
          (q) => mine ? bytesOf(parts[q]) : NOTHING,
        );
      }
      return mine ? parts : null;
    }
    const all = makeLike(data, mine ? data.length * n : 0);
    const type = datatype(call);
    await this.#run(
      call,
      () =>
        this.#lib.symbols.MPI_Gather(
          data,
          data.length,
          type,
          all,
          data.length,
          type,
          dst,
          this.#comm,
        ),
    );
    if (!mine) return null;
    return Array.from({ length: n }, (_, q) => all.slice(q * data.length, (q + 1) * data.length));
  }

  async scatter(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const n = this.worldSize;
    const src = call.src ?? 0;
    const part = out.length;
    const mine = this.rank === src;
    if (mine) out.set(data.subarray(src * part, (src + 1) * part));
    if (n <= DIRECT_RANKS) {
      if (n > 1) {
        await this.#meet(
          call,
          (q) => mine ? MpiBackend.#part(data, q, part) : NOTHING,
          (q) => q === src ? bytesOf(out) : NOTHING,
        );
      }
      return;
    }
    const type = datatype(call);
    await this.#run(
      call,
      () => this.#lib.symbols.MPI_Scatter(data, part, type, out, part, type, src, this.#comm),
    );
  }

  async reduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const op = call.op ?? "sum";
    const dst = call.dst ?? 0;
    if (this.worldSize <= DIRECT_RANKS || (op !== "sum" && op !== "avg")) {
      // In rank order on dst (MPI's MAX and MIN are not NaN-stable, see allReduce).
      const parts = await this.gather(call, data);
      if (parts) reduceInto(data, parts, 0, data.length, op);
      return;
    }
    const mine = this.rank === dst;
    const send = mine ? data.slice() : data;
    const type = datatype(call);
    await this.#run(
      call,
      () =>
        this.#lib.symbols.MPI_Reduce(
          send,
          mine ? data : NOTHING,
          data.length,
          type,
          MPI_SUM,
          dst,
          this.#comm,
        ),
    );
    if (mine && op === "avg") {
      const n = this.worldSize;
      for (let i = 0; i < data.length; i++) data[i] /= n;
    }
  }

  /**
   * Posts `views` (receives or sends, each on its communicator, from or to
   * `peer` with `call.tag`) and waits for all of them on timers, watching
   * the failure channel and the deadline (`peer` is then named).
   * `peerArrived`, where the caller can tell, says whether the peer has
   * started its side: until then the timers back off as a late rank's do
   * ({@link latePollMs}; a receive idling at 1 ms ticks of 0.25 ms spins
   * took 15% of a core), after it they tick every millisecond again to
   * move the data along.
   */
  async #exchangeWith(
    call: CollectiveCall,
    peer: number,
    posts: readonly (readonly ["MPI_Isend" | "MPI_Irecv", ArrayBufferView, number])[],
    peerArrived?: () => boolean,
  ): Promise<number> {
    this.#checkOpen(call);
    const deadline = performance.now() + this.#timeoutMs;
    const requests = new Int32Array(posts.length);
    const slot = new Int32Array(1);
    posts.forEach(([what, view, comm], i) => {
      const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      check(
        what,
        this.#lib.symbols[what](bytes, bytes.length, MPI_BYTE, peer, call.tag ?? 0, comm, slot),
      );
      requests[i] = slot[0];
    });
    const set = new RequestSet(this.#lib, requests);
    const spin = (until: number) => set.testUntil(until);
    // No blocking wait on a helper thread: MPICH's polls a core for as long
    // as the peer takes, and a receive may wait long (a pipeline's stage).
    // Short spins on timers instead (they also move a large message along,
    // which needs progress calls on both ranks).
    // One test at once: several point-to-point calls may be waiting on this
    // thread together, so none spins long enough to hold up the others.
    let code = spin(0);
    const began = performance.now();
    try {
      while (code === null) {
        const waiting = peerArrived !== undefined && !peerArrived();
        const pause = waiting ? latePollMs(performance.now() - began) : LATE_POLL_MS;
        await new Promise((resolve) => setTimeout(resolve, pause));
        code = spin(waiting ? 0 : performance.now() + P2P_TICK_SPIN_MS);
        if (code !== null) break;
        if (this.#peerFailed()) throw this.#failureFromPeer(call);
        if (performance.now() > deadline) throw this.#lateError(call, [peer]);
      }
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    return code;
  }

  /**
   * Sends the header and the data to `call.dst`, and waits for the
   * receiver's acknowledgement: 0, or 1 and the receiver's header.
   */
  async send(call: CollectiveCall, data: TypedArray): Promise<void> {
    const [messages, acks] = this.#p2pComms;
    const dst = call.dst!;
    const ack = new Int32Array(1 + HEADER_WORDS);
    const code = await this.#exchangeWith(call, dst, [
      ["MPI_Isend", call.header, messages],
      ["MPI_Isend", data, messages],
      ["MPI_Irecv", ack, acks],
    ]);
    check("MPI_Waitall", code);
    if (ack[0] === 0) return;
    checkPair(call.header, ack.subarray(1), this.rank, dst);
    throw new DistributedError(
      `${
        describeHeader(call.header)
      } on rank ${this.rank}: rank ${dst} could not receive it (MPI error)`,
      [dst],
    );
  }

  /** Receives the header and the data from `call.src`, checks them, and acknowledges. */
  async recv(call: CollectiveCall, data: TypedArray): Promise<void> {
    const [messages, acks] = this.#p2pComms;
    const src = call.src!;
    const header = new Int32Array(HEADER_WORDS);
    // A header's first word is its kind (>= 1) once it has arrived.
    const code = await this.#exchangeWith(call, src, [
      ["MPI_Irecv", header, messages],
      ["MPI_Irecv", data, messages],
    ], () => header[0] !== 0);
    if (code !== MPI_ERR_IN_STATUS) check("MPI_Waitall", code);
    let failure: unknown = null;
    try {
      checkPair(header, call.header, src, this.rank);
      if (code !== 0) {
        throw new DistributedError(
          `${
            describeHeader(call.header)
          } on rank ${this.rank}: the data of rank ${src} could not be received (MPI error)`,
          [src],
        );
      }
    } catch (error) {
      failure = error;
    }
    const ack = new Int32Array(1 + HEADER_WORDS);
    ack[0] = failure ? 1 : 0;
    ack.set(call.header, 1);
    check("MPI_Waitall", await this.#exchangeWith(call, src, [["MPI_Isend", ack, acks]]));
    if (failure) throw failure;
  }

  async barrier(call: CollectiveCall): Promise<void> {
    if (this.worldSize <= DIRECT_RANKS) {
      if (this.worldSize > 1) await this.#meet(call, NOTHING, () => NOTHING);
      return;
    }
    // The header exchange is itself a barrier.
    const deadline = performance.now() + this.#timeoutMs;
    await this.#agree(call, deadline);
  }

  /**
   * `MPI_Comm_split` of this group's communicator (collective over all its
   * ranks, on a helper thread), then a group over the members' part.
   */
  async newGroup(ranks: readonly number[], _index: number): Promise<ProcessGroupBackend | null> {
    const position = ranks.indexOf(this.rank);
    const split = new Int32Array(1);
    check(
      "MPI_Comm_split",
      await this.#lib.symbols.MPI_Comm_split(
        this.#comm,
        position < 0 ? MPI_UNDEFINED : 0,
        position,
        split,
      ),
    );
    if (position < 0) return null;
    const backend = new MpiBackend(this.#lib, this.#timeoutMs, split[0]);
    // The group keeps its own duplicates.
    this.#lib.symbols.MPI_Comm_free(split);
    live.add(backend);
    return backend;
  }

  destroy(): void {
    this.close();
  }
}

/**
 * Waits until every rank of the job has reached `initProcessGroup`, on
 * timers as for a late rank (`MPI_Ibarrier`): the group's communicators are
 * then made by blocking collectives, which a rank that never comes (hung or
 * dead before it) would hold forever. Past `timeoutMs` it is an error, and
 * the job ends.
 */
async function meetAtInit(lib: MpiLibrary, timeoutMs: number): Promise<void> {
  const request = new Int32Array(1);
  check("MPI_Ibarrier", lib.symbols.MPI_Ibarrier(MPI_COMM_WORLD, request));
  const flag = new Int32Array(1);
  const ignore = Deno.UnsafePointer.create(1n);
  const arrived = () => {
    check("MPI_Test", lib.symbols.MPI_Test(request, flag, ignore));
    return flag[0] !== 0;
  };
  const began = performance.now();
  const spinUntil = began + spinMs();
  while (!arrived()) {
    const waited = performance.now() - began;
    if (waited > timeoutMs) {
      const rank = new Int32Array(1);
      lib.symbols.MPI_Comm_rank(MPI_COMM_WORLD, rank);
      const error = new DistributedError(
        `initProcessGroup (mpi) on rank ${
          rank[0]
        }: not every rank of the job reached initProcessGroup within ${timeoutMs} ms (a rank hung, died or does not call it); the job ends`,
        [],
      );
      abortSoon(lib, rank[0], error);
      throw error;
    }
    if (performance.now() < spinUntil) continue;
    await new Promise((resolve) => setTimeout(resolve, latePollMs(waited)));
  }
}

/** Ends the job with `MPI_Abort` shortly after `error` (once per process; see `ABORT_AFTER_MS`). */
function abortSoon(lib: MpiLibrary, rank: number, error: unknown): void {
  if (aborting) return;
  aborting = true;
  const timer = setTimeout(() => {
    console.error(
      `multigrad mpi rank ${rank}: ending the job (MPI_Abort) after a failed collective: ${
        (error as Error).message ?? String(error)
      }`,
    );
    lib.symbols.MPI_Abort(MPI_COMM_WORLD, 1);
  }, ABORT_AFTER_MS);
  // The abort must not keep a process alive that is exiting anyway.
  Deno.unrefTimer(Number(timer));
}

/** @internal The "mpi" factory: starts MPI (once per process) and joins a duplicate of MPI_COMM_WORLD. */
export async function mpiBackend(init: ProcessGroupInit): Promise<ProcessGroupBackend> {
  const lib = loadLibrary();
  await startMpi(lib, init.timeoutMs);
  await meetAtInit(lib, init.timeoutMs);
  const backend = new MpiBackend(lib, init.timeoutMs);
  const tasks = Number(envVar("SLURM_NTASKS") ?? "0");
  if (backend.worldSize === 1 && tasks > 1) {
    backend.close();
    throw new Error(
      `mpi: Slurm started ${tasks} tasks but MPI sees a world of 1: launch with \`srun --mpi=pmi2\` (or mpiexec inside the allocation) so MPI finds its peers`,
    );
  }
  live.add(backend);
  return backend;
}
