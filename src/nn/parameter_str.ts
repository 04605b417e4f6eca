/**
 * `nn.Parameter` prints as PyTorch's `Parameter.__repr__`:
 * `Parameter containing:\ntensor(...)`, in `await p.format()` and in
 * `console.log(p)` (see `src/printing/tensor_str.ts`).
 * @module
 */

import { Parameter } from "./module.ts";
import { formatTensor, inspectTensor } from "../printing/tensor_str.ts";

const HEADER = "Parameter containing:\n";

Object.defineProperty(Parameter.prototype, "format", {
  async value(this: Parameter): Promise<string> {
    return HEADER + await formatTensor(this);
  },
  writable: true,
  configurable: true,
});
Object.defineProperty(Parameter.prototype, Symbol.for("Deno.customInspect"), {
  value(this: Parameter): string {
    const text = inspectTensor(this);
    // An UninitializedParameter prints as PyTorch's `<UninitializedParameter>`, without the header.
    return text.startsWith("<") ? text : HEADER + text;
  },
  writable: true,
  configurable: true,
});
