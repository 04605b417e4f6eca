/**
 * Checks of values only the device knows (a class index out of range), made
 * without waiting: the values are read back behind the kernels that made
 * them, and a failed verdict is raised by the next read on that device.
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";

/**
 * Reads `values` (a small tensor) back once the work ahead of it has run and
 * gives them to `verdict`: a message it returns becomes a RangeError that the
 * next read on `values`' device rejects with. Kernels are never delayed.
 */
export function checkLater(values: Tensor, verdict: (host: TypedArray) => string | null): void {
  const { device, dtype } = values;
  const n = values.numel();
  const buffer = values.storage.buffer("check");
  const host = new Promise<TypedArray>((resolve, reject) => {
    device.stream.submit(() => {
      try {
        device.backendDevice.read(buffer, 0, n, dtype).then(resolve, reject);
      } catch (error) {
        reject(error);
      }
    });
  });
  device.stream.check(host.then((v) => {
    const message = verdict(v);
    return message === null ? null : new RangeError(message);
  }));
}
