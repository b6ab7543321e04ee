package gorgoniacheck

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The tiny model of these tests: cost = sum(w ⊙ w ⊙ x) + sum(b ⊙ b), so dcost/dw = 2 w x and
// dcost/db = 2 b exactly; w is 2x3, b has 3 elements; the step is VanillaSolver (lr 0.5).
var (
	tinyW = []float64{0.5, -1, 1.5, 2, -0.25, 0.75}
	tinyX = []float64{3, 5, -2, 1, 4, 0.5}
	tinyB = []float64{1, -2, 0.5}
)

type tinyOpts struct {
	refuse32   bool
	batch      float64
	extraRun   bool     // run the graph twice before solver.Step (the dual values hold 2g)
	printer    func()   // called inside the builder (stdout pollution)
	last       **G.Node // the most recent build's w
	lastModel  **Model
	unreg      bool // Grad over a node Learnables does not list
	otherGraph bool // b in a graph of its own
	notUsed    bool // b in the cost's graph but not used by the cost
}

func tinyBuilder(o tinyOpts) Builder {
	return func(dt tensor.Dtype) (*Model, error) {
		if o.refuse32 && dt == tensor.Float32 {
			return nil, fmt.Errorf("this model is float64 only")
		}
		if o.printer != nil {
			o.printer()
		}
		g := G.NewGraph()
		w := G.NewMatrix(g, dt, G.WithShape(2, 3), G.WithName("w"), G.WithValue(dense(dt, []int{2, 3}, tinyW)))
		x := G.NewMatrix(g, dt, G.WithShape(2, 3), G.WithName("x"), G.WithValue(dense(dt, []int{2, 3}, tinyX)))
		gb := g
		if o.otherGraph {
			gb = G.NewGraph()
		}
		b := G.NewVector(gb, dt, G.WithShape(3), G.WithName("b"), G.WithValue(dense(dt, []int{3}, tinyB)))
		cost := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Square(w)), x))))
		if !o.otherGraph && !o.notUsed {
			cost = G.Must(G.Add(cost, G.Must(G.Sum(G.Must(G.Square(b))))))
		}
		learn := G.Nodes{w, b}
		wrt := G.Nodes{w}
		if !o.otherGraph && !o.notUsed {
			wrt = append(wrt, b)
		}
		if o.unreg {
			learn = G.Nodes{w}
		}
		if _, err := G.Grad(cost, wrt...); err != nil {
			return nil, err
		}
		vm := G.NewTapeMachine(g, G.BindDualValues(wrt...))
		opts := []G.SolverOpt{G.WithLearnRate(0.5)}
		if o.batch > 0 {
			opts = append(opts, G.WithBatchSize(o.batch))
		}
		solver := Observe(G.NewVanillaSolver(opts...))
		m := &Model{Cost: cost, Learnables: learn, Name: "tiny", ClipNorm: KnobOf("max_norm", 1.5),
			Step: func() (Logged, error) {
				if o.extraRun {
					if err := vm.RunAll(); err != nil {
						return Logged{}, err
					}
					vm.Reset()
				}
				defer vm.Reset()
				if err := vm.RunAll(); err != nil {
					return Logged{}, err
				}
				return Norm(42), solver.Step(G.NodesToValueGrads(wrt))
			}}
		if o.last != nil {
			*o.last = w
		}
		if o.lastModel != nil {
			*o.lastModel = m
		}
		return m, nil
	}
}

func dense(dt tensor.Dtype, shape []int, vals []float64) tensor.Tensor {
	if dt == tensor.Float32 {
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), vals...)))
}

// conversation runs a server in-process over pipes, as the harness would talk to it.
type conversation struct {
	t   *testing.T
	w   io.WriteCloser
	r   *bufio.Reader
	id  int
	end chan error
}

