/**
 * Installs the operations behind Tensor's methods (see `TensorOps` in
 * `../tensor.ts`). Imported once, by `mod.ts` through `./mod.ts`.
 * @module
 */

import { installTensorOps } from "../tensor.ts";
import * as elementwise from "./elementwise.ts";
import * as reduce from "./reduce.ts";
import * as view from "./view.ts";
import * as indexing from "./indexing.ts";
import { matmul } from "./linalg.ts";
import { logSoftmax, softmax } from "./softmax.ts";
import { copyInto, toDevice } from "./transfer.ts";
import { full } from "./factory.ts";
import { add_, copy_, fill_, mul_, zero_ } from "./inplace.ts";

installTensorOps({
  ...elementwise,
  ...reduce,
  ...view,
  ...indexing,
  matmul,
  logSoftmax,
  softmax,
  copyInto,
  toDevice,
  full,
  add_,
  copy_,
  fill_,
  mul_,
  zero_,
});
