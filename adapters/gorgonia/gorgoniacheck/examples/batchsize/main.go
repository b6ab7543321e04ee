// Command batchsize is the VanillaSolver's batch size on a mean cost: WithBatchSize(B) divides
// the gradient by B, which is right for a cost summed over the B examples and makes the rate
// lr/B on a mean cost. The user declares the rule they intend (Model.Optimizer: vanilla, lr,
// batch 1), so the check compares the update with that intent; with -buggy the solver has
// WithBatchSize(16) on the mean cost. gradcheck reports it as step.effective: every learnable
// moved 1/16 of the declared step.
package main

import (
	"flag"

	gc "github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck"
	"github.com/gradcheck/gradcheck/adapters/gorgonia/gorgoniacheck/examples/internal/data"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var buggy = flag.Bool("buggy", false, "WithBatchSize(16) on a mean cost")

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
	opts := []G.SolverOpt{G.WithLearnRate(0.1)}
	if *buggy {
		opts = append(opts, G.WithBatchSize(16)) // the cost is already a mean over the 16 rows
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(learnables...))
	solver := gc.Observe(G.NewVanillaSolver(opts...))
	return &gc.Model{Cost: cost, Learnables: learnables, Optimizer: gc.Vanilla{LR: 0.1},
		Step: func() (gc.Logged, error) {
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
