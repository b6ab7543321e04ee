package main

// The op names of gradcheck's catalog (gradcheck/ops, gradcheck/backends/protocol_ops.py)
// mapped to Gorgonia's own operations.  Meanings follow the catalog: elementwise binary ops
// broadcast like NumPy, "sum"/"mean"/"max"/"logsumexp"/"norm" reduce every axis to a 0-d
// array, the *_axis1 reductions and softmax act on the last axis, convolutions are NCHW
// cross-correlations with OIHW weights and a bias.

import (
	"os"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type opFn func(args []*G.Node) (*G.Node, error)

type opDef struct {
	arity int
	fn    opFn
}

func unary(f func(*G.Node) (*G.Node, error)) opDef {
	return opDef{1, func(a []*G.Node) (*G.Node, error) { return f(a[0]) }}
}

type bcastFn func(a, b *G.Node, left, right []byte) (*G.Node, error)
type plainFn func(a, b *G.Node) (*G.Node, error)

// reshapeTo gives n the shape s (a no-op when it has it already).
func reshapeTo(n *G.Node, s tensor.Shape) (*G.Node, error) {
	if n.Shape().Eq(s) {
		return n, nil
	}
	return G.Reshape(n, s)
}

// broadcast applies a binary elementwise op with NumPy broadcasting: equal shapes and a 0-d
// operand go straight to Gorgonia's op; otherwise both operands are brought to the same rank
// (leading 1s) and Gorgonia's Broadcast* op repeats the size-1 axes (gorgonia.Auto).
func broadcast(plain plainFn, bc bcastFn) opDef {
	return opDef{2, func(args []*G.Node) (*G.Node, error) {
		a, b := args[0], args[1]
		as, bs := a.Shape(), b.Shape()
		if as.Eq(bs) || a.IsScalar() || b.IsScalar() {
			return plain(a, b)
		}
		n := as.Dims()
		if bs.Dims() > n {
			n = bs.Dims()
		}
		pad := func(x *G.Node) (*G.Node, error) {
			s := x.Shape()
			if s.Dims() == n {
				return x, nil
			}
			full := make(tensor.Shape, n)
			for i := range full {
				full[i] = 1
			}
			copy(full[n-s.Dims():], s)
			return G.Reshape(x, full)
		}
		var err error
		if a, err = pad(a); err != nil {
			return nil, err
		}
		if b, err = pad(b); err != nil {
			return nil, err
		}
		return G.Auto(bc, a, b)
	}}
}

func lastAxis(n *G.Node) int { return n.Dims() - 1 }

// ravel0d: reduce every axis of x with the single-axis reduction f, to a 0-d node.
func ravel0d(f func(x *G.Node, axis int) (*G.Node, error)) opDef {
	return unary(func(x *G.Node) (*G.Node, error) {
		flat, err := G.Reshape(x, tensor.Shape{x.Shape().TotalSize()})
		if err != nil {
			return nil, err
		}
		out, err := f(flat, 0)
		if err != nil || out.IsScalar() {
			return out, err
		}
		return G.Reshape(out, tensor.ScalarShape())
	})
}

// conv2d(x NCHW, w OIHW, b O) with zero padding and stride, plus the bias.
func conv2d(pad, stride int) opDef {
	return opDef{3, func(a []*G.Node) (*G.Node, error) {
		x, w, b := a[0], a[1], a[2]
		ws := w.Shape()
		y, err := G.Conv2d(x, w, tensor.Shape{ws[2], ws[3]}, []int{pad, pad},
			[]int{stride, stride}, []int{1, 1})
		if err != nil {
			return nil, err
		}
		return addChannelBias(y, b)
	}}
}

// conv1d(x NCW, w OIW, b O) as a 2-D convolution of height 1.
func conv1d(pad, stride int) opDef {
	return opDef{3, func(a []*G.Node) (*G.Node, error) {
		x, w, b := a[0], a[1], a[2]
		xs, ws := x.Shape(), w.Shape()
		x4, err := G.Reshape(x, tensor.Shape{xs[0], xs[1], 1, xs[2]})
		if err != nil {
			return nil, err
		}
		w4, err := G.Reshape(w, tensor.Shape{ws[0], ws[1], 1, ws[2]})
		if err != nil {
			return nil, err
		}
		y, err := G.Conv2d(x4, w4, tensor.Shape{1, ws[2]}, []int{0, pad}, []int{1, stride},
			[]int{1, 1})
		if err != nil {
			return nil, err
		}
		if y, err = addChannelBias(y, b); err != nil {
			return nil, err
		}
		ys := y.Shape()
		return G.Reshape(y, tensor.Shape{ys[0], ys[1], ys[3]})
	}}
}

func addChannelBias(y, b *G.Node) (*G.Node, error) {
	b4, err := G.Reshape(b, tensor.Shape{1, b.Shape()[0], 1, 1})
	if err != nil {
		return nil, err
	}
	return G.Auto(G.BroadcastAdd, y, b4)
}

var ops = map[string]opDef{
	// unary
	"sin":        unary(G.Sin),
	"cos":        unary(G.Cos),
	"tanh":       unary(G.Tanh),
	"exp":        unary(G.Exp),
	"log":        unary(G.Log),
	"log2":       unary(G.Log2),
	"log1p":      unary(G.Log1p),
	"expm1":      unary(G.Expm1),
	"sqrt":       unary(G.Sqrt),
	"rsqrt":      unary(G.InverseSqrt),
	"reciprocal": unary(G.Inverse),
	"square":     unary(G.Square),
	"neg":        unary(G.Neg),
	"abs":        unary(G.Abs),
	"sigmoid":    unary(G.Sigmoid),
	"softplus":   unary(G.Softplus),
	"relu":       unary(G.Rectify),
	// binary, NumPy broadcasting
	"add":        broadcast(G.Add, G.BroadcastAdd),
	"sub":        broadcast(G.Sub, G.BroadcastSub),
	"mul":        broadcast(G.HadamardProd, G.BroadcastHadamardProd),
	"div":        broadcast(G.HadamardDiv, G.BroadcastHadamardDiv),
	"pow":        broadcast(G.Pow, G.BroadcastPow),
	"add_bcast":  broadcast(G.Add, G.BroadcastAdd),
	"mul_bcast":  broadcast(G.HadamardProd, G.BroadcastHadamardProd),
	"div_bcast":  broadcast(G.HadamardDiv, G.BroadcastHadamardDiv),
	"mul_scalar": broadcast(G.HadamardProd, G.BroadcastHadamardProd),
	"maximum":    {2, func(a []*G.Node) (*G.Node, error) { return G.MaxBetween(a[0], a[1]) }},
	"minimum":    {2, func(a []*G.Node) (*G.Node, error) { return G.MinBetween(a[0], a[1]) }},
	// reductions
	"sum":             unary(func(x *G.Node) (*G.Node, error) { return G.Sum(x) }),
	"sum_axis1":       unary(func(x *G.Node) (*G.Node, error) { return G.Sum(x, lastAxis(x)) }),
	"mean":            unary(func(x *G.Node) (*G.Node, error) { return G.Mean(x) }),
	"mean_axis0":      unary(func(x *G.Node) (*G.Node, error) { return G.Mean(x, 0) }),
	"max":             unary(func(x *G.Node) (*G.Node, error) { return G.Max(x) }),
	"max_axis1":       unary(func(x *G.Node) (*G.Node, error) { return G.Max(x, lastAxis(x)) }),
	"logsumexp":       ravel0d(G.LogSumExp),
	"logsumexp_axis1": unary(func(x *G.Node) (*G.Node, error) { return G.LogSumExp(x, lastAxis(x)) }),
	"norm":            ravel0d(func(x *G.Node, axis int) (*G.Node, error) { return G.Norm(x, axis, 2) }),
	"norm_axis1":      unary(func(x *G.Node) (*G.Node, error) { return G.Norm(x, lastAxis(x), 2) }),
	// linear algebra
	"matmul": {2, func(a []*G.Node) (*G.Node, error) { return G.Mul(a[0], a[1]) }},
	// neural-network ops
	"softmax":     unary(func(x *G.Node) (*G.Node, error) { return G.SoftMax(x, lastAxis(x)) }),
	"log_softmax": unary(func(x *G.Node) (*G.Node, error) { return G.LogSoftMax(x, lastAxis(x)) }),
	"linear": {3, func(a []*G.Node) (*G.Node, error) { // x W^T + b
		wt, err := G.Transpose(a[1])
		if err != nil {
			return nil, err
		}
		y, err := G.Mul(a[0], wt)
		if err != nil {
			return nil, err
		}
		return broadcast(G.Add, G.BroadcastAdd).fn([]*G.Node{y, a[2]})
	}},
	"conv2d":              conv2d(0, 1),
	"conv2d_stride2_pad1": conv2d(1, 2),
	"conv1d":              conv1d(0, 1),
	"conv1d_stride2_pad1": conv1d(1, 2),
	"max_pool2d": unary(func(x *G.Node) (*G.Node, error) {
		return G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
	}),
	"max_pool1d_k3s1": unary(func(x *G.Node) (*G.Node, error) {
		s := x.Shape()
		x4, err := G.Reshape(x, tensor.Shape{s[0], s[1], 1, s[2]})
		if err != nil {
			return nil, err
		}
		y, err := G.MaxPool2D(x4, tensor.Shape{1, 3}, []int{0, 0}, []int{1, 1})
		if err != nil {
			return nil, err
		}
		ys := y.Shape()
		return G.Reshape(y, tensor.Shape{ys[0], ys[1], ys[3]})
	}),
}

// The deliberately wrong op of the test suite (mutant.go), listed only when
// GRADCHECK_GORGONIA_MUTANT=1.
func init() {
	if os.Getenv("GRADCHECK_GORGONIA_MUTANT") == "1" {
		ops["mutant_sin"] = unary(mutantSin)
	}
}