func converse(t *testing.T, b Builder) *conversation {
	t.Helper()
	reqR, reqW := io.Pipe()
	ansR, ansW := io.Pipe()
	c := &conversation{t: t, w: reqW, r: bufio.NewReader(ansR), end: make(chan error, 1)}
	go func() {
		err := newServer(b).serve(reqR, ansW)
		_ = ansW.Close()
		c.end <- err
	}()
	t.Cleanup(func() {
		_ = reqW.Close()
		if err := <-c.end; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return c
}

// ask sends one request and returns its result, or fails the test with the error answered.
func (c *conversation) ask(method string, params interface{}) map[string]interface{} {
	c.t.Helper()
	res, errObj := c.try(method, params)
	if errObj != nil {
		c.t.Fatalf("%s answered an error: %v", method, errObj)
	}
	return res
}

func (c *conversation) try(method string, params interface{}) (map[string]interface{}, map[string]interface{}) {
	c.t.Helper()
	c.id++
	line, _ := json.Marshal(map[string]interface{}{"id": c.id, "method": method, "params": params})
	if _, err := c.w.Write(append(line, '\n')); err != nil {
		c.t.Fatalf("writing %s: %v", method, err)
	}
	ans, err := c.r.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("reading the answer to %s: %v", method, err)
	}
	var resp struct {
		ID     int                    `json:"id"`
		Result map[string]interface{} `json:"result"`
		Error  map[string]interface{} `json:"error"`
	}
	if err := json.Unmarshal(ans, &resp); err != nil {
		c.t.Fatalf("the answer to %s is not JSON: %v: %s", method, err, ans)
	}
	if resp.ID != c.id {
		c.t.Fatalf("answer id %d to request %d", resp.ID, c.id)
	}
	return resp.Result, resp.Error
}

func decode(t *testing.T, a interface{}) []float64 {
	t.Helper()
	m := a.(map[string]interface{})
	raw, err := base64.StdEncoding.DecodeString(m["data"].(string))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(raw)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out
}

func tinyLoss(w, b []float64) float64 {
	s := 0.0
	for j := range w {
		s += w[j] * w[j] * tinyX[j]
	}
	for _, v := range b {
		s += v * v
	}
	return s
}

func tinyGrad() map[string][]float64 {
	gw := make([]float64, len(tinyW))
	for j := range gw {
		gw[j] = 2 * tinyW[j] * tinyX[j]
	}
	gb := make([]float64, len(tinyB))
	for j := range gb {
		gb[j] = 2 * tinyB[j]
	}
	return map[string][]float64{"w": gw, "b": gb}
}

func sumsq(v []float64) float64 { return dot(v, v) }

func TestHelloAndDescribe(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{}))
	h := c.ask("hello", map[string]interface{}{"protocol": 1, "client": "gradcheck"})
	if h["kind"] != "model" || h["engine"] != "gorgonia" || h["library"] != "gorgoniacheck" || h["model"] != "tiny" {
		t.Errorf("hello: %v", h)
	}
	if fmt.Sprint(h["dtypes"]) != "[float64 float32]" || fmt.Sprint(h["capabilities"]) != "map[step:true]" {
		t.Errorf("hello dtypes/capabilities: %v %v", h["dtypes"], h["capabilities"])
	}
	d := c.ask("model.describe", map[string]interface{}{"dtype": "float64"})
	ts := d["tensors"].([]interface{})
	if len(ts) != 2 || ts[0].(map[string]interface{})["name"] != "w" || ts[1].(map[string]interface{})["name"] != "b" {
		t.Fatalf("tensors (registry order w, b): %v", ts)
	}
	w := ts[0].(map[string]interface{})
	if fmt.Sprint(w["shape"]) != "[2 3]" || w["max_abs"].(float64) != 2 || math.Abs(w["rms"].(float64)-math.Sqrt(sumsq(tinyW)/6)) > 1e-15 {
		t.Errorf("w: %v", w)
	}
	if fmt.Sprint(d["optimizer"]) != "map[batch:1 clip:<nil> kind:vanilla l1:0 l2:0 lr:0.5]" {
		t.Errorf("optimizer read from the VanillaSolver: %v", d["optimizer"])
	}
	if fmt.Sprint(d["clip"]) != "map[kind:global_norm knob:max_norm max_norm:1.5]" || fmt.Sprint(d["knobs"]) != "map[max_norm:1.5]" {
		t.Errorf("clip/knobs: %v %v", d["clip"], d["knobs"])
	}
	if d["step"] != true || len(d["unregistered"].([]interface{})) != 0 {
		t.Errorf("step/unregistered: %v %v", d["step"], d["unregistered"])
	}
	_, e := c.try("hello", map[string]interface{}{"protocol": 2})
	if e == nil || e["type"] != "version_mismatch" {
		t.Errorf("hello protocol 2: %v", e)
	}
	_, e = c.try("ops", map[string]interface{}{})
	if e == nil || e["type"] != "unsupported" {
		t.Errorf("a protocol-1 op method: %v", e)
	}
}

