/**
 * The three summaries of `torch.utils.tensorboard.summary.hparams`
 * (experiment, session start, session end) for TensorBoard's hparams plugin.
 * @module
 */

import { ProtoWriter } from "./proto.ts";

/** A hyperparameter value once read: a number (bools and tensors become numbers) or a string. */
export type HparamValue = number | string;

const DATA_TYPE_STRING = 1;
const DATA_TYPE_FLOAT64 = 3;

// google.protobuf.Value: number_value = 2, string_value = 3 (a oneof: always written).
function protoValue(v: HparamValue): Uint8Array {
  const w = new ProtoWriter();
  return (typeof v === "number" ? w.double(2, v, true) : w.bytes(3, v, true)).finish();
}

function pluginValue(tag: string, field: number, data: Uint8Array): Uint8Array {
  const content = new ProtoWriter().bytes(field, data, true).finish(); // version 0 left out
  const plugin = new ProtoWriter().bytes(1, "hparams").bytes(2, content).finish();
  const metadata = new ProtoWriter().bytes(1, plugin, true).finish();
  return new ProtoWriter().bytes(1, tag).bytes(9, metadata, true).finish();
}

/**
 * `[experiment, sessionStartInfo, sessionEndInfo]` as `Summary.Value`s.
 * `domains` holds a hyperparameter's discrete values where one was given
 * (tensor-valued hyperparameters get none, as in PyTorch).
 */
export function hparamsValues(
  hparams: [string, HparamValue, HparamValue[] | undefined][],
  metricTags: string[],
): Uint8Array[] {
  const exp = new ProtoWriter();
  const ssi = new ProtoWriter();
  // A map: protobuf writes its entries in hash order, or sorted by key (the
  // UTF-8 bytes) when deterministic; the sorted order makes the bytes reproducible.
  const utf8 = new TextEncoder();
  const byKey = hparams.map((h) => [utf8.encode(h[0]), h] as const).sort(([a], [b]) => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
    return a.length - b.length;
  });
  for (const [, [name, value]] of byKey) {
    const entry = new ProtoWriter().bytes(1, name, true).bytes(2, protoValue(value), true);
    ssi.bytes(1, entry.finish(), true);
  }
  for (const [name, value, domain] of hparams) {
    const info = new ProtoWriter().bytes(1, name)
      .int(4, typeof value === "number" ? DATA_TYPE_FLOAT64 : DATA_TYPE_STRING);
    if (domain) {
      const list = new ProtoWriter();
      for (const d of domain) list.bytes(1, protoValue(d), true);
      info.bytes(5, list.finish(), true);
    }
    exp.bytes(4, info.finish(), true);
  }
  for (const tag of metricTags) {
    const name = new ProtoWriter().bytes(2, tag).finish();
    exp.bytes(5, new ProtoWriter().bytes(1, name, true).finish(), true);
  }
  const sei = new ProtoWriter().int(1, 1).finish(); // STATUS_SUCCESS
  return [
    pluginValue("_hparams_/experiment", 2, exp.finish()),
    pluginValue("_hparams_/session_start_info", 3, ssi.finish()),
    pluginValue("_hparams_/session_end_info", 4, sei),
  ];
}
