package main

// Gorgonia behaviours measured directly with its API (go test -v ./...): the questions of the
// Gorgonia thread on adding vs setting dual values, and minimal reproducers of the
// discrepancies gradcheck found (docs/engines/gorgonia.md, docs/known-discrepancies.md).
// Each test asserts what v0.9.18 does; a test that starts failing means Gorgonia changed.

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func vec(g *G.ExprGraph, name string, v ...float64) *G.Node {
	return G.NewVector(g, tensor.Float64, G.WithShape(len(v)), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithBacking(append([]float64(nil), v...)))))
}

func grad(t *testing.T, n *G.Node) []float64 {
	t.Helper()
	g, err := n.Grad()
	if err != nil {
		t.Fatal(err)
	}
	return append([]float64(nil), g.Data().([]float64)...)
}

func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// z = sum(a*b + b*c): the thread's example. dz/db = a + c (fan-out sums); a second RunAll
// without solver.Step adds into the dual values; Step applies the sum and zeroes them.
func TestThreadFanOutAccumulateStep(t *testing.T) {
	g := G.NewGraph()
	a, b, c := vec(g, "a", 1.5, -2), vec(g, "b", 0.5, 3), vec(g, "c", 4, 0.25)
	ab := G.Must(G.HadamardProd(a, b))
	bc := G.Must(G.HadamardProd(b, c))
	z := G.Must(G.Sum(G.Must(G.Add(ab, bc))))
	if _, err := G.Grad(z, a, b, c); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(a, b, c))
	defer m.Close()
	run := func() {
		m.Reset()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if gb := grad(t, b); !near(gb, []float64{5.5, -1.75}, 1e-15) {
		t.Fatalf("dz/db = %v, want a + c = [5.5 -1.75]", gb)
	}
	run()
	if gb := grad(t, b); !near(gb, []float64{11, -3.5}, 1e-15) {
		t.Fatalf("after a second RunAll dz/db = %v, want 2 (a + c) (accumulated)", gb)
	}
	t.Logf("RunAll x2 without Step: grad b = %v (2 x (a + c))", grad(t, b))
	s := G.NewVanillaSolver(G.WithLearnRate(0.1))
	if err := s.Step(G.NodesToValueGrads(G.Nodes{a, b, c})); err != nil {
		t.Fatal(err)
	}
	if gb := grad(t, b); !near(gb, []float64{0, 0}, 0) {
		t.Fatalf("after Step grad b = %v, want zeros", gb)
	}
	if bv := b.Value().Data().([]float64); !near(bv, []float64{0.5 - 1.1, 3 + 0.35}, 1e-15) {
		t.Fatalf("after Step b = %v, want b - 0.1 * 2(a + c)", bv)
	}
	t.Logf("after Step: grad b = %v, b = %v", grad(t, b), b.Value())
}

// Rebinding a learnable with gorgonia.Let keeps its dual value's gradient: Let replaces only
// the value (node.bind sets dv.Value), so a RunAll at the new value without Step (or an
// explicit zeroing) adds the new gradient to the stale one.
func TestLetKeepsTheStaleGradient(t *testing.T) {
	g := G.NewGraph()
	w := vec(g, "w", 1, 2)
	x := vec(g, "x", 3, 5)
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Square(w)), x)))) // grad 2 w x
	if _, err := G.Grad(loss, w); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(w))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	first := grad(t, w) // [6 20]
	if err := G.Let(w, tensor.New(tensor.WithBacking([]float64{10, 20}))); err != nil {
		t.Fatal(err)
	}
	if gw := grad(t, w); !near(gw, first, 0) {
		t.Fatalf("right after Let grad w = %v, want the old %v", gw, first)
	}
	m.Reset()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	fresh := []float64{2 * 10 * 3, 2 * 20 * 5}
	got := grad(t, w)
	if !near(got, []float64{first[0] + fresh[0], first[1] + fresh[1]}, 1e-15) {
		t.Fatalf("after Let + RunAll grad w = %v, want stale %v + fresh %v", got, first, fresh)
	}
	t.Logf("Let + RunAll: grad w = %v = stale %v + fresh %v", got, first, fresh)
}

// runGraph runs g once on a fresh TapeMachine.
func runGraph(t *testing.T, g *G.ExprGraph) {
	t.Helper()
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
}

func unaryGrad(t *testing.T, f func(*G.Node) (*G.Node, error), x float64) float64 {
	t.Helper()
	g := G.NewGraph()
	xn := G.NewScalar(g, tensor.Float64, G.WithName("x"), G.WithValue(x))
	y := G.Must(f(xn))
	gr, err := G.Grad(y, xn)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	return gr[0].Value().Data().(float64)
}

