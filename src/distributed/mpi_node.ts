/**
 * Float32 sums and averages of MPI ranks that share one machine, in memory
 * every rank maps (an MPI-3 shared window) instead of messages: each rank
 * writes its array into its own part, sums one chunk of every part in rank
 * order (the platform BLAS's saxpy, else `MPI_Reduce_local`), and reads the
 * whole result. A message between two processes is copied through a shared
 * buffer on both sides (2.68 MB each way took 0.6 ms of a DDP step here,
 * more than the sum); this path moves each byte once and sums 1/N of the
 * elements per rank. Internal to
 * the `"mpi"` process group, which keeps the meetings (agreement on the
 * call, late and failed ranks) and calls this between them.
 * @module
 */

import { type BlasVector, loadBlas } from "../backends/cpu/blas.ts";
import { chunkSizes } from "../shape.ts";
import type { ReduceOp } from "./backend.ts";
import {
  check,
  MPI_FLOAT,
  MPI_INFO_NULL,
  MPI_MODE_NOCHECK,
  MPI_PROD,
  MPI_SUM,
  type MpiLibrary,
} from "./mpi_abi.ts";

const FLOAT_BYTES = 4;
/** Parts per rank: alternate calls fill alternate parts (see {@link NodeSum.begin}). */
const PARITIES = 2;

/**
 * One shared window of `length` float32 elements per rank and parity.
 * Calls alternate between the two parities, so a rank that has read the
 * result of one call and fills the next cannot overwrite what a slower rank
 * is still reading: the call after next, which reuses the parts, starts
 * only after a meeting every rank joins once it has read.
 */
export class NodeSum {
  readonly #lib: MpiLibrary;
  readonly #window: Int32Array;
  readonly #rank: number;
  readonly #ranks: number;
  /** `#parts[parity][q]`: rank q's part, and its address. */
  readonly #parts: Float32Array[][];
  readonly #addresses: Deno.PointerValue[][];
  /** This rank's chunk of every part: [first element, count]. */
  readonly #chunk: readonly [number, number];
  /** Whether an average may multiply by 1 / ranks (a power of two: x * (1/N) is x / N exactly). */
  readonly #byReciprocal: boolean;
  /** 1 / ranks for an average by `MPI_PROD`, made when first needed (no BLAS). */
  #reciprocal: Float32Array | null = null;
  /**
   * The platform BLAS's vector operations, or null (then `MPI_Reduce_local`,
   * whose loops here ran 2.7x (sum) and 8x (product by an array) slower
   * than saxpy and sscal on a 1.3 MB chunk, 0.3 ms of a 7 ms DDP step).
   */
  readonly #vector: BlasVector | null;
  #calls = 0;

  private constructor(
    lib: MpiLibrary,
    window: Int32Array,
    rank: number,
    ranks: number,
    length: number,
    parts: Float32Array[][],
    addresses: Deno.PointerValue[][],
  ) {
    this.#lib = lib;
    this.#window = window;
    this.#rank = rank;
    this.#ranks = ranks;
    this.#parts = parts;
    this.#addresses = addresses;
    // torch.chunk's sizes, which may be fewer than the ranks: the rest sum nothing.
    const sizes = chunkSizes(length, ranks);
    while (sizes.length < ranks) sizes.push(0);
    const first = sizes.slice(0, rank).reduce((a, b) => a + b, 0);
    this.#chunk = [first, sizes[rank]];
    this.#byReciprocal = (ranks & (ranks - 1)) === 0;
    this.#vector = blasVector();
  }