func TestUnregisteredNode(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{unreg: true}))
	d := c.ask("model.describe", map[string]interface{}{"dtype": "float64"})
	u := d["unregistered"].([]interface{})
	if len(u) != 1 || fmt.Sprint(u[0].(map[string]interface{})["shape"]) != "[3]" {
		t.Errorf("b is differentiated but not a learnable: %v", u)
	}
}

func TestLossIsTheForwardAndRepeatsBitwise(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{}))
	for _, dt := range []string{"float64", "float32"} {
		a := c.ask("model.loss", map[string]interface{}{"dtype": dt})["loss"].(float64)
		b := c.ask("model.loss", map[string]interface{}{"dtype": dt})["loss"].(float64)
		if math.Float64bits(a) != math.Float64bits(b) {
			t.Errorf("%s: two losses %v %v", dt, a, b)
		}
		if a != tinyLoss(tinyW, tinyB) { // the values are exact in float32 too
			t.Errorf("%s: loss %v, want %v", dt, a, tinyLoss(tinyW, tinyB))
		}
	}
}

func TestGradsByName(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{}))
	want := tinyGrad()
	for _, dt := range []string{"float64", "float32"} {
		r := c.ask("model.grads", map[string]interface{}{"dtype": dt, "arrays": true})
		gs := r["grads"].(map[string]interface{})
		for name, w := range want {
			e := gs[name].(map[string]interface{})
			if e["present"] != true || e["sumsq"].(float64) != sumsq(w) {
				t.Errorf("%s %s: %v, want sumsq %v", dt, name, e, sumsq(w))
			}
			if got := decode(t, e["array"]); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s %s array: %v, want %v", dt, name, got, w)
			}
		}
	}
}

func TestAbsentIsNotZero(t *testing.T) {
	for _, o := range []tinyOpts{{otherGraph: true}, {notUsed: true}} {
		c := converse(t, tinyBuilder(o))
		r := c.ask("model.grads", map[string]interface{}{"dtype": "float64"})
		b := r["grads"].(map[string]interface{})["b"].(map[string]interface{})
		if b["present"] != false || b["note"] == "" {
			t.Errorf("%+v: b %v", o, b)
		}
	}
}

func TestGradRefusalIsQuoted(t *testing.T) {
	// the user calls no gorgonia.Grad: the package does, and Grad refuses b (not in the cost)
	b := func(dt tensor.Dtype) (*Model, error) {
		g := G.NewGraph()
		w := G.NewVector(g, dt, G.WithShape(2), G.WithName("w"), G.WithValue(dense(dt, []int{2}, []float64{1, 2})))
		u := G.NewVector(g, dt, G.WithShape(2), G.WithName("u"), G.WithValue(dense(dt, []int{2}, []float64{3, 4})))
		return &Model{Cost: G.Must(G.Sum(G.Must(G.Square(w)))), Learnables: G.Nodes{w, u}}, nil
	}
	c := converse(t, b)
	r := c.ask("model.grads", map[string]interface{}{"dtype": "float64"})
	gs := r["grads"].(map[string]interface{})
	u := gs["u"].(map[string]interface{})
	if u["present"] != false || fmt.Sprint(u["note"])[:22] != "gorgonia.Grad refused " {
		t.Errorf("u: %v", u)
	}
	if w := gs["w"].(map[string]interface{}); w["present"] != true || w["sumsq"].(float64) != 20 {
		t.Errorf("w: %v", w)
	}
}

