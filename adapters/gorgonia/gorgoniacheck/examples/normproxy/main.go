// Command normproxy is the seed story "is the logged gradient norm the true global L2 norm?":
// the training step logs a norm computed in the graph. With -buggy it is sqrt(|cost|), a proxy
// from the loss; without it, sqrt of the sum of the gradients' squares over every learnable.
// gradcheck reports the proxy as grad_norm: the logged value against the true global L2 norm.
package main

import (
	"flag"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var buggy = flag.Bool("buggy", false, "log sqrt(|cost|) as the gradient norm")

func build(dt tensor.Dtype) (*gc.Model, error) {
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 4), G.WithName("x"), G.WithValue(data.Batch(dt, 16, 4, 1)))
	y := G.NewMatrix(g, dt, G.WithShape(16, 2), G.WithName("y"), G.WithValue(data.Batch(dt, 16, 2, 2)))
	w1 := G.NewMatrix(g, dt, G.WithShape(4, 8), G.WithName("fc1.weight"), G.WithInit(G.GlorotU(1)))
	w2 := G.NewMatrix(g, dt, G.WithShape(8, 2), G.WithName("fc2.weight"), G.WithInit(G.GlorotU(1)))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2)), y))))))
	learnables := G.Nodes{w1, w2}
	grads, err := G.Grad(cost, learnables...)
	if err != nil {
		return nil, err
	}
	sumsq := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(grads[0])))), G.Must(G.Sum(G.Must(G.Square(grads[1]))))))
	norm := G.Must(G.Sqrt(sumsq))
	if *buggy {
		norm = G.Must(G.Sqrt(G.Must(G.Abs(cost))))
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	solver := gc.Observe(G.NewVanillaSolver(G.WithLearnRate(0.1)))
	return &gc.Model{Cost: cost, Learnables: learnables, Step: func() (gc.Logged, error) {
		defer vm.Reset()
		if err := vm.RunAll(); err != nil {
			return gc.Logged{}, err
		}
		logged := gc.Norm(data.Scalar(norm.Value())) // what the training log prints
		return logged, solver.Step(G.NodesToValueGrads(learnables))
	}}, nil
}

func main() {
	flag.Parse()
	gc.Serve(build)
}
