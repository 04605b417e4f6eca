/**
 * The audio of `add_audio`: PyTorch 1.13's `summary.audio` turns the samples
 * into 16-bit PCM and writes them with Python's `wave` module (one channel);
 * these are the same bytes, in the `Summary.Audio` TensorBoard reads.
 * @module
 */

import { ProtoWriter } from "./proto.ts";

const INT16_MAX = 32767;

/**
 * The frame rate a WAV header gets for `sampleRate`: Python's `wave` rounds it with round(),
 * halves to the even neighbour. It must be at most 2^31 - 1 (the bytes a second are a uint32).
 */
export function wavFrameRate(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest !== 0.5) return rest < 0.5 ? floor : floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * `samples` as the WAV file `summary.audio` makes: clipped to [-1, 1], times 32767 (in float32
 * when `float32`, as numpy multiplies a float32 array; exactly otherwise), truncated to int16,
 * behind Python's `wave` header (PCM, 1 channel, 2 bytes a sample, the rate rounded half to even).
 * The caller checks the samples are not NaN and the rate is positive.
 */
export function encodeWav(
  samples: ArrayLike<number>,
  sampleRate: number,
  float32: boolean,
): Uint8Array {
  const frameRate = wavFrameRate(sampleRate);
  const dataLength = samples.length * 2;
  const out = new Uint8Array(44 + dataLength);
  const view = new DataView(out.buffer);
  const ascii = (at: number, text: string) => {
    for (let i = 0; i < text.length; i++) out[at + i] = text.charCodeAt(i);
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + dataLength, true);
  ascii(8, "WAVEfmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // WAVE_FORMAT_PCM
  view.setUint16(22, 1, true); // channels
  view.setUint32(24, frameRate, true);
  view.setUint32(28, frameRate * 2, true); // bytes a second
  view.setUint16(32, 2, true); // bytes a frame
  view.setUint16(34, 16, true); // bits a sample
  ascii(36, "data");
  view.setUint32(40, dataLength, true);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.min(Math.max(samples[i], -1), 1);
    const scaled = float32 ? Math.fround(Math.fround(v) * INT16_MAX) : v * INT16_MAX;
    view.setInt16(44 + 2 * i, Math.trunc(scaled), true);
  }
  return out;
}

/**
 * `Summary.Value{tag, audio}`: `Summary.Audio{sample_rate (float32), num_channels 1,
 * length_frames, encoded_audio_string, content_type "audio/wav"}`.
 */
export function audioValue(
  tag: string,
  sampleRate: number,
  lengthFrames: number,
  wav: Uint8Array,
): Uint8Array {
  const audio = new ProtoWriter().float(1, sampleRate).int(2, 1).int(3, lengthFrames)
    .bytes(4, wav).bytes(5, "audio/wav").finish();
  return new ProtoWriter().bytes(1, tag).bytes(6, audio, true).finish();
}
