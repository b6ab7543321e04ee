// Command letbatch is the other half of the "dual values: add or set?" story: each step first
// rebinds the input to a validation batch with G.Let and runs the machine to log the validation
// loss, then rebinds the training batch and trains. G.Let replaces values, not the dual values'
// gradients, so with -buggy the solver receives g(validation) + g(training). The correct variant
// evaluates the validation batch on a machine without BindDualValues. gradcheck reports the
// stale gradient as step.applied: what the solver received against the true gradient.
package main

import (
	"flag"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var buggy = flag.Bool("buggy", false, "log the validation loss on the training machine")

func build(dt tensor.Dtype) (*gc.Model, error) {
	g := G.NewGraph()
	train, val := data.Batch(dt, 16, 4, 1), data.Batch(dt, 16, 4, 5)
	x := G.NewMatrix(g, dt, G.WithShape(16, 4), G.WithName("x"), G.WithValue(train))
	y := G.NewMatrix(g, dt, G.WithShape(16, 2), G.WithName("y"), G.WithValue(data.Batch(dt, 16, 2, 2)))
	w1 := G.NewMatrix(g, dt, G.WithShape(4, 8), G.WithName("fc1.weight"), G.WithInit(G.GlorotU(1)))
	w2 := G.NewMatrix(g, dt, G.WithShape(8, 2), G.WithName("fc2.weight"), G.WithInit(G.GlorotU(1)))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2)), y))))))
	learnables := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, learnables...); err != nil {
		return nil, err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	eval := G.NewTapeMachine(g) // no dual values: evaluation only
	if *buggy {
		eval = vm
	}
	solver := gc.Observe(G.NewVanillaSolver(G.WithLearnRate(0.1)))
	return &gc.Model{Cost: cost, Learnables: learnables, Step: func() (gc.Logged, error) {
		if err := G.Let(x, val); err != nil { // the validation loss for the log
			return gc.Logged{}, err
		}
		if err := eval.RunAll(); err != nil {
			return gc.Logged{}, err
		}
		eval.Reset()
		if err := G.Let(x, train); err != nil {
			return gc.Logged{}, err
		}
		defer vm.Reset()
		if err := vm.RunAll(); err != nil {
			return gc.Logged{}, err
		}
		return gc.Logged{}, solver.Step(G.NodesToValueGrads(learnables))
	}}, nil
}

func main() {
	flag.Parse()
	gc.Serve(build)
}
