/**
 * Decoding the base64 modules of `modules.ts`.
 * @module
 */

/** The bytes of a base64 string. */
export function decodeBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * The instance of a module given in base64, or null where WebAssembly, the
 * module's proposals (`WebAssembly.validate`) or compiling at all (a
 * Content-Security-Policy without `wasm-unsafe-eval`) are missing.
 */
export function instantiate(
  base64: string,
  imports: WebAssembly.Imports = {},
): WebAssembly.Instance | null {
  try {
    if (typeof WebAssembly === "undefined") return null;
    const bytes = decodeBase64(base64);
    if (!WebAssembly.validate(bytes)) return null;
    return new WebAssembly.Instance(new WebAssembly.Module(bytes), imports);
  } catch {
    return null;
  }
}
