package gorgoniacheck

// Reading and writing a learnable's values in place (what Gorgonia's solvers do), so every
// machine bound to the node sees them; saving and restoring them bitwise.

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// valueFloats returns a float64 copy of a Gorgonia value's elements (C order).
func valueFloats(v G.Value) ([]float64, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("no value")
	case *G.F64:
		return []float64{float64(*x)}, nil
	case *G.F32:
		return []float64{float64(*x)}, nil
	case tensor.Tensor:
		if d, ok := x.(*tensor.Dense); ok && d.IsMaterializable() {
			x = d.Materialize()
		}
		switch data := x.Data().(type) {
		case []float64:
			return append([]float64(nil), data...), nil
		case []float32:
			out := make([]float64, len(data))
			for i, f := range data {
				out[i] = float64(f)
			}
			return out, nil
		case float64:
			return []float64{data}, nil
		case float32:
			return []float64{float64(data)}, nil
		}
		return nil, fmt.Errorf("unsupported tensor data %T", x.Data())
	}
	return nil, fmt.Errorf("unsupported value %T", v)
}

// param is a learnable's storage: exactly one of f64, f32 is set (the backing slice, or a
// one-element view of a scalar node's value).
type param struct {
	node  *G.Node
	shape []int
	f64   []float64
	f32   []float32
	s64   *G.F64
	s32   *G.F32
}

func paramOf(n *G.Node) (*param, error) {
	p := &param{node: n}
	switch x := n.Value().(type) {
	case *G.F64:
		p.s64, p.shape = x, []int{}
	case *G.F32:
		p.s32, p.shape = x, []int{}
	case *tensor.Dense:
		if x.IsMaterializable() || x.IsView() {
			return nil, fmt.Errorf("learnable %s holds a view; give it its own tensor", n.Name())
		}
		p.shape = []int(x.Shape().Clone())
		if x.Shape().IsScalar() {
			p.shape = []int{}
		}
		switch d := x.Data().(type) {
		case []float64:
			p.f64 = d
		case []float32:
			p.f32 = d
		default:
			return nil, fmt.Errorf("learnable %s holds %T: float64 or float32 only", n.Name(), x.Data())
		}
	case nil:
		return nil, fmt.Errorf("learnable %s has no value (bind one with G.WithValue or G.WithInit)", n.Name())
	default:
		return nil, fmt.Errorf("learnable %s holds %T", n.Name(), x)
	}
	return p, nil
}

func (p *param) size() int {
	switch {
	case p.f64 != nil:
		return len(p.f64)
	case p.f32 != nil:
		return len(p.f32)
	}
	return 1
}

func (p *param) get(j int) float64 {
	switch {
	case p.f64 != nil:
		return p.f64[j]
	case p.f32 != nil:
		return float64(p.f32[j])
	case p.s64 != nil:
		return float64(*p.s64)
	}
	return float64(*p.s32)
}

// set stores x rounded to the learnable's dtype and returns the stored value.
func (p *param) set(j int, x float64) float64 {
	switch {
	case p.f64 != nil:
		p.f64[j] = x
		return x
	case p.f32 != nil:
		p.f32[j] = float32(x)
		return float64(p.f32[j])
	case p.s64 != nil:
		*p.s64 = G.F64(x)
		return x
	}
	*p.s32 = G.F32(float32(x))
	return float64(float32(x))
}

func (p *param) floats() []float64 {
	out := make([]float64, p.size())
	for j := range out {
		out[j] = p.get(j)
	}
	return out
}

// snapshot is a bitwise copy of a learnable's values.
type snapshot struct {
	f64 []float64
	f32 []float32
}

func (p *param) save() snapshot {
	switch {
	case p.f64 != nil:
		return snapshot{f64: append([]float64(nil), p.f64...)}
	case p.f32 != nil:
		return snapshot{f32: append([]float32(nil), p.f32...)}
	case p.s64 != nil:
		return snapshot{f64: []float64{float64(*p.s64)}}
	}
	return snapshot{f32: []float32{float32(*p.s32)}}
}

func (p *param) restore(s snapshot) {
	switch {
	case p.f64 != nil:
		copy(p.f64, s.f64)
	case p.f32 != nil:
		copy(p.f32, s.f32)
	case p.s64 != nil:
		*p.s64 = G.F64(s.f64[0])
	default:
		*p.s32 = G.F32(s.f32[0])
	}
}