func TestLinePerturbsAndRestoresBitwise(t *testing.T) {
	var w *G.Node
	c := converse(t, tinyBuilder(tinyOpts{last: &w}))
	grad := tinyGrad()
	for _, dt := range []string{"float32", "float64"} {
		c.ask("model.describe", map[string]interface{}{"dtype": dt})
		before, _ := valueFloats(w.Value())
		ts := []float64{0.25, -0.25, 0.0625}
		scale := 0.5
		r := c.ask("model.line", map[string]interface{}{"dtype": dt, "t": ts, "direction": map[string]interface{}{
			"seed": 7, "scope": []interface{}{map[string]interface{}{"name": "w", "start": 1, "stop": 5, "scale": scale}}}})
		key := directionKey(7, "w")
		proj, norm2 := 0.0, 0.0
		for j := 1; j < 5; j++ {
			u := scale * signAt(key, j)
			proj += u * grad["w"][j]
			norm2 += u * u
		}
		if r["projection"].(float64) != proj || r["norm2"].(float64) != norm2 || r["inexact"].(float64) != 0 {
			t.Errorf("%s: %v, want projection %v norm2 %v inexact 0", dt, r, proj, norm2)
		}
		for i, tt := range ts {
			p := append([]float64(nil), tinyW...)
			for j := 1; j < 5; j++ {
				p[j] += tt * scale * signAt(key, j)
			}
			if got := r["losses"].([]interface{})[i].(float64); got != tinyLoss(p, tinyB) {
				t.Errorf("%s t=%v: loss %v, want %v", dt, tt, got, tinyLoss(p, tinyB))
			}
		}
		after, _ := valueFloats(w.Value())
		for j := range before {
			if math.Float64bits(before[j]) != math.Float64bits(after[j]) {
				t.Errorf("%s: w[%d] %v after the line, %v before", dt, j, after[j], before[j])
			}
		}
	}
	// a step that float32 cannot represent exactly is counted
	r := c.ask("model.line", map[string]interface{}{"dtype": "float32", "t": []float64{0.1}, "direction": map[string]interface{}{
		"seed": 1, "scope": []interface{}{map[string]interface{}{"name": "b"}}}})
	if r["inexact"].(float64) == 0 {
		t.Errorf("float32, t = 0.1: inexact %v", r["inexact"])
	}
	_, e := c.try("model.line", map[string]interface{}{"dtype": "float64", "t": []float64{1}, "direction": map[string]interface{}{
		"seed": 1, "scope": []interface{}{map[string]interface{}{"name": "nope"}}}})
	if e == nil || e["type"] != "invalid_request" {
		t.Errorf("unknown tensor in the scope: %v", e)
	}
}

func stepTensors(t *testing.T, r map[string]interface{}, i int) map[string]map[string]interface{} {
	t.Helper()
	st := r["steps"].([]interface{})[i].(map[string]interface{})
	out := map[string]map[string]interface{}{}
	for k, v := range st["tensors"].(map[string]interface{}) {
		out[k] = v.(map[string]interface{})
	}
	return out
}

