;; Float32 reductions over host arrays for collectives (the distributed
;; layer's all-reduce combines the ranks' arrays in rank order): f32x4
;; lanes, then a scalar tail. Each step rounds to float32 exactly as the
;; scalar TypeScript loop does, so every rank gets the same bits whichever
;; runs. Pointers are byte offsets into the imported shared memory, n is in
;; elements.
(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; out[i] = (a[i] + b[i]) / d
  (func (export "sum2") (param $out i32) (param $a i32) (param $b i32) (param $n i32) (param $d f32)
    (local $end i32) (local $vend i32) (local $dv v128)
    (local.set $dv (f32x4.splat (local.get $d)))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $vend
      (i32.add (local.get $out) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done
      (loop $lanes
        (br_if $done (i32.ge_u (local.get $out) (local.get $vend)))
        (v128.store (local.get $out)
          (f32x4.div
            (f32x4.add (v128.load (local.get $a)) (v128.load (local.get $b)))
            (local.get $dv)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (br $lanes)))
    (block $tail_done
      (loop $tail
        (br_if $tail_done (i32.ge_u (local.get $out) (local.get $end)))
        (f32.store (local.get $out)
          (f32.div (f32.add (f32.load (local.get $a)) (f32.load (local.get $b))) (local.get $d)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (br $tail))))

  ;; out[i] = (out[i] + a[i]) / d
  (func (export "accumulate") (param $out i32) (param $a i32) (param $n i32) (param $d f32)
    (local $end i32) (local $vend i32) (local $dv v128)
    (local.set $dv (f32x4.splat (local.get $d)))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $vend
      (i32.add (local.get $out) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done
      (loop $lanes
        (br_if $done (i32.ge_u (local.get $out) (local.get $vend)))
        (v128.store (local.get $out)
          (f32x4.div
            (f32x4.add (v128.load (local.get $out)) (v128.load (local.get $a)))
            (local.get $dv)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (br $lanes)))
    (block $tail_done
      (loop $tail
        (br_if $tail_done (i32.ge_u (local.get $out) (local.get $end)))
        (f32.store (local.get $out)
          (f32.div (f32.add (f32.load (local.get $out)) (f32.load (local.get $a))) (local.get $d)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (br $tail)))))
