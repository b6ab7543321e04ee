package gorgoniacheck

// One build of the user's model in one dtype, and what the package runs on it: the forward
// (the user's Forward, else a machine of the package's own on the cost's subgraph, without dual
// values) and fresh gradients (a machine on the cost's graph without BindDualValues, reading each
// learnable's gradient node: the dual values the user's machine and solver use are not touched).

import (
	"fmt"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type build struct {
	dt        tensor.Dtype
	model     *Model
	knobs     []*knob
	observers []*Observed
	names     []string
	nodes     map[string]*G.Node
	gradOf    map[string]*G.Node // gradient node per learnable name; absent: no gradient
	refused   string             // what gorgonia.Grad refused, quoted in the gradients' notes
	fwd       G.VM               // forward-only machine (nil: the user's Forward)
	full      G.VM               // the cost and its gradient nodes, no dual values
	theta0    map[string]snapshot
	grads     map[string][]float64 // fresh gradients at theta0 (nil until asked)
	loss0     float64
	noted     map[string]bool // notes already written to stderr
}

func dtypeName(dt tensor.Dtype) string {
	if dt == tensor.Float32 {
		return "float32"
	}
	return "float64"
}

// newBuild calls the builder in dt and stamps stamp (values by name, from the first build) in.
func newBuild(b Builder, dt tensor.Dtype, stamp map[string][]float64) (*build, error) {
	m, c, err := collect(dtypeName(dt), func() (*Model, error) { return b(dt) })
	if err != nil {
		return nil, err
	}
	if m == nil || m.Cost == nil {
		return nil, fmt.Errorf("the builder returned no Model.Cost")
	}
	if len(m.Learnables) == 0 {
		return nil, fmt.Errorf("the builder returned no Model.Learnables")
	}
	bd := &build{dt: dt, model: m, knobs: c.knobs, observers: c.observers,
		nodes: map[string]*G.Node{}, gradOf: map[string]*G.Node{}}
	if m.ClipNorm != nil {
		if k, ok := m.ClipNorm.(*knob); ok && !bd.hasKnob(k) {
			bd.knobs = append(bd.knobs, k)
		}
	}
	for _, n := range m.Learnables {
		name := n.Name()
		if _, dup := bd.nodes[name]; dup {
			return nil, fmt.Errorf("two learnables are named %q: name them with G.WithName", name)
		}
		bd.names = append(bd.names, name)
		bd.nodes[name] = n
		if _, err := paramOf(n); err != nil {
			return nil, err
		}
	}
	for name, vals := range stamp {
		n, ok := bd.nodes[name]
		if !ok {
			return nil, fmt.Errorf("the %s build has no learnable %s (the first build had it)", dtypeName(dt), name)
		}
		p, _ := paramOf(n)
		if p.size() != len(vals) {
			return nil, fmt.Errorf("learnable %s has %d elements in %s, %d in the first build", name, p.size(), dtypeName(dt), len(vals))
		}
		for j, v := range vals {
			p.set(j, v)
		}
	}
	if err := bd.prepare(); err != nil {
		return nil, err
	}
	bd.theta0 = bd.save()
	return bd, nil
}

func (bd *build) hasKnob(k0 *knob) bool {
	for _, k := range bd.knobs {
		if k == k0 {
			return true
		}
	}
	return false
}

// prepare finds (or, when the user did not call gorgonia.Grad, adds) the gradient nodes and
// compiles the package's machines.
func (bd *build) prepare() error {
	cost := bd.model.Cost
	g := cost.Graph()
	inGraph := G.Nodes{}
	called := false
	for _, name := range bd.names {
		n := bd.nodes[name]
		if n.Graph() != g {
			continue // another graph (a pipeline): no gradient reaches it from this cost
		}
		inGraph = append(inGraph, n)
		if n.Deriv() != nil {
			called = true
		}
	}
	if !called && len(inGraph) > 0 {
		if err := bd.grad(inGraph); err != nil {
			return err
		}
	}
	for _, name := range bd.names {
		if d := bd.nodes[name].Deriv(); d != nil && d.Graph() == g {
			bd.gradOf[name] = d
		}
	}
	var err error
	if bd.full, err = tapeMachine(g); err != nil {
		return fmt.Errorf("compiling the cost's graph: %v", err)
	}
	if bd.model.Forward == nil {
		if bd.fwd, err = tapeMachine(g.SubgraphRoots(cost)); err != nil {
			bd.fwd = bd.full // the whole graph computes the cost too
		}
	}
	return nil
}

// grad calls gorgonia.Grad for the learnables in the cost's graph; the ones it refuses
// (SymDiffError, "Non Differentiable WRTs") are left out and named in refused.
func (bd *build) grad(wrt G.Nodes) error {
	_, err := G.Grad(bd.model.Cost, wrt...)
	if err == nil {
		return nil
	}
	se, ok := err.(G.SymDiffError)
	if !ok {
		return fmt.Errorf("gorgonia.Grad: %v", err)
	}
	bad, names := map[*G.Node]bool{}, []string{}
	for _, n := range se.Nodes() {
		bad[n] = true
		names = append(names, n.Name())
	}
	sort.Strings(names)
	bd.refused = fmt.Sprintf("gorgonia.Grad refused %s (SymDiffError: %v)", strings.Join(names, ", "), se.Error())
	kept := G.Nodes{}
	for _, n := range wrt {
		if !bad[n] {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	if _, err := G.Grad(bd.model.Cost, kept...); err != nil {
		return fmt.Errorf("gorgonia.Grad: %v", err)
	}
	return nil
}

func tapeMachine(g *G.ExprGraph) (vm G.VM, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("NewTapeMachine panicked: %v", r)
		}
	}()
	return G.NewTapeMachine(g), nil
}

func runVM(vm G.VM) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the machine panicked: %v", r)
		}
	}()
	defer vm.Reset()
	return vm.RunAll()
}

