;; float32 training batch norm (forward statistics and normalization,
;; backward sums and input gradient) in WebAssembly SIMD for the cpu
;; backend's `batchNorm` and `batchNormBackward` kernels, on arrays that
;; live in the matmul kernel's shared memory (`heap.ts`), read in place.
;; Assembled by `deno run -A scripts/build_wasm.ts`.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; Batch norm over one channel's runs: `outer` runs of `inner` floats,
  ;; `plane` bytes apart, from `x`. The sums are float64 in two lanes, lane 0
  ;; the even and lane 1 the odd elements of each run (an odd run's last
  ;; element to lane 0), exactly the TypeScript kernels' two sets of sums
  ;; (`kernels/batch_norm*.ts`), so the results are theirs bit for bit.

  ;; bn_sums(x, plane, outer, inner, shift) -> (Σ d even, Σ d odd, Σ d² even,
  ;; Σ d² odd) with d = x - shift.
  (func (export "bn_sums") (param $x i32) (param $plane i32) (param $outer i32) (param $inner i32)
    (param $shift f64) (result f64 f64 f64 f64)
    (local $o i32) (local $p i32) (local $end i32) (local $d v128) (local $s v128) (local $q v128)
    (local $shifts v128) (local $d0 f64)
    (local.set $shifts (f64x2.splat (local.get $shift)))
    (local.set $o (i32.const 0))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $p (local.get $x))
      (local.set $end (i32.add (local.get $x) (i32.shl (i32.and (local.get $inner) (i32.const -2)) (i32.const 2))))
      (block $done (loop $pairs
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $d (f64x2.sub (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $p))) (local.get $shifts)))
        (local.set $s (f64x2.add (local.get $s) (local.get $d)))
        (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (br $pairs)))
      (if (i32.and (local.get $inner) (i32.const 1)) (then
        (local.set $d0 (f64.sub (f64.promote_f32 (f32.load (local.get $p))) (local.get $shift)))
        (local.set $s (f64x2.replace_lane 0 (local.get $s)
          (f64.add (f64x2.extract_lane 0 (local.get $s)) (local.get $d0))))
        (local.set $q (f64x2.replace_lane 0 (local.get $q)
          (f64.add (f64x2.extract_lane 0 (local.get $q)) (f64.mul (local.get $d0) (local.get $d0)))))))
      (local.set $x (i32.add (local.get $x) (local.get $plane)))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop)))
    (f64x2.extract_lane 0 (local.get $s)) (f64x2.extract_lane 1 (local.get $s))
    (f64x2.extract_lane 0 (local.get $q)) (f64x2.extract_lane 1 (local.get $q)))

  ;; bn_normalize(x, out, plane, outer, inner, scale, offset):
  ;; out = float32(x · scale + offset), in float64.
  (func (export "bn_normalize") (param $x i32) (param $out i32) (param $plane i32) (param $outer i32)
    (param $inner i32) (param $scale f64) (param $offset f64)
    (local $o i32) (local $p i32) (local $q i32) (local $end i32) (local $scales v128) (local $offsets v128)
    (local.set $scales (f64x2.splat (local.get $scale)))
    (local.set $offsets (f64x2.splat (local.get $offset)))
    (local.set $o (i32.const 0))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $p (local.get $x))
      (local.set $q (local.get $out))
      (local.set $end (i32.add (local.get $x) (i32.shl (i32.and (local.get $inner) (i32.const -2)) (i32.const 2))))
      (block $done (loop $pairs
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (v128.store64_lane 0 (local.get $q) (f32x4.demote_f64x2_zero (f64x2.add (f64x2.mul
          (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $p))) (local.get $scales)) (local.get $offsets))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (local.set $q (i32.add (local.get $q) (i32.const 8)))
        (br $pairs)))
      (if (i32.and (local.get $inner) (i32.const 1)) (then
        (f32.store (local.get $q) (f32.demote_f64 (f64.add (f64.mul
          (f64.promote_f32 (f32.load (local.get $p))) (local.get $scale)) (local.get $offset))))))
      (local.set $x (i32.add (local.get $x) (local.get $plane)))
      (local.set $out (i32.add (local.get $out) (local.get $plane)))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop))))

  ;; bn_backward_sums(x, grad, plane, outer, inner, mean) -> (Σ g even,
  ;; Σ g odd, Σ g (x - mean) even, Σ g (x - mean) odd).
  (func (export "bn_backward_sums") (param $x i32) (param $grad i32) (param $plane i32) (param $outer i32)
    (param $inner i32) (param $mean f64) (result f64 f64 f64 f64)
    (local $o i32) (local $p i32) (local $g i32) (local $end i32) (local $gv v128) (local $s v128) (local $c v128)
    (local $means v128) (local $g0 f64)
    (local.set $means (f64x2.splat (local.get $mean)))
    (local.set $o (i32.const 0))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $p (local.get $x))
      (local.set $g (local.get $grad))
      (local.set $end (i32.add (local.get $x) (i32.shl (i32.and (local.get $inner) (i32.const -2)) (i32.const 2))))
      (block $done (loop $pairs
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $gv (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $g))))
        (local.set $s (f64x2.add (local.get $s) (local.get $gv)))
        (local.set $c (f64x2.add (local.get $c) (f64x2.mul (local.get $gv)
          (f64x2.sub (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $p))) (local.get $means)))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (local.set $g (i32.add (local.get $g) (i32.const 8)))
        (br $pairs)))
      (if (i32.and (local.get $inner) (i32.const 1)) (then
        (local.set $g0 (f64.promote_f32 (f32.load (local.get $g))))
        (local.set $s (f64x2.replace_lane 0 (local.get $s)
          (f64.add (f64x2.extract_lane 0 (local.get $s)) (local.get $g0))))
        (local.set $c (f64x2.replace_lane 0 (local.get $c)
          (f64.add (f64x2.extract_lane 0 (local.get $c)) (f64.mul (local.get $g0)
            (f64.sub (f64.promote_f32 (f32.load (local.get $p))) (local.get $mean))))))))
      (local.set $x (i32.add (local.get $x) (local.get $plane)))
      (local.set $grad (i32.add (local.get $grad) (local.get $plane)))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop)))
    (f64x2.extract_lane 0 (local.get $s)) (f64x2.extract_lane 1 (local.get $s))
    (f64x2.extract_lane 0 (local.get $c)) (f64x2.extract_lane 1 (local.get $c)))

  ;; bn_backward_input(x, grad, out, plane, outer, inner, mean, a, b, k):
  ;; out = float32(a·g + b·(x - mean) + k), in float64.
  (func (export "bn_backward_input") (param $x i32) (param $grad i32) (param $out i32) (param $plane i32)
    (param $outer i32) (param $inner i32) (param $mean f64) (param $a f64) (param $b f64) (param $k f64)
    (local $o i32) (local $p i32) (local $g i32) (local $q i32) (local $end i32)
    (local $means v128) (local $as v128) (local $bs v128) (local $ks v128)
    (local.set $means (f64x2.splat (local.get $mean)))
    (local.set $as (f64x2.splat (local.get $a)))
    (local.set $bs (f64x2.splat (local.get $b)))
    (local.set $ks (f64x2.splat (local.get $k)))
    (local.set $o (i32.const 0))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $p (local.get $x))
      (local.set $g (local.get $grad))
      (local.set $q (local.get $out))
      (local.set $end (i32.add (local.get $x) (i32.shl (i32.and (local.get $inner) (i32.const -2)) (i32.const 2))))
      (block $done (loop $pairs
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (v128.store64_lane 0 (local.get $q) (f32x4.demote_f64x2_zero (f64x2.add (f64x2.add
          (f64x2.mul (local.get $as) (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $g))))
          (f64x2.mul (local.get $bs)
            (f64x2.sub (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $p))) (local.get $means))))
          (local.get $ks))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (local.set $g (i32.add (local.get $g) (i32.const 8)))
        (local.set $q (i32.add (local.get $q) (i32.const 8)))
        (br $pairs)))
      (if (i32.and (local.get $inner) (i32.const 1)) (then
        (f32.store (local.get $q) (f32.demote_f64 (f64.add (f64.add
          (f64.mul (local.get $a) (f64.promote_f32 (f32.load (local.get $g))))
          (f64.mul (local.get $b) (f64.sub (f64.promote_f32 (f32.load (local.get $p))) (local.get $mean))))
          (local.get $k))))))
      (local.set $x (i32.add (local.get $x) (local.get $plane)))
      (local.set $grad (i32.add (local.get $grad) (local.get $plane)))
      (local.set $out (i32.add (local.get $out) (local.get $plane)))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop))))
)
