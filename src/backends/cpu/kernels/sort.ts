/**
 * `sort` (optional fused kernel): each row's elements turned into unsigned
 * integer keys whose order is the contract's order (descending: the keys
 * complemented), then sorted with their positions by a least-significant-
 * digit radix sort, 8 bits a pass, which is stable, so equal keys keep their
 * positions' order. Short rows use an insertion sort instead (also stable);
 * a top-k of a long row, a heap selection (see {@link heapSelect}). A
 * comparison sort with a tie-breaking comparator was 15-20x slower.
 * @module
 */

import type { SortArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** Rows up to this long are insertion-sorted (the radix sort's 256-entry tables dominate below). */
const SHORT = 48;

/**
 * Scratch of one call: the keys (one or two 32-bit words per element,
 * least significant word first) and positions, twice over for the radix
 * sort's ping-pong, plus the digit counts.
 */
interface Scratch {
  readonly keys: Uint32Array[];
  readonly spare: Uint32Array[];
  pos: Int32Array;
  spos: Int32Array;
  readonly count: Int32Array;
}

/**
 * Keys in the contract's order: a float's bits with the sign flipped
 * (negatives: every bit), so that unsigned order is numeric order; -0 as
 * +0; every NaN above +inf; int32 offset by 2^31. `flip` (all ones)
 * complements them for a descending sort.
 */
function loadKeys(
  x: TypedArray,
  bits: Uint32Array,
  words: number,
  base: number,
  size: number,
  inner: number,
  flip: number,
  s: Scratch,
): void {
  const [k0, k1] = s.keys;
  const pos = s.pos;
  if (words === 2) {
    for (let r = 0, p = base; r < size; r++, p += inner) {
      const v = x[p];
      let lo = bits[2 * p], hi = bits[2 * p + 1];
      if (v !== v) lo = hi = 0xffffffff;
      else if (v === 0) (lo = 0), (hi = 0x80000000);
      else if (hi >>> 31) (lo = ~lo), (hi = ~hi);
      else hi |= 0x80000000;
      k0[r] = lo ^ flip;
      k1[r] = hi ^ flip;
      pos[r] = r;
    }
  } else if (x instanceof Int32Array) {
    for (let r = 0, p = base; r < size; r++, p += inner) {
      k0[r] = x[p] ^ 0x80000000 ^ flip;
      pos[r] = r;
    }
  } else {
    for (let r = 0, p = base; r < size; r++, p += inner) {
      const v = x[p];
      const u = bits[p];
      k0[r] = (v !== v ? 0xffffffff : v === 0 ? 0x80000000 : u >>> 31 ? ~u : u | 0x80000000) ^
        flip;
      pos[r] = r;
    }
  }
}

/** Stable insertion sort of the first `size` keys (and positions). */
function insertionSort(s: Scratch, words: number, size: number): void {
  const [k0, k1] = s.keys;
  const pos = s.pos;
  for (let r = 1; r < size; r++) {
    const a = k0[r], b = words === 2 ? k1[r] : 0, p = pos[r];
    let j = r - 1;
    // Strictly greater moves up: an equal key stays ahead (stability).
    while (j >= 0 && (words === 2 ? k1[j] > b || (k1[j] === b && k0[j] > a) : k0[j] > a)) {
      k0[j + 1] = k0[j];
      if (words === 2) k1[j + 1] = k1[j];
      pos[j + 1] = pos[j];
      j--;
    }
    k0[j + 1] = a;
    if (words === 2) k1[j + 1] = b;
    pos[j + 1] = p;
  }
}

/**
 * Stable LSD radix sort of the first `size` keys and positions, 4 passes a
 * word; a pass whose digit is the same for every key is skipped. The
 * result is left in `s.keys`/`s.pos` (swapped with the spares as needed).
 */
function radixSort(s: Scratch, words: number, size: number): void {
  const count = s.count;
  count.fill(0);
  for (let w = 0; w < words; w++) {
    const k = s.keys[w];
    const c = w * 1024;
    for (let r = 0; r < size; r++) {
      const v = k[r];
      count[c + (v & 255)]++;
      count[c + 256 + ((v >>> 8) & 255)]++;
      count[c + 512 + ((v >>> 16) & 255)]++;
      count[c + 768 + (v >>> 24)]++;
    }
  }
  for (let w = 0; w < words; w++) {
    for (let d = 0; d < 4; d++) {
      const c = w * 1024 + d * 256;
      const shift = 8 * d;
      if (count[c + ((s.keys[w][0] >>> shift) & 255)] === size) continue;
      let sum = 0;
      for (let b = 0; b < 256; b++) {
        const n = count[c + b];
        count[c + b] = sum;
        sum += n;
      }
      const src = s.keys[w], dst = s.spare[w], pos = s.pos, spos = s.spos;
      if (w + 1 === words && d === 3) {
        // The last pass: the keys are not needed after it.
        for (let r = 0; r < size; r++) spos[count[c + (src[r] >>> 24)]++] = pos[r];
      } else if (w + 1 < words) {
        // The more significant word moves along (the less significant ones are done with).
        const hi = s.keys[w + 1], shi = s.spare[w + 1];
        for (let r = 0; r < size; r++) {
          const v = src[r];
          const at = count[c + ((v >>> shift) & 255)]++;
          dst[at] = v;
          shi[at] = hi[r];
          spos[at] = pos[r];
        }
        s.keys[w + 1] = shi;
        s.spare[w + 1] = hi;
      } else {
        for (let r = 0; r < size; r++) {
          const v = src[r];
          const at = count[c + ((v >>> shift) & 255)]++;
          dst[at] = v;
          spos[at] = pos[r];
        }
      }
      s.keys[w] = dst;
      s.spare[w] = src;
      s.pos = spos;
      s.spos = pos;
    }
  }
}

/** Whether heap entry `i` comes after entry `j`: keys (high word first), then positions. */
function later(
  h0: Uint32Array,
  h1: Uint32Array,
  hp: Int32Array,
  two: boolean,
  i: number,
  j: number,
): boolean {
  if (two && h1[i] !== h1[j]) return h1[i] > h1[j];
  if (h0[i] !== h0[j]) return h0[i] > h0[j];
  return hp[i] > hp[j];
}

/** Restores the max-heap (the latest entry at 0) of the first `n` entries below `i`. */
function siftDown(
  h0: Uint32Array,
  h1: Uint32Array,
  hp: Int32Array,
  two: boolean,
  n: number,
  i: number,
): void {
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) return;
    const c = l + 1 < n && later(h0, h1, hp, two, l + 1, l) ? l + 1 : l;
    if (!later(h0, h1, hp, two, c, i)) return;
    const a = h0[i], b = h1[i], p = hp[i];
    (h0[i] = h0[c]), (h1[i] = h1[c]), (hp[i] = hp[c]);
    (h0[c] = a), (h1[c] = b), (hp[c] = p);
    i = c;
  }
}

