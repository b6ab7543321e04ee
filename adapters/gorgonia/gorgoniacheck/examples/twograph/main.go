// Command twograph is the seed story "does the gradient flow through my preprocessing?" in
// Gorgonia: with -buggy the model is a pipeline of two graphs, the first one's output copied
// into the second one's input node (a host round trip); gorgonia.Grad of the second graph's
// cost cannot reach fc1.weight. Without -buggy it is one graph. gradcheck reports the pipeline
// as flow[fc1.weight]: the cost depends on it (finite differences through Forward), no gradient
// reaches it.
package main

import (
	"flag"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var buggy = flag.Bool("buggy", false, "two graphs, the hidden layer copied between them")

func build(dt tensor.Dtype) (*gc.Model, error) {
	g1, g2 := G.NewGraph(), G.NewGraph()
	x := G.NewMatrix(g1, dt, G.WithShape(16, 4), G.WithName("x"), G.WithValue(data.Batch(dt, 16, 4, 1)))
	w1 := G.NewMatrix(g1, dt, G.WithShape(4, 8), G.WithName("fc1.weight"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
	in := h
	if *buggy {
		in = G.NewMatrix(g2, dt, G.WithShape(16, 8), G.WithName("h_host"))
	} else {
		g2 = g1
	}
	y := G.NewMatrix(g2, dt, G.WithShape(16, 2), G.WithName("y"), G.WithValue(data.Batch(dt, 16, 2, 2)))
	w2 := G.NewMatrix(g2, dt, G.WithShape(8, 2), G.WithName("fc2.weight"), G.WithInit(G.GlorotU(1)))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(in, w2)), y))))))
	m := &gc.Model{Cost: cost, Learnables: G.Nodes{w1, w2}}
	if *buggy {
		vm1, vm2 := G.NewTapeMachine(g1), G.NewTapeMachine(g2)
		m.Forward = func() (float64, error) { // run the first graph, copy, run the second
			if err := vm1.RunAll(); err != nil {
				return 0, err
			}
			defer vm1.Reset()
			defer vm2.Reset()
			if err := G.Let(in, h.Value().(*tensor.Dense).Clone().(*tensor.Dense)); err != nil {
				return 0, err
			}
			if err := vm2.RunAll(); err != nil {
				return 0, err
			}
			return data.Scalar(cost.Value()), nil
		}
	}
	return m, nil
}

func main() {
	flag.Parse()
	gc.Serve(build)
}
