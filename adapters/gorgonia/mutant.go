package main

// mutant_sin: a Gorgonia op whose forward is sin and whose symbolic derivative is deliberately
// wrong by a factor 1.001 (cos(x) * 1.001).  The adapter lists it only when
// GRADCHECK_GORGONIA_MUTANT=1, so the test suite can show that a wrong rule inside Gorgonia's
// own differentiation machinery is caught through the protocol.

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type mutantSinOp struct{}

func (mutantSinOp) Arity() int { return 1 }
func (mutantSinOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (mutantSinOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (mutantSinOp) ReturnsPtr() bool      { return false }
func (mutantSinOp) CallsExtern() bool     { return false }
func (mutantSinOp) OverwritesInput() int  { return -1 }
func (mutantSinOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "mutant_sin") }
func (op mutantSinOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (mutantSinOp) String() string { return "mutant_sin" }

func (mutantSinOp) Do(in ...G.Value) (G.Value, error) {
	switch x := in[0].(type) {
	case *G.F64:
		return G.NewF64(math.Sin(float64(*x))), nil
	case *G.F32:
		return G.NewF32(float32(math.Sin(float64(*x)))), nil
	case *tensor.Dense:
		out := x.Clone().(*tensor.Dense)
		switch d := out.Data().(type) {
		case []float64:
			for i := range d {
				d[i] = math.Sin(d[i])
			}
		case []float32:
			for i := range d {
				d[i] = float32(math.Sin(float64(d[i])))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("mutant_sin: unexpected input %T", in[0])
}

func (mutantSinOp) DiffWRT(int) []bool { return []bool{true} }

func (mutantSinOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	c, err := G.Cos(in[0])
	if err != nil {
		return nil, err
	}
	var k *G.Node
	if in[0].Dtype() == tensor.Float32 {
		k = G.NewConstant(float32(1.001))
	} else {
		k = G.NewConstant(1.001)
	}
	if c, err = G.HadamardProd(c, k); err != nil {
		return nil, err
	}
	d, err := G.HadamardProd(grad, c)
	return G.Nodes{d}, err
}

func mutantSin(x *G.Node) (*G.Node, error) { return G.ApplyOp(mutantSinOp{}, x) }