func scalarOf(n *G.Node) (float64, error) {
	vals, err := valueFloats(n.Value())
	if err != nil {
		return 0, fmt.Errorf("cost %s: %v", n.Name(), err)
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("cost %s has %d elements: the cost must be a scalar", n.Name(), len(vals))
	}
	return vals[0], nil
}

// loss evaluates the cost at the learnables' current values.
func (bd *build) loss() (l float64, err error) {
	if bd.model.Forward != nil {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("Model.Forward panicked: %v", r)
			}
		}()
		return bd.model.Forward()
	}
	if err := runVM(bd.fwd); err != nil {
		return 0, err
	}
	return scalarOf(bd.model.Cost)
}

// freshGrads computes the gradient at the learnables' current values by name (absent: no
// gradient node), and the loss. The dual values are not touched.
func (bd *build) freshGrads() (map[string][]float64, float64, error) {
	l := 0.0
	var err error
	if bd.model.Forward != nil { // bring a pipeline's inputs up to date first
		if l, err = bd.loss(); err != nil {
			return nil, 0, err
		}
	}
	if err := runVM(bd.full); err != nil {
		return nil, 0, err
	}
	if bd.model.Forward == nil {
		if l, err = scalarOf(bd.model.Cost); err != nil {
			return nil, 0, err
		}
	}
	out := map[string][]float64{}
	for _, name := range bd.names {
		d, ok := bd.gradOf[name]
		if !ok {
			continue
		}
		vals, err := valueFloats(d.Value())
		if err != nil {
			return nil, 0, fmt.Errorf("the gradient of %s: %v", name, err)
		}
		out[name] = vals
	}
	return out, l, nil
}

// gradsAt0 is freshGrads at theta0, computed once per build.
func (bd *build) gradsAt0() (map[string][]float64, float64, error) {
	if bd.grads == nil {
		g, l, err := bd.freshGrads()
		if err != nil {
			return nil, 0, err
		}
		bd.grads, bd.loss0 = g, l
	}
	return bd.grads, bd.loss0, nil
}

func (bd *build) param(name string) *param {
	p, err := paramOf(bd.nodes[name])
	if err != nil {
		panic(err) // checked at build time; a builder that rebinds learnables to views
	}
	return p
}

func (bd *build) save() map[string]snapshot {
	out := map[string]snapshot{}
	for _, name := range bd.names {
		out[name] = bd.param(name).save()
	}
	return out
}

func (bd *build) restore(s map[string]snapshot) {
	for _, name := range bd.names {
		bd.param(name).restore(s[name])
	}
}

func (bd *build) values() map[string][]float64 {
	out := map[string][]float64{}
	for _, name := range bd.names {
		out[name] = bd.param(name).floats()
	}
	return out
}

// unregistered: nodes gorgonia.Grad differentiated that Model.Learnables does not list.
func (bd *build) unregistered() []map[string]interface{} {
	out := []map[string]interface{}{}
	reg := map[*G.Node]bool{}
	for _, n := range bd.nodes {
		reg[n] = true
	}
	for _, n := range bd.model.Cost.Graph().Inputs() {
		if reg[n] || n.Deriv() == nil {
			continue
		}
		shape := []int(n.Shape().Clone())
		if n.IsScalar() {
			shape = []int{}
		}
		out = append(out, map[string]interface{}{"shape": shape, "name": n.Name(),
			"what": "a node gorgonia.Grad differentiates that Model.Learnables does not list"})
	}
	return out
}