func TestStepObservesWhatTheSolverReceived(t *testing.T) {
	grad := tinyGrad()
	for _, tc := range []struct {
		name           string
		o              tinyOpts
		applied, delta float64 // applied = applied*g, delta = -0.5*delta*g
	}{
		{"correct", tinyOpts{}, 1, 1},
		{"extra RunAll", tinyOpts{extraRun: true}, 2, 2},
		{"batch 4", tinyOpts{batch: 4}, 1, 0.25},
	} {
		c := converse(t, tinyBuilder(tc.o))
		r := c.ask("model.step", map[string]interface{}{"dtype": "float64", "knobs": map[string]float64{"max_norm": 3},
			"steps": 1, "experiment": "run", "sample": 2})
		logged := r["steps"].([]interface{})[0].(map[string]interface{})["logged"].(map[string]interface{})
		if logged["grad_norm"].(float64) != 42 || logged["which"] != "pre_clip" {
			t.Errorf("%s: logged %v", tc.name, logged)
		}
		for name, e := range stepTensors(t, r, 0) {
			g := grad[name]
			if e["grad_sumsq"].(float64) != sumsq(g) || e["applied_present"] != true ||
				e["applied_sumsq"].(float64) != tc.applied*tc.applied*sumsq(g) ||
				e["delta_dot_grad"].(float64) != -0.5*tc.delta*sumsq(g) {
				t.Errorf("%s %s: %v", tc.name, name, e)
			}
			idx := e["index"].([]interface{})
			if len(idx) != 2 || len(decode(t, e["delta"])) != 2 {
				t.Errorf("%s %s: sampled %v", tc.name, name, idx)
			}
			for m, i := range idx {
				if want := -0.5 * tc.delta * g[int(i.(float64))]; decode(t, e["delta"])[m] != want {
					t.Errorf("%s %s: delta[%v] %v, want %v", tc.name, name, i, decode(t, e["delta"])[m], want)
				}
			}
		}
	}
}

func TestStepRepeatAndRun(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{}))
	r := c.ask("model.step", map[string]interface{}{"dtype": "float32", "knobs": map[string]float64{},
		"steps": 2, "experiment": "repeat", "sample": 64})
	a, b := stepTensors(t, r, 0), stepTensors(t, r, 1)
	for name := range a {
		if fmt.Sprint(a[name]) != fmt.Sprint(b[name]) {
			t.Errorf("repeat %s: %v then %v", name, a[name], b[name])
		}
		if _, sampled := a[name]["index"]; sampled {
			t.Errorf("%s has fewer than 64 elements: no index expected", name)
		}
	}
	r = c.ask("model.step", map[string]interface{}{"dtype": "float64", "steps": 2, "experiment": "run", "sample": 64})
	a, b = stepTensors(t, r, 0), stepTensors(t, r, 1)
	// the second step starts where the first left w: theta = w - 0.5*2wx = w(1 - x)
	th := decode(t, b["w"]["theta"])
	for j := range th {
		if want := tinyW[j] - 0.5*2*tinyW[j]*tinyX[j]; th[j] != want {
			t.Errorf("run: second step's theta[%d] %v, want %v", j, th[j], want)
		}
	}
	_, e := c.try("model.step", map[string]interface{}{"dtype": "float64", "knobs": map[string]float64{"nope": 1}})
	if e == nil || e["type"] != "invalid_request" {
		t.Errorf("unknown knob: %v", e)
	}
}

func TestRefusedDtype(t *testing.T) {
	c := converse(t, tinyBuilder(tinyOpts{refuse32: true}))
	h := c.ask("hello", map[string]interface{}{"protocol": 1})
	if fmt.Sprint(h["dtypes"]) != "[float64]" {
		t.Errorf("dtypes %v", h["dtypes"])
	}
	_, e := c.try("model.loss", map[string]interface{}{"dtype": "float32"})
	if e == nil || e["type"] != "unsupported" || e["message"] != "this model is float64 only" {
		t.Errorf("float32 request: %v", e)
	}
}

func TestDoneIsKept(t *testing.T) {
	s := newServer(tinyBuilder(tinyOpts{}))
	in := `{"id":1,"method":"model.done","params":{"passed":false,"checks":[{"name":"flow[b]","status":"failed","message":"m"}]}}` + "\n"
	if err := s.serve(strings.NewReader(in), io.Discard); err != nil {
		t.Fatal(err)
	}
	if s.done == nil || s.done.Passed || len(s.done.Checks) != 1 || s.done.Checks[0].Name != "flow[b]" {
		t.Errorf("done: %+v", s.done)
	}
}
