// Command mlp is the main example of gorgoniacheck: a user's two-layer perceptron, its fixed
// batch, its mean squared error and its training step (VanillaSolver), checked by gradcheck.
//
//	go run ./gorgoniacheck/examples/mlp                      # starts the harness, exits 0/1/2
//	gradcheck model --command "bin/gc-mlp"                   # the harness starts it
package main

import (
	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func build(dt tensor.Dtype) (*gc.Model, error) {
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 4), G.WithName("x"), G.WithValue(data.Batch(dt, 16, 4, 1)))
	y := G.NewMatrix(g, dt, G.WithShape(16, 2), G.WithName("y"), G.WithValue(data.Batch(dt, 16, 2, 2)))
	w1 := G.NewMatrix(g, dt, G.WithShape(4, 8), G.WithName("fc1.weight"), G.WithInit(G.GlorotU(1)))
	b1 := G.NewVector(g, dt, G.WithShape(8), G.WithName("fc1.bias"), G.WithInit(G.Uniform(-0.1, 0.1)))
	w2 := G.NewMatrix(g, dt, G.WithShape(8, 2), G.WithName("fc2.weight"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(h, w2)), y))))))
	learnables := G.Nodes{w1, b1, w2}
	if _, err := G.Grad(cost, learnables...); err != nil {
		return nil, err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	solver := gc.Observe(G.NewVanillaSolver(G.WithLearnRate(0.1)))
	return &gc.Model{Cost: cost, Learnables: learnables, Step: func() (gc.Logged, error) {
		defer vm.Reset() // one RunAll, one solver.Step (which zeroes the dual values), Reset
		if err := vm.RunAll(); err != nil {
			return gc.Logged{}, err
		}
		return gc.Logged{}, solver.Step(G.NodesToValueGrads(learnables))
	}}, nil
}

func main() { gc.Serve(build) }
