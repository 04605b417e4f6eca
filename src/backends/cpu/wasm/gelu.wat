;; float32 GELU and its derivative in WebAssembly SIMD (f32x4), for the cpu
;; backend's `gelu` and `geluDerivative` over float32 (float64 stays in
;; TypeScript). Hand-written; assembled by `deno run -A scripts/build_wasm.ts`.
;;
;;   gelu(x)  = x Φ(x),         Φ(x) = erfc(-x/√2) / 2
;;   gelu'(x) = Φ(x) + x φ(x),  φ(x) = exp(-x²/2) / √(2π)
;;
;; erfc(a) for a >= 0 is Numerical Recipes' `erfcc`, relative error < 1.2e-7:
;;   erfc(a) = t · exp(-a²) · exp(-1.26551223 + t·P(t)),  t = 1 / (1 + a/2)
;; with a = |x|/√2, so exp(-a²) = exp(-x²/2), which both functions need. It
;; is computed from x, not from a (a carries the rounding of x/√2, which the
;; tails would magnify), as exp(-s²/2)·exp(-(x-s)(x+s)/2) with s = x cut to
;; 1/16: s²/2 is exact and (x-s)(x+s) small, so no argument loses bits
;; (Cody's trick). Then erfc(-x/√2) is that value for x <= 0 and 2 minus it
;; for x > 0.
;;
;; exp is Cephes' expf: k = round(x·log2 e), r = x - k·ln 2 (in two parts),
;; exp(r) = 1 + r + r²·P(r), times 2^k through the exponent bits; arguments
;; below -87.3 give 0 (results that would be float32 denormals flush to 0).
;; Measured against float64: within 8 ulp (see tests/cpu_backend_test.ts).
;;
;; Both functions take byte offsets of x and out in this module's memory and
;; a count of 4-float groups; the TypeScript side copies in, pads, copies out.

(module
  (memory (export "memory") 1)

  ;; e^x, lanewise.
  (func $exp (param $x v128) (result v128)
    (local $k v128) (local $r v128) (local $p v128) (local $under v128)
    (local.set $under (f32x4.lt (local.get $x) (v128.const f32x4 -87.33654 -87.33654 -87.33654 -87.33654)))
    (local.set $x (f32x4.max
      (f32x4.min (local.get $x) (v128.const f32x4 88.0 88.0 88.0 88.0))
      (v128.const f32x4 -87.33654 -87.33654 -87.33654 -87.33654)))
    (local.set $k (f32x4.nearest
      (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504088896341 1.44269504088896341 1.44269504088896341 1.44269504088896341))))
    (local.set $r (f32x4.sub
      (f32x4.sub (local.get $x) (f32x4.mul (local.get $k) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375)))
      (f32x4.mul (local.get $k) (v128.const f32x4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4))))
    (local.set $p (f32x4.add
      (f32x4.mul (local.get $r) (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4))
      (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r))
      (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r))
      (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r))
      (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r))
      (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (local.set $p (f32x4.add
      (f32x4.add
        (f32x4.mul (local.get $p) (f32x4.mul (local.get $r) (local.get $r)))
        (local.get $r))
      (v128.const f32x4 1.0 1.0 1.0 1.0)))
    ;; times 2^k: k + 127 in the exponent field.
    (local.set $p (f32x4.mul (local.get $p)
      (i32x4.shl
        (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $k)) (i32x4.splat (i32.const 127)))
        (i32.const 23))))
    (v128.andnot (local.get $p) (local.get $under)))

  ;; exp(-x²/2), lanewise, without rounding x² (see the header).
  (func $gauss (param $x v128) (result v128)
    (local $s v128)
    ;; |x| capped at 20 (exp(-200) is 0 anyway), so that ±inf gives 0, not
    ;; inf - inf; NaN stays NaN (wasm's min propagates it).
    (local.set $x (f32x4.min (f32x4.abs (local.get $x)) (v128.const f32x4 20 20 20 20)))
    (local.set $s (f32x4.mul
      (f32x4.floor (f32x4.mul (local.get $x) (v128.const f32x4 16.0 16.0 16.0 16.0)))
      (v128.const f32x4 0.0625 0.0625 0.0625 0.0625)))
    (f32x4.mul
      (call $exp (f32x4.mul (f32x4.mul (local.get $s) (local.get $s))
        (v128.const f32x4 -0.5 -0.5 -0.5 -0.5)))
      (call $exp (f32x4.mul
        (f32x4.mul
          (f32x4.sub (local.get $x) (local.get $s))
          (f32x4.add (local.get $x) (local.get $s)))
        (v128.const f32x4 -0.5 -0.5 -0.5 -0.5)))))

  ;; Φ(x), given g = exp(-x²/2).
  (func $cdf (param $x v128) (param $g v128) (result v128)
    (local $t v128) (local $p v128) (local $r v128)
    ;; t = 1 / (1 + a/2), a = |x|/√2
    (local.set $t (f32x4.div (v128.const f32x4 1.0 1.0 1.0 1.0)
      (f32x4.add (v128.const f32x4 1.0 1.0 1.0 1.0)
        (f32x4.mul (f32x4.abs (local.get $x)) (v128.const f32x4 0.35355339059327373 0.35355339059327373 0.35355339059327373 0.35355339059327373)))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $t) (v128.const f32x4 0.17087277 0.17087277 0.17087277 0.17087277))
      (v128.const f32x4 -0.82215223 -0.82215223 -0.82215223 -0.82215223)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 1.48851587 1.48851587 1.48851587 1.48851587)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 -1.13520398 -1.13520398 -1.13520398 -1.13520398)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 0.27886807 0.27886807 0.27886807 0.27886807)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 -0.18628806 -0.18628806 -0.18628806 -0.18628806)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 0.09678418 0.09678418 0.09678418 0.09678418)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 0.37409196 0.37409196 0.37409196 0.37409196)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 1.00002368 1.00002368 1.00002368 1.00002368)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $t)) (v128.const f32x4 -1.26551223 -1.26551223 -1.26551223 -1.26551223)))
    ;; r = erfc(|x|/√2) / 2
    (local.set $r (f32x4.mul
      (f32x4.mul (f32x4.mul (local.get $t) (local.get $g)) (call $exp (local.get $p)))
      (v128.const f32x4 0.5 0.5 0.5 0.5)))
    ;; Φ(x) = r for x <= 0, 1 - r for x > 0 (NaN stays NaN through r).
    (v128.bitselect
      (f32x4.sub (v128.const f32x4 1.0 1.0 1.0 1.0) (local.get $r))
      (local.get $r)
      (f32x4.gt (local.get $x) (v128.const f32x4 0.0 0.0 0.0 0.0))))

  (func (export "gelu") (param $x i32) (param $out i32) (param $groups i32)
    (local $v v128)
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $next
        (local.set $v (v128.load (local.get $x)))
        (v128.store (local.get $out)
          (f32x4.mul (local.get $v) (call $cdf (local.get $v) (call $gauss (local.get $v)))))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $groups (i32.sub (local.get $groups) (i32.const 1)))
        (br_if $next (local.get $groups)))))

  (func (export "geluDerivative") (param $x i32) (param $out i32) (param $groups i32)
    (local $v v128) (local $g v128)
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $next
        (local.set $v (v128.load (local.get $x)))
        (local.set $g (call $gauss (local.get $v)))
        ;; Φ(x) + x · g / √(2π)
        (v128.store (local.get $out)
          (f32x4.add
            (call $cdf (local.get $v) (local.get $g))
            (f32x4.mul (local.get $v)
              (f32x4.mul (local.get $g) (v128.const f32x4 0.3989422804014327 0.3989422804014327 0.3989422804014327 0.3989422804014327)))))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $groups (i32.sub (local.get $groups) (i32.const 1)))
        (br_if $next (local.get $groups)))))
)