/**
 * The row's first `k` in order (for a top-k of a long row), into `s.pos[0..k)`:
 * a max-heap of the `k` earliest so far, O(size log k) where the radix sort
 * makes several passes over the whole row. A later element enters only when
 * its key is strictly smaller than the heap's latest, since its position is
 * larger than every position there: equal keys keep their order, exactly as
 * the stable sort's first `k`.
 */
function heapSelect(s: Scratch, words: number, size: number, k: number): void {
  const [k0, k1] = s.keys;
  const two = words === 2;
  const h0 = new Uint32Array(k), h1 = two ? new Uint32Array(k) : h0, hp = new Int32Array(k);
  for (let r = 0; r < k; r++) (h0[r] = k0[r]), two && (h1[r] = k1[r]), (hp[r] = r);
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(h0, h1, hp, two, k, i);
  for (let r = k; r < size; r++) {
    const a = k0[r];
    if (two ? k1[r] < h1[0] || (k1[r] === h1[0] && a < h0[0]) : a < h0[0]) {
      (h0[0] = a), two && (h1[0] = k1[r]), (hp[0] = r);
      siftDown(h0, h1, hp, two, k, 0);
    }
  }
  // Heap sort: the latest to the end, repeatedly.
  for (let n = k - 1; n > 0; n--) {
    const a = h0[0], b = h1[0], p = hp[0];
    (h0[0] = h0[n]), (h1[0] = h1[n]), (hp[0] = hp[n]);
    (h0[n] = a), (h1[n] = b), (hp[n] = p);
    siftDown(h0, h1, hp, two, n, 0);
  }
  s.pos.set(hp);
}

/**
 * Rows at least this many times longer than `k` are selected by
 * {@link heapSelect}, not sorted (topk 10 of rows of 10,000: 2.3x faster;
 * making the row's keys is then half the time). Below, the radix sort's few
 * passes win over the heap's log k per element that enters.
 */
const SELECT_RATIO = 16;

/** Sorts every row of the [outer, size, inner] view (see {@link SortArgs}). */
export function sort(
  { x, values, indices, outer, size, inner, k, descending, dtype }: SortArgs<TypedArray>,
): void {
  const words = dtype === "float64" ? 2 : 1;
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length * words);
  const flip = descending ? 0xffffffff : 0;
  const words32 = () => Array.from({ length: words }, () => new Uint32Array(size));
  const s: Scratch = {
    keys: words32(),
    spare: words32(),
    pos: new Int32Array(size),
    spos: new Int32Array(size),
    count: new Int32Array(1024 * words),
  };
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * size * inner + i;
      if (k === 0) continue;
      loadKeys(x, bits, words, base, size, inner, flip, s);
      if (size <= SHORT) insertionSort(s, words, size);
      else if (k * SELECT_RATIO <= size) heapSelect(s, words, size, k);
      else radixSort(s, words, size);
      const pos = s.pos;
      for (let r = 0, p = o * k * inner + i; r < k; r++, p += inner) {
        const from = pos[r];
        indices[p] = from;
        values[p] = x[base + from * inner];
      }
    }
  }
}