// log2DiffExpr divides by x / ln 2 instead of x * ln 2: d/dx log2(x) comes out ln(2)/x.
func TestReproLog2Derivative(t *testing.T) {
	got := unaryGrad(t, G.Log2, 2)
	if want := math.Ln2 / 2; math.Abs(got-want) > 1e-15 {
		t.Fatalf("Grad(Log2)(2) = %v, measured ln2/2 = %v before", got, want)
	}
	t.Logf("Grad(Log2)(2) = %v; true 1/(2 ln 2) = %v", got, 1/(2*math.Ln2))
}

// inverseSqrtDiffExpr computes -g / (2 y^3) for y = x^-1/2; the derivative is -g y^3 / 2.
func TestReproInverseSqrtDerivative(t *testing.T) {
	got := unaryGrad(t, G.InverseSqrt, 4) // y = 0.5
	if want := -1 / (2 * 0.125); math.Abs(got-want) > 1e-15 {
		t.Fatalf("Grad(InverseSqrt)(4) = %v, measured -4 before", got)
	}
	t.Logf("Grad(InverseSqrt)(4) = %v; true -0.5 * 4^-1.5 = %v", got, -0.5*math.Pow(4, -1.5))
}

// LogSumExp returns log(sum(exp(a - max)) + max) instead of log(sum(exp(a - max))) + max,
// and cannot build for a matrix along axis 1 (a - max is not broadcast).
func TestReproLogSumExp(t *testing.T) {
	g := G.NewGraph()
	a := vec(g, "a", 1, 2, 3)
	y := G.Must(G.LogSumExp(a, 0))
	runGraph(t, g)
	got := y.Value().Data().(float64)
	s := math.Exp(-2) + math.Exp(-1) + 1
	if want := math.Log(s + 3); math.Abs(got-want) > 1e-15 {
		t.Fatalf("LogSumExp([1 2 3]) = %v, measured log(s + max) = %v before", got, want)
	}
	t.Logf("LogSumExp([1 2 3]) = %v; true %v", got, math.Log(s)+3)
	g2 := G.NewGraph()
	x := G.NewMatrix(g2, tensor.Float64, G.WithShape(2, 3), G.WithName("x"), G.WithInit(G.Ones()))
	if _, err := G.LogSumExp(x, 1); err == nil {
		t.Fatal("LogSumExp of a 2x3 matrix along axis 1 built; it failed before")
	}
}

// A second gorgonia.Grad in a graph that already holds gradient nodes: Backpropagate skips
// the "previously differentiated" nodes and takes their first gradient node as their gradient.
// For y = tanh(x): Grad(y, x) = 1 - tanh(x)^2 (right), Grad of that again is not
// -2 tanh(x) (1 - tanh(x)^2): tanh's derivative reads the output node y, whose stale gradient
// node (the seed 1) is taken instead of the second pass's contribution.
func TestReproSecondGradReusesTheFirst(t *testing.T) {
	g := G.NewGraph()
	x := G.NewScalar(g, tensor.Float64, G.WithName("x"), G.WithValue(0.5))
	y := G.Must(G.Tanh(x))
	d1, err := G.Grad(y, x)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := G.Grad(d1[0], x)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	first := d1[0].Value().Data().(float64)
	second := d2[0].Value().Data().(float64)
	th := math.Tanh(0.5)
	want1, want2 := 1-th*th, -2*th*(1-th*th)
	if math.Abs(first-want1) > 1e-15 || math.Abs(second-want2) < 1e-6 {
		t.Fatalf("Grad = %v (want %v), Grad of Grad = %v (it was wrong before)", first, want1, second)
	}
	t.Logf("y = tanh(x) at 0.5: Grad = %v (right), Grad of Grad = %v (true %v)", first, second, want2)
}

// gorgonia.org/tensor v0.9.24's softMaxLastDimF64/F32 start each row's max at xArr[0], the
// first element of the whole tensor, not of the row: a row far below the first element
// underflows to exp(...) = 0 everywhere, and softmax gives 0 * inf = NaN (log-softmax -inf).
func TestReproSoftmaxRowMax(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1000, 0, 2, 1}))))
	y := G.Must(G.SoftMax(x, 1))
	runGraph(t, g)
	row := y.Value().Data().([]float64)[2:]
	if !math.IsNaN(row[0]) || !math.IsNaN(row[1]) {
		t.Fatalf("softmax([2 1]) in the second row = %v; it was NaN before", row)
	}
	t.Logf("softmax of [[1000 0] [2 1]] second row = %v; true [0.731 0.269]", row)
}