  /**
   * Makes the window over `nodeComm` (every rank of it calls this, with the
   * same `length`: a collective allocation, on a helper thread; `settle`
   * watches it for failed ranks and the deadline).
   */
  static async allocate(
    lib: MpiLibrary,
    nodeComm: number,
    rank: number,
    ranks: number,
    length: number,
    settle: (done: Promise<number>) => Promise<number>,
  ): Promise<NodeSum> {
    const partBytes = length * FLOAT_BYTES;
    const base = new BigUint64Array(1);
    const window = new Int32Array(1);
    check(
      "MPI_Win_allocate_shared",
      await settle(
        lib.symbols.MPI_Win_allocate_shared(
          BigInt(PARITIES * partBytes),
          FLOAT_BYTES,
          MPI_INFO_NULL,
          nodeComm,
          base,
          window,
        ),
      ),
    );
    const parts: Float32Array[][] = Array.from({ length: PARITIES }, () => []);
    const addresses: Deno.PointerValue[][] = Array.from({ length: PARITIES }, () => []);
    const size = new BigInt64Array(1);
    const unit = new Int32Array(1);
    for (let q = 0; q < ranks; q++) {
      check(
        "MPI_Win_shared_query",
        lib.symbols.MPI_Win_shared_query(window[0], q, size, unit, base),
      );
      const start = Deno.UnsafePointer.create(base[0]);
      if (!start || size[0] < BigInt(PARITIES * partBytes)) {
        throw new Error(
          `mpi: the shared window of rank ${q} has ${size[0]} bytes at ${base[0]}; ${
            PARITIES * partBytes
          } expected`,
        );
      }
      const bytes = Deno.UnsafePointerView.getArrayBuffer(start, PARITIES * partBytes);
      for (let parity = 0; parity < PARITIES; parity++) {
        parts[parity].push(new Float32Array(bytes, parity * partBytes, length));
        addresses[parity].push(Deno.UnsafePointer.offset(start, parity * partBytes));
      }
    }
    // A passive epoch for the whole life of the window: MPI_Win_sync then
    // orders this rank's loads and stores against the other ranks'.
    check("MPI_Win_lock_all", lib.symbols.MPI_Win_lock_all(MPI_MODE_NOCHECK, window[0]));
    return new NodeSum(lib, window, rank, ranks, length, parts, addresses);
  }

  /** Starts a call: the parity of its parts. */
  begin(): number {
    return this.#calls++ % PARITIES;
  }

  /** This rank's part of `parity`, for its values. */
  own(parity: number): Float32Array {
    return this.#parts[parity][this.#rank];
  }

  /** Makes this rank's stores visible to the others and theirs to it (around each meeting). */
  sync(): void {
    check("MPI_Win_sync", this.#lib.symbols.MPI_Win_sync(this.#window[0]));
  }

  /**
   * Once every rank has filled its part of `parity`: combines this rank's
   * chunk of all parts in rank order, ((p0 + p1) + p2) + ..., each step
   * rounded to float32, into the last rank's part (each running sum goes
   * into the next rank's chunk, which nobody else reads now), divided by
   * the ranks for `"avg"`: the same bits as {@link reduceInto}.
   */
  sumChunk(parity: number, op: ReduceOp): void {
    if (op !== "sum" && op !== "avg") {
      throw new RangeError(`mpi: a shared-memory sum cannot combine with "${op}"`);
    }
    const [first, count] = this.#chunk;
    if (count === 0) return;
    const vector = this.#vector;
    const chunk = (q: number) => this.#parts[parity][q].subarray(first, first + count);
    const at = (q: number) =>
      Deno.UnsafePointer.offset(this.#addresses[parity][q]!, first * FLOAT_BYTES);
    const reduce = (what: number, from: Deno.PointerValue, into: Deno.PointerValue) =>
      check(
        "MPI_Reduce_local",
        this.#lib.symbols.MPI_Reduce_local(from, into, count, MPI_FLOAT, what),
      );
    // p_q + running is running + p_q to the bit: float addition commutes.
    for (let q = 1; q < this.#ranks; q++) {
      if (vector) vector.addInto(chunk(q - 1), chunk(q));
      else reduce(MPI_SUM, at(q - 1), at(q));
    }
    if (op === "sum") return;
    if (this.#byReciprocal) {
      if (vector) {
        vector.scale(chunk(this.#ranks - 1), 1 / this.#ranks);
        return;
      }
      this.#reciprocal ??= new Float32Array(count).fill(1 / this.#ranks);
      reduce(MPI_PROD, Deno.UnsafePointer.of(this.#reciprocal), at(this.#ranks - 1));
      return;
    }
    const values = chunk(this.#ranks - 1);
    for (let i = 0; i < count; i++) values[i] /= this.#ranks;
  }

  /** The combined values of the call of `parity`, once every rank has summed its chunk. */
  result(parity: number): Float32Array {
    return this.#parts[parity][this.#ranks - 1];
  }

  /** Frees the window: every rank of the node calls it at the same point (a collective). */
  free(settle: (done: Promise<number>) => Promise<number>): Promise<void> {
    check("MPI_Win_unlock_all", this.#lib.symbols.MPI_Win_unlock_all(this.#window[0]));
    return settle(this.#lib.symbols.MPI_Win_free(this.#window)).then((code) =>
      check("MPI_Win_free", code)
    );
  }
}

/**
 * The BLAS's float32 vector operations, or null: none installed, or one
 * named in `MULTIGRAD_BLAS` that does not load (the cpu backend reports
 * that; the sums fall back to MPI's own loops).
 */
function blasVector(): BlasVector | null {
  try {
    return loadBlas()?.vector ?? null;
  } catch {
    return null;
  }
}
