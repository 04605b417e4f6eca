/**
 * The few protobuf wire-format pieces TensorBoard's event files need (no
 * protobuf package: an event is a handful of fields). Fields are written in
 * field-number order and proto3 implicit-presence fields are left out at
 * their default (+0, "", empty), as protobuf's own serializers do, so that
 * the bytes equal what PyTorch writes.
 * @module
 */

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

const UTF8 = new TextEncoder();

/** An append-only protobuf message encoder. */
export class ProtoWriter {
  #buf = new Uint8Array(64);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

  #reserve(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.#len));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  #byte(b: number): void {
    this.#reserve(1);
    this.#buf[this.#len++] = b;
  }

  /** An unsigned varint; a negative integer is its 64-bit two's complement (10 bytes). */
  varint(value: number): this {
    if (value >= 0 && value < 2 ** 31) {
      let v = value;
      while (v >= 0x80) {
        this.#byte((v & 0x7f) | 0x80);
        v >>>= 7;
      }
      this.#byte(v);
      return this;
    }
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.#byte(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.#byte(Number(v));
    return this;
  }

  #key(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  /** A double field; `always` for a oneof member (written even at 0). */
  double(field: number, value: number, always = false): this {
    if (!always && value === 0 && !Object.is(value, -0)) return this;
    this.#key(field, WIRE_FIXED64);
    this.#reserve(8);
    this.#view.setFloat64(this.#len, value, true);
    this.#len += 8;
    return this;
  }

  /** A float field (rounded to float32); `always` for a oneof member. */
  float(field: number, value: number, always = false): this {
    if (!always && value === 0 && !Object.is(value, -0)) return this;
    this.#key(field, WIRE_FIXED32);
    this.#reserve(4);
    this.#view.setFloat32(this.#len, value, true);
    this.#len += 4;
    return this;
  }

  /** An int32/int64/enum/bool field (an integer), left out at 0 unless `always`. */
  int(field: number, value: number, always = false): this {
    if (!always && value === 0) return this;
    this.#key(field, WIRE_VARINT);
    return this.varint(value);
  }

  /** A length-delimited field: bytes, a string (UTF-8) or an encoded message. */
  bytes(field: number, value: Uint8Array | string, always = false): this {
    const b = typeof value === "string" ? UTF8.encode(value) : value;
    if (!always && b.length === 0) return this;
    this.#key(field, WIRE_BYTES);
    this.varint(b.length);
    this.#reserve(b.length);
    this.#buf.set(b, this.#len);
    this.#len += b.length;
    return this;
  }

  /** A packed repeated double field (left out when empty). */
  packedDoubles(field: number, values: ArrayLike<number>): this {
    return this.#packed(field, values, 8);
  }

  /** A packed repeated float field, each value rounded to float32 (left out when empty). */
  packedFloats(field: number, values: ArrayLike<number>): this {
    return this.#packed(field, values, 4);
  }

  #packed(field: number, values: ArrayLike<number>, size: 4 | 8): this {
    if (values.length === 0) return this;
    this.#key(field, WIRE_BYTES);
    this.varint(values.length * size);
    this.#reserve(values.length * size);
    for (let i = 0; i < values.length; i++) {
      if (size === 8) this.#view.setFloat64(this.#len, values[i], true);
      else this.#view.setFloat32(this.#len, values[i], true);
      this.#len += size;
    }
    return this;
  }

  /** The encoded message. */
  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}
