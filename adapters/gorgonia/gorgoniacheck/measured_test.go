package gorgoniacheck

// Measured facts of gorgonia v0.9.18 that the package relies on (docs/engines/gorgonia-user.md).

import (
	"fmt"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ExecuteFwdOnly is for the LispMachine only: on a TapeMachine it panics, so forward-only
// evaluation is a second TapeMachine, without BindDualValues, on the cost's subgraph.
func TestExecuteFwdOnlyPanicsOnATapeMachine(t *testing.T) {
	g := G.NewGraph()
	w := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("w"), G.WithValue(dense(tensor.Float64, []int{2}, []float64{1, 2})))
	G.Must(G.Sum(G.Must(G.Square(w))))
	msg := func() (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg = strings.SplitN(fmtAny(r), " for ", 2)[0] // "ExecuteFwdOnly not yet implemented"
			}
		}()
		G.NewTapeMachine(g, G.ExecuteFwdOnly())
		return ""
	}()
	if msg == "" {
		t.Fatal("ExecuteFwdOnly on a TapeMachine no longer panics: the package could use it")
	}
	t.Logf("NewTapeMachine(g, ExecuteFwdOnly()) panics: %s", msg)
}

// The package's machines leave the user's dual values as they were: the user's machine has run
// once (the dual values hold g), the package answers model.loss, model.grads and model.line, and
// the user's next RunAll accumulates to exactly 2g.
func TestPackageMachinesLeaveDualValuesAlone(t *testing.T) {
	var m *Model
	c := converse(t, tinyBuilder(tinyOpts{lastModel: &m}))
	c.ask("model.describe", map[string]interface{}{"dtype": "float64"})
	w := m.Learnables[0]
	vm := G.NewTapeMachine(w.Graph(), G.BindDualValues(m.Learnables...))
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	vm.Reset()
	gv, _ := w.Grad()
	once, _ := valueFloats(gv)
	c.ask("model.loss", map[string]interface{}{"dtype": "float64"})
	c.ask("model.grads", map[string]interface{}{"dtype": "float64"})
	c.ask("model.line", map[string]interface{}{"dtype": "float64", "t": []float64{0.5}, "direction": map[string]interface{}{
		"seed": 2, "scope": []interface{}{map[string]interface{}{"name": "w"}}}})
	gv, _ = w.Grad()
	still, _ := valueFloats(gv)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	gv, _ = w.Grad()
	twice, _ := valueFloats(gv)
	want := tinyGrad()["w"]
	for j := range want {
		if once[j] != want[j] || still[j] != want[j] || twice[j] != 2*want[j] {
			t.Errorf("w[%d]: dual value %v after the user's run, %v after the package's, %v after a second user run; g = %v",
				j, once[j], still[j], twice[j], want[j])
		}
	}
}

func fmtAny(r interface{}) string {
	if e, ok := r.(error); ok {
		return e.Error()
	}
	return fmt.Sprint(r)
}

// A learnable used twice (fan-out): its gradient node is the sum of both contributions, the same
// as the dual value a BindDualValues run gives (dz/dw = a + c).
func TestFanOutGradientNodeIsTheSum(t *testing.T) {
	var m *Model
	c := converse(t, func(dt tensor.Dtype) (*Model, error) {
		g := G.NewGraph()
		w := G.NewVector(g, dt, G.WithShape(2), G.WithName("w"), G.WithValue(dense(dt, []int{2}, []float64{0.5, 3})))
		a := G.NewVector(g, dt, G.WithShape(2), G.WithName("a"), G.WithValue(dense(dt, []int{2}, []float64{1.5, -2})))
		cc := G.NewVector(g, dt, G.WithShape(2), G.WithName("c"), G.WithValue(dense(dt, []int{2}, []float64{4, 0.25})))
		cost := G.Must(G.Sum(G.Must(G.Add(G.Must(G.HadamardProd(w, a)), G.Must(G.HadamardProd(w, cc))))))
		m = &Model{Cost: cost, Learnables: G.Nodes{w}}
		return m, nil
	})
	r := c.ask("model.grads", map[string]interface{}{"dtype": "float64", "arrays": true})
	got := decode(t, r["grads"].(map[string]interface{})["w"].(map[string]interface{})["array"])
	if fmt.Sprint(got) != "[5.5 -1.75]" {
		t.Errorf("fresh gradient %v, want [5.5 -1.75]", got)
	}
	w := m.Learnables[0]
	vm := G.NewTapeMachine(w.Graph(), G.BindDualValues(w))
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	dv, _ := w.Grad()
	if d, _ := valueFloats(dv); fmt.Sprint(d) != "[5.5 -1.75]" {
		t.Errorf("dual value %v, want [5.5 -1.75]", d)
	}
}

// The forward-only machine compiles on SubgraphRoots(cost), without the gradient nodes, and
// gives the full machine's cost bitwise.
func TestForwardMachineIsTheCostsSubgraph(t *testing.T) {
	bd, err := newBuild(tinyBuilder(tinyOpts{}), tensor.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bd.fwd == bd.full {
		t.Fatal("the forward machine fell back to the whole graph")
	}
	fwd, err := bd.loss()
	if err != nil {
		t.Fatal(err)
	}
	_, full, err := bd.freshGrads()
	if err != nil {
		t.Fatal(err)
	}
	if fwd != full {
		t.Errorf("forward machine %v, full machine %v", fwd, full)
	}
}

// The other forward-only route, G.CompileFunction(g, inputs, Nodes{cost}) run with
// G.WithPrecompiled, gives the same cost (the package uses SubgraphRoots, which needs no list of
// inputs).
func TestCompileFunctionAlsoRunsTheForward(t *testing.T) {
	var m *Model
	if _, err := tinyBuilder(tinyOpts{lastModel: &m})(tensor.Float64); err != nil {
		t.Fatal(err)
	}
	g := m.Cost.Graph()
	prog, locMap, err := G.CompileFunction(g, G.Nodes{m.Learnables[0], g.ByName("x")[0], m.Learnables[1]}, G.Nodes{m.Cost})
	if err != nil {
		t.Fatalf("CompileFunction: %v", err)
	}
	if err := G.NewTapeMachine(g, G.WithPrecompiled(prog, locMap)).RunAll(); err != nil {
		t.Fatalf("WithPrecompiled: %v", err)
	}
	if got, _ := scalarOf(m.Cost); got != tinyLoss(tinyW, tinyB) {
		t.Errorf("cost %v, want %v", got, tinyLoss(tinyW, tinyB))
	}
}
