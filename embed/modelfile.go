package embed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// The layout of use-lite-en.bin is documented in internal/genweights.
const (
	modelMagic   = "BWUSELT\x00"
	modelVersion = 1
)

// tensor holds float32 data, or for half-float tensors the raw halves (data
// is then nil until get widens it).
type tensor struct {
	shape []int
	data  []float32
	half  []uint16
}

type modelFile struct {
	tensors map[string]tensor
	pieces  []string
	scores  []float32
}

// parseModel decodes the file, widening half floats to float32.
func parseModel(b []byte) (*modelFile, error) {
	le := binary.LittleEndian
	r := reader{b: b}
	if string(r.bytes(8)) != modelMagic {
		return nil, errors.New("parse model: bad magic")
	}
	if v := r.u32(); v != modelVersion {
		return nil, fmt.Errorf("parse model: version %d, want %d", v, modelVersion)
	}
	r.u32() // flags
	nt, np := int(r.u32()), int(r.u32())
	dataOff := int(r.u64())
	m := &modelFile{tensors: make(map[string]tensor, nt)}
	for range nt {
		name := string(r.bytes(int(r.u16())))
		dt := r.bytes(1)
		nd := int(r.bytes(1)[0])
		shape := make([]int, nd)
		n := 1
		for i := range shape {
			shape[i] = int(r.u32())
			n *= shape[i]
		}
		off, size := int(r.u64()), int(r.u64())
		if r.err != nil {
			break
		}
		start := dataOff + off
		if start < 0 || size < 0 || start+size > len(b) {
			return nil, fmt.Errorf("parse model: tensor %s out of range", name)
		}
		raw := b[start : start+size]
		t := tensor{shape: shape}
		switch dt[0] {
		case 0:
			if size != 4*n {
				return nil, fmt.Errorf("parse model: tensor %s has %d bytes, want %d", name, size, 4*n)
			}
			t.data = make([]float32, n)
			for i := range t.data {
				t.data[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
			}
		case 1:
			if size != 2*n {
				return nil, fmt.Errorf("parse model: tensor %s has %d bytes, want %d", name, size, 2*n)
			}
			t.half = make([]uint16, n)
			for i := range t.half {
				t.half[i] = le.Uint16(raw[2*i:])
			}
		default:
			return nil, fmt.Errorf("parse model: tensor %s has dtype %d", name, dt[0])
		}
		m.tensors[name] = t
	}
	m.pieces = make([]string, 0, np)
	m.scores = make([]float32, 0, np)
	for range np {
		s := string(r.bytes(int(r.u16())))
		m.pieces = append(m.pieces, s)
		m.scores = append(m.scores, math.Float32frombits(r.u32()))
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// get returns the named tensor as float32 after checking its shape,
// widening half floats.
func (m *modelFile) get(name string, shape ...int) ([]float32, error) {
	t, err := m.lookup(name, shape)
	if err != nil {
		return nil, err
	}
	if t.data == nil {
		t.data = make([]float32, len(t.half))
		for i, h := range t.half {
			t.data[i] = f16ToF32(h)
		}
	}
	return t.data, nil
}

// getHalf returns the named tensor's half floats, or nil if it is stored
// as float32.
func (m *modelFile) getHalf(name string, shape ...int) ([]uint16, error) {
	t, err := m.lookup(name, shape)
	if err != nil {
		return nil, err
	}
	return t.half, nil
}

func (m *modelFile) lookup(name string, shape []int) (*tensor, error) {
	t, ok := m.tensors[name]
	if !ok {
		return nil, fmt.Errorf("load model: tensor %s missing", name)
	}
	if len(t.shape) != len(shape) {
		return nil, fmt.Errorf("load model: tensor %s has shape %v, want %v", name, t.shape, shape)
	}
	for i := range shape {
		if t.shape[i] != shape[i] {
			return nil, fmt.Errorf("load model: tensor %s has shape %v, want %v", name, t.shape, shape)
		}
	}
	return &t, nil
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || r.off+n > len(r.b) {
		if r.err == nil {
			r.err = errors.New("parse model: truncated header")
		}
		return make([]byte, max(n, 0))
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.bytes(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.bytes(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.bytes(8)) }

// f16ToF32 widens an IEEE 754 binary16 value exactly (github.com/x448/float16).
func f16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }
