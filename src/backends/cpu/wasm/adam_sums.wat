;; The cpu backend's float32 Adam step and column sums in WebAssembly SIMD,
;; on arrays that live in the matmul kernel's shared memory (`heap.ts`),
;; read and written in place. Each is the TypeScript kernel's arithmetic
;; (`kernels/adam.ts`, `kernels/reduce.ts`) lane for lane, so the same bits.
;; Assembled by `deno run -A scripts/build_wasm.ts`.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; adam(param, grad, expAvg, expAvgSq, n, beta1, keep1, beta2, keep2,
  ;;      decay, shrink, c2, eps, step, mode, sign): one float32 Adam step in
  ;; place, every operation rounded to float32 (see `kernels/adam.ts`);
  ;; mode 0 no weight decay, 1 decoupled (AdamW), 2 added to the gradient.
  (func (export "adam")
    (param $param i32) (param $grad i32) (param $m1 i32) (param $m2 i32) (param $n i32)
    (param $beta1 f32) (param $keep1 f32) (param $beta2 f32) (param $keep2 f32)
    (param $decay f32) (param $shrink f32) (param $c2 f32) (param $eps f32) (param $step f32)
    (param $mode i32) (param $sign f32)
    (local $i i32) (local $p v128) (local $g v128) (local $m v128) (local $v v128)
    (local $vb1 v128) (local $vk1 v128) (local $vb2 v128) (local $vk2 v128) (local $vdecay v128)
    (local $vshrink v128) (local $vc2 v128) (local $veps v128) (local $vstep v128) (local $vsign v128)
    (local $end i32)
    (local.set $vb1 (f32x4.splat (local.get $beta1)))
    (local.set $vk1 (f32x4.splat (local.get $keep1)))
    (local.set $vb2 (f32x4.splat (local.get $beta2)))
    (local.set $vk2 (f32x4.splat (local.get $keep2)))
    (local.set $vdecay (f32x4.splat (local.get $decay)))
    (local.set $vshrink (f32x4.splat (local.get $shrink)))
    (local.set $vc2 (f32x4.splat (local.get $c2)))
    (local.set $veps (f32x4.splat (local.get $eps)))
    (local.set $vstep (f32x4.splat (local.get $step)))
    (local.set $vsign (f32x4.splat (local.get $sign)))
    ;; Whole groups of four, then the last (up to 3) one at a time through
    ;; the same lanes (loaded and stored singly).
    (local.set $end (i32.and (local.get $n) (i32.const -4)))
    (block $done (loop $groups
      (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
      (local.set $p (v128.load (local.get $param)))
      (local.set $g (f32x4.mul (local.get $vsign) (v128.load (local.get $grad))))
      (if (i32.eq (local.get $mode) (i32.const 1))
        (then (local.set $p (f32x4.mul (local.get $p) (local.get $vshrink)))))
      (if (i32.eq (local.get $mode) (i32.const 2))
        (then (local.set $g (f32x4.add (local.get $g) (f32x4.mul (local.get $p) (local.get $vdecay))))))
      (local.set $m (f32x4.add (f32x4.mul (v128.load (local.get $m1)) (local.get $vb1))
        (f32x4.mul (local.get $g) (local.get $vk1))))
      (local.set $v (f32x4.add (f32x4.mul (v128.load (local.get $m2)) (local.get $vb2))
        (f32x4.mul (f32x4.mul (local.get $g) (local.get $vk2)) (local.get $g))))
      (v128.store (local.get $m1) (local.get $m))
      (v128.store (local.get $m2) (local.get $v))
      (v128.store (local.get $param) (f32x4.add (local.get $p)
        (f32x4.div (f32x4.mul (local.get $m) (local.get $vstep))
          (f32x4.add (f32x4.div (f32x4.sqrt (local.get $v)) (local.get $vc2)) (local.get $veps)))))
      (local.set $param (i32.add (local.get $param) (i32.const 16)))
      (local.set $grad (i32.add (local.get $grad) (i32.const 16)))
      (local.set $m1 (i32.add (local.get $m1) (i32.const 16)))
      (local.set $m2 (i32.add (local.get $m2) (i32.const 16)))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br $groups)))
    (block $tdone (loop $tail
      (br_if $tdone (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $p (v128.load32_zero (local.get $param)))
      (local.set $g (f32x4.mul (local.get $vsign) (v128.load32_zero (local.get $grad))))
      (if (i32.eq (local.get $mode) (i32.const 1))
        (then (local.set $p (f32x4.mul (local.get $p) (local.get $vshrink)))))
      (if (i32.eq (local.get $mode) (i32.const 2))
        (then (local.set $g (f32x4.add (local.get $g) (f32x4.mul (local.get $p) (local.get $vdecay))))))
      (local.set $m (f32x4.add (f32x4.mul (v128.load32_zero (local.get $m1)) (local.get $vb1))
        (f32x4.mul (local.get $g) (local.get $vk1))))
      (local.set $v (f32x4.add (f32x4.mul (v128.load32_zero (local.get $m2)) (local.get $vb2))
        (f32x4.mul (f32x4.mul (local.get $g) (local.get $vk2)) (local.get $g))))
      (v128.store32_lane 0 (local.get $m1) (local.get $m))
      (v128.store32_lane 0 (local.get $m2) (local.get $v))
      (v128.store32_lane 0 (local.get $param) (f32x4.add (local.get $p)
        (f32x4.div (f32x4.mul (local.get $m) (local.get $vstep))
          (f32x4.add (f32x4.div (f32x4.sqrt (local.get $v)) (local.get $vc2)) (local.get $veps)))))
      (local.set $param (i32.add (local.get $param) (i32.const 4)))
      (local.set $grad (i32.add (local.get $grad) (i32.const 4)))
      (local.set $m1 (i32.add (local.get $m1) (i32.const 4)))
      (local.set $m2 (i32.add (local.get $m2) (i32.const 4)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $tail))))

  ;; sum_columns(x, out, outer, size, inner): out[o, i] = Σ over r of
  ;; x[o, r, i] in float64, r in order, rounded to float32 once; four
  ;; columns at a time (two f64x2 sums), the last ones singly.
  (func (export "sum_columns") (param $x i32) (param $out i32) (param $outer i32) (param $size i32)
    (param $inner i32)
    (local $o i32) (local $i i32) (local $r i32) (local $p i32) (local $row i32) (local $v v128)
    (local $lo v128) (local $hi v128) (local $s f64) (local $end i32)
    (local.set $row (i32.shl (local.get $inner) (i32.const 2)))
    (local.set $end (i32.and (local.get $inner) (i32.const -4)))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $i (i32.const 0))
      (block $idone (loop $iloop
        (br_if $idone (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $lo (v128.const f64x2 0 0))
        (local.set $hi (v128.const f64x2 0 0))
        (local.set $p (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2))))
        (local.set $r (i32.const 0))
        (block $rdone (loop $rloop
          (br_if $rdone (i32.ge_u (local.get $r) (local.get $size)))
          (local.set $v (v128.load (local.get $p)))
          (local.set $lo (f64x2.add (local.get $lo) (f64x2.promote_low_f32x4 (local.get $v))))
          (local.set $hi (f64x2.add (local.get $hi) (f64x2.promote_low_f32x4
            (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $v) (local.get $v)))))
          (local.set $p (i32.add (local.get $p) (local.get $row)))
          (local.set $r (i32.add (local.get $r) (i32.const 1)))
          (br $rloop)))
        (v128.store64_lane 0 (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (f32x4.demote_f64x2_zero (local.get $lo)))
        (v128.store64_lane offset=8 0 (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (f32x4.demote_f64x2_zero (local.get $hi)))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $iloop)))
      (block $tdone (loop $tloop
        (br_if $tdone (i32.ge_u (local.get $i) (local.get $inner)))
        (local.set $s (f64.const 0))
        (local.set $p (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2))))
        (local.set $r (i32.const 0))
        (block $sdone (loop $sloop
          (br_if $sdone (i32.ge_u (local.get $r) (local.get $size)))
          (local.set $s (f64.add (local.get $s) (f64.promote_f32 (f32.load (local.get $p)))))
          (local.set $p (i32.add (local.get $p) (local.get $row)))
          (local.set $r (i32.add (local.get $r) (i32.const 1)))
          (br $sloop)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))) (f32.demote_f64 (local.get $s)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $tloop)))
      (local.set $x (i32.add (local.get $x) (i32.mul (local.get $size) (local.get $row))))
      (local.set $out (i32.add (local.get $out) (local.get $row)))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop))))
)
