// Command dualrun is the seed story "dual values: add or set?" (gorgonia/gorgonia#543): the
// training step runs the graph twice with dual values bound before solver.Step (once to log the
// loss, once to train). Dual values add, so the solver receives 2g. With -buggy the extra RunAll
// is there; without it the step is one RunAll, one solver.Step (which zeroes them), one Reset.
// gradcheck reports it as step.applied: the solver received twice the true gradient.
package main

import (
	"flag"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var buggy = flag.Bool("buggy", false, "run the graph twice before solver.Step")

func build(dt tensor.Dtype) (*gc.Model, error) {
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 4), G.WithName("x"), G.WithValue(data.Batch(dt, 16, 4, 1)))
	y := G.NewMatrix(g, dt, G.WithShape(16, 2), G.WithName("y"), G.WithValue(data.Batch(dt, 16, 2, 2)))
	w1 := G.NewMatrix(g, dt, G.WithShape(4, 8), G.WithName("fc1.weight"), G.WithInit(G.GlorotU(1)))
	w2 := G.NewMatrix(g, dt, G.WithShape(8, 2), G.WithName("fc2.weight"), G.WithInit(G.GlorotU(1)))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2)), y))))))
	learnables := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, learnables...); err != nil {
		return nil, err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	solver := gc.Observe(G.NewVanillaSolver(G.WithLearnRate(0.1)))
	return &gc.Model{Cost: cost, Learnables: learnables, Step: func() (gc.Logged, error) {
		if *buggy { // "evaluate the loss for the log first": the dual values now hold g
			if err := vm.RunAll(); err != nil {
				return gc.Logged{}, err
			}
			vm.Reset()
		}
		defer vm.Reset()
		if err := vm.RunAll(); err != nil { // with -buggy they hold g + g
			return gc.Logged{}, err
		}
		return gc.Logged{}, solver.Step(G.NodesToValueGrads(learnables))
	}}, nil
}

func main() {
	flag.Parse()
	gc.Serve(build)
}
