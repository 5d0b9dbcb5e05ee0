//go:build !purego

#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// Dot product with AVX2+FMA: four independent 8-wide accumulators (32
// floats per iteration) hide the FMA latency; then an 8-wide loop and a
// scalar tail. The caller checks the CPU supports AVX2 and FMA.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop32:
	CMPQ CX, $32
	JL   loop8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  loop32

loop8:
	CMPQ CX, $8
	JL   reduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  loop8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

tail:
	CMPQ CX, $0
	JE   done
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  tail

done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotHalfAVX2(a *float32, b *uint16, n int) float32
// dotAVX2 with b in binary16: VCVTPH2PS widens 8 halves as it loads them
// (F16C), so b costs half the memory traffic of float32. The caller checks
// the CPU supports AVX2, FMA and F16C.
TEXT ·dotHalfAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

hloop32:
	CMPQ CX, $32
	JL   hloop8
	VCVTPH2PS (DI), Y4
	VCVTPH2PS 16(DI), Y5
	VCVTPH2PS 32(DI), Y6
	VCVTPH2PS 48(DI), Y7
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JMP  hloop32

hloop8:
	CMPQ CX, $8
	JL   hreduce
	VCVTPH2PS (DI), Y4
	VFMADD231PS (SI), Y4, Y0
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JMP  hloop8

hreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

htail:
	CMPQ CX, $0
	JE   hdone
	MOVWLZX (DI), AX
	VMOVD AX, X1
	VCVTPH2PS X1, X1
	VFMADD231SS (SI), X1, X0
	ADDQ $4, SI
	ADDQ $2, DI
	DECQ CX
	JMP  htail

hdone:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func prefetchLines(p unsafe.Pointer, n int)
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX

ploop:
	CMPQ CX, $0
	JLE  pdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  ploop

pdone:
	RET

// func cpuidECX1() uint32
TEXT ·cpuidECX1(SB), NOSPLIT, $0-4
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET

// func toHalfF16C(dst *uint16, src *float32, n int)
// Converts n float32 to binary16 with VCVTPS2PH, rounding to nearest even
// (immediate 0), 8 at a time, then one by one. The caller checks F16C.
TEXT ·toHalfF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

cloop8:
	CMPQ CX, $8
	JL   ctail
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JMP  cloop8

ctail:
	CMPQ CX, $0
	JE   cdone
	VMOVSS (SI), X0
	VCVTPS2PH $0, X0, X1
	VMOVD X1, AX
	MOVW AX, (DI)
	ADDQ $4, SI
	ADDQ $2, DI
	DECQ CX
	JMP  ctail

cdone:
	VZEROUPPER
	RET
