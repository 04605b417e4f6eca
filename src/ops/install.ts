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
import * as linalg from "./linalg.ts";
import * as softmax from "./softmax.ts";
import * as transfer from "./transfer.ts";
import * as inplace from "./inplace.ts";
import { full } from "./factory.ts";

// Whole modules: Tensor's methods pick what they call (`TensorOps`).
installTensorOps({
  ...elementwise,
  ...reduce,
  ...view,
  ...indexing,
  ...linalg,
  ...softmax,
  ...transfer,
  ...inplace,
  full,
});
