// Command gorgonia-adapter speaks gradcheck's process protocol, version 1 (docs/protocol.md),
// for Gorgonia: one JSON request per line on stdin, one JSON response per line on stdout,
// logs on stderr.
//
// Reverse mode is Gorgonia's symbolic differentiation: the cost Sum(out ⊙ cotangent) is built
// in an ExprGraph, gorgonia.Grad adds the gradient nodes and a TapeMachine runs the graph.
// Order 2 applies gorgonia.Grad to a graph that already holds gradient nodes, each
// differentiation in a graph of its own (see vjpGraph). Gorgonia has no forward mode.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

const protocol = 1

// gorgoniaVersion is the module version this adapter is built against (go.mod); the build
// info read at start-up overrides it with what was actually linked.
var gorgoniaVersion = "v0.9.18"

// order2: the adapter answers order-2 requests (vjp transforms), for the ops of order2Ops only.
var order2 = true

// order2Ops: the ops whose second derivative Gorgonia gets right, as measured. A second
// gorgonia.Grad in a graph that already holds gradient nodes reuses them: Backpropagate skips
// every node "previously differentiated" (it keeps its first gradient node in n.deriv) and
// takes that stale node as the node's gradient, and for a wrt node with several incoming
// gradients it returns the first one. Second derivatives are right only where no node of the
// first differentiation lies on the second one's paths and each argument gets a single
// contribution; every other op measured wrong values, engine errors or a crash
// (docs/engines/gorgonia.md), so it answers unsupported.
var order2Ops = map[string]bool{
	"sin": true, "cos": true, "log": true, "log1p": true, "expm1": true, "softplus": true,
	"square": true, "mul": true, "mul_scalar": true, "matmul": true,
}

const order2Reason = "Gorgonia's second gorgonia.Grad in a graph reuses the first one's gradient " +
	"nodes (Backpropagate skips previously differentiated nodes), which gives wrong second " +
	"derivatives for this op (measured; docs/engines/gorgonia.md)"

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type fnSpec struct {
	Op         string `json:"op"`
	Transforms []struct {
		Kind  string `json:"kind"`
		Diff  []int  `json:"diff"`
		NArgs int    `json:"n_args"`
	} `json:"transforms"`
}

type callParams struct {
	Fn         fnSpec      `json:"fn"`
	Device     string      `json:"device"`
	Dtype      string      `json:"dtype"`
	Args       []wireArray `json:"args"`
	Diff       []int       `json:"diff"`
	Cotangents []wireArray `json:"cotangents"`
}

// graphFn builds, in a graph, the nodes of a function's outputs from its argument nodes.
type graphFn func(g *G.ExprGraph, args []*G.Node) ([]*G.Node, error)

func buildFn(spec fnSpec) (graphFn, error) {
	def, ok := ops[spec.Op]
	if !ok {
		return nil, unsupported("op %s is not implemented by the gorgonia adapter", spec.Op)
	}
	f := graphFn(func(g *G.ExprGraph, args []*G.Node) ([]*G.Node, error) {
		if len(args) != def.arity {
			return nil, invalid("op %s takes %d arguments, got %d", spec.Op, def.arity, len(args))
		}
		out, err := def.fn(args)
		if err != nil {
			return nil, err
		}
		return []*G.Node{out}, nil
	})
	if len(spec.Transforms) > 0 && !order2Ops[spec.Op] {
		return nil, unsupported("order 2 of %s: %s", spec.Op, order2Reason)
	}
	for _, tr := range spec.Transforms {
		if tr.Kind != "vjp" {
			return nil, unsupported("transform %s: Gorgonia has no forward mode", tr.Kind)
		}
		f = vjpGraph(f, tr.Diff, tr.NArgs)
	}
	return f, nil
}

func zeroLike(dt tensor.Dtype) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(0))
	}
	return G.NewConstant(0.0)
}

// contract is sum_i Sum(outs[i] ⊙ cts[i]) + 0 * sum_k Sum(wrt[k]): the scalar whose gradient is
// J^T v. The zero term keeps every wrt node connected to the cost, so that an output that does
// not depend on an argument gives a zero gradient instead of Gorgonia's "No gradients found".
func contract(outs, cts, wrt []*G.Node) (*G.Node, error) {
	if len(outs) != len(cts) {
		return nil, invalid("%d cotangents for %d outputs", len(cts), len(outs))
	}
	var terms G.Nodes
	for i, o := range outs {
		if !o.Shape().Eq(cts[i].Shape()) {
			return nil, invalid("cotangent %d has shape %v, output has %v", i, cts[i].Shape(), o.Shape())
		}
		p, err := G.HadamardProd(o, cts[i])
		if err != nil {
			return nil, err
		}
		if !p.IsScalar() {
			if p, err = G.Sum(p); err != nil {
				return nil, err
			}
		}
		terms = append(terms, p)
	}
	for _, w := range wrt {
		s := w
		var err error
		if !w.IsScalar() {
			if s, err = G.Sum(w); err != nil {
				return nil, err
			}
		}
		if s, err = G.HadamardProd(s, zeroLike(w.Dtype())); err != nil {
			return nil, err
		}
		terms = append(terms, s)
	}
	cost := terms[0]
	for _, t := range terms[1:] {
		var err error
		if cost, err = G.Add(cost, t); err != nil {
			return nil, err
		}
	}
	return cost, nil
}

// vjpGraph turns f into g(*args, *cotangents) = J_f^T v with respect to args[diff]: the cost
// and gorgonia.Grad are added to the graph g (applied twice for order 2, see order2Ops).
func vjpGraph(f graphFn, diff []int, nArgs int) graphFn {
	return func(g *G.ExprGraph, xs []*G.Node) ([]*G.Node, error) {
		if nArgs > len(xs) {
			return nil, invalid("vjp transform: n_args %d > %d arguments", nArgs, len(xs))
		}
		args, cts := xs[:nArgs], xs[nArgs:]
		outs, err := f(g, args)
		if err != nil {
			return nil, err
		}
		wrt := make([]*G.Node, len(diff))
		for i, k := range diff {
			if k < 0 || k >= nArgs {
				return nil, invalid("diff index %d out of range", k)
			}
			wrt[i] = args[k]
		}
		cost, err := contract(outs, cts, wrt)
		if err != nil {
			return nil, err
		}
		grads, err := G.Grad(cost, wrt...)
		if err != nil {
			return nil, &protoError{"engine_error", "gorgonia.Grad: " + err.Error()}
		}
		return grads, nil
	}
}

func checkDevice(device string) error {
	if device != "" && device != "cpu" {
		return unsupported("device %s: the gorgonia adapter runs on cpu only", device)
	}
	return nil
}

// inputs makes one input node per array, holding its value in dtype dt.
func inputs(g *G.ExprGraph, arrays []wireArray, dt tensor.Dtype, prefix string) ([]*G.Node, error) {
	nodes := make([]*G.Node, len(arrays))
	for i := range arrays {
		v, err := decodeValue(&arrays[i], dt)
		if err != nil {
			return nil, err
		}
		nodes[i] = G.NodeFromAny(g, v, G.WithName(fmt.Sprintf("%s%d", prefix, i)))
	}
	return nodes, nil
}

func run(g *G.ExprGraph) error {
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return &protoError{"engine_error", "TapeMachine.RunAll: " + err.Error()}
	}
	return nil
}

func encodeNodes(nodes []*G.Node, dt tensor.Dtype) ([]wireArray, error) {
	out := make([]wireArray, len(nodes))
	for i, n := range nodes {
		a, err := encodeValue(n.Value(), dt)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// prepare decodes a call's arguments into input nodes of a new graph and builds its function.
func prepare(p callParams) (tensor.Dtype, graphFn, *G.ExprGraph, []*G.Node, error) {
	if err := checkDevice(p.Device); err != nil {
		return tensor.Float64, nil, nil, nil, err
	}
	dt, err := dtypeOf(p.Dtype)
	if err != nil {
		return dt, nil, nil, nil, err
	}
	f, err := buildFn(p.Fn)
	if err != nil {
		return dt, nil, nil, nil, err
	}
	g := G.NewGraph()
	args, err := inputs(g, p.Args, dt, "x")
	return dt, f, g, args, err
}

func evaluate(p callParams) (interface{}, error) {
	dt, f, g, args, err := prepare(p)
	if err != nil {
		return nil, err
	}
	outs, err := f(g, args)
	if err != nil {
		return nil, err
	}
	if err := run(g); err != nil {
		return nil, err
	}
	enc, err := encodeNodes(outs, dt)
	return map[string]interface{}{"outputs": enc}, err
}

func vjp(p callParams) (interface{}, error) {
	dt, f, g, args, err := prepare(p)
	if err != nil {
		return nil, err
	}
	cts, err := inputs(g, p.Cotangents, dt, "v")
	if err != nil {
		return nil, err
	}
	grads, err := vjpGraph(f, p.Diff, len(args))(g, append(args, cts...))
	if err != nil {
		return nil, err
	}
	if err := run(g); err != nil {
		return nil, err
	}
	enc, err := encodeNodes(grads, dt)
	return map[string]interface{}{"grads": enc}, err
}

func hello(raw json.RawMessage) (interface{}, error) {
	var p struct {
		Protocol int `json:"protocol"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("hello: %v", err)
	}
	if p.Protocol != protocol {
		return nil, &protoError{"version_mismatch",
			fmt.Sprintf("this adapter speaks protocol %d, not %d", protocol, p.Protocol)}
	}
	return map[string]interface{}{
		"protocol": protocol, "engine": "gorgonia", "engine_version": gorgoniaVersion,
		"backend": "cpu", "devices": []string{"cpu"}, "dtypes": []string{"float64", "float32"},
		"capabilities": map[string]bool{"vjp": true, "jvp": false, "order2": order2, "training": true},
		"semantics": map[string]interface{}{
			"accumulation": "accumulate", "stop_gradient": nil,
			"notes": "TapeMachine with BindDualValues adds each run's gradient into the " +
				"learnables' dual values until solver.Step zeroes them; no stop-gradient " +
				"primitive (a stopped argument is an input node holding a copy of the value)",
		},
	}, nil
}

func opList() interface{} {
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	list := make([]map[string]interface{}, len(names))
	for i, n := range names {
		list[i] = map[string]interface{}{"name": n, "arity": ops[n].arity}
	}
	return map[string]interface{}{"ops": list}
}

func dispatch(method string, raw json.RawMessage) (result interface{}, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &protoError{"engine_error", fmt.Sprintf("gorgonia panicked: %v", r)}
		}
	}()
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	switch method {
	case "hello":
		return hello(raw)
	case "ops":
		return opList(), nil
	case "evaluate", "vjp":
		var p callParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalid("%s: %v", method, err)
		}
		if method == "vjp" {
			return vjp(p)
		}
		return evaluate(p)
	case "jvp":
		return nil, unsupported("Gorgonia has no forward mode")
	case "gorgonia.model":
		return model(raw)
	}
	if h, ok := trainMethods[method]; ok {
		return h(raw)
	}
	return nil, unsupported("unknown method %s", method)
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result interface{}     `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func handle(line []byte) (resp response, shutdown bool) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{ID: json.RawMessage("null"), Error: &wireError{"invalid_request", "not JSON: " + err.Error()}}, false
	}
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	if req.Method == "" {
		return response{ID: req.ID, Error: &wireError{"invalid_request", "no method"}}, false
	}
	if req.Method == "shutdown" {
		return response{ID: req.ID, Result: map[string]interface{}{}}, true
	}
	result, err := dispatch(req.Method, req.Params)
	if err != nil {
		kind := "engine_error"
		if pe, ok := err.(*protoError); ok {
			kind = pe.kind
		}
		return response{ID: req.ID, Error: &wireError{kind, err.Error()}}, false
	}
	if result == nil {
		result = map[string]interface{}{}
	}
	return response{ID: req.ID, Result: result}, false
}

func main() {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "gorgonia.org/gorgonia" {
				gorgoniaVersion = dep.Version
			}
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<30) // lines carry base64 arrays
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		line := in.Bytes()
		if len(line) == 0 {
			continue
		}
		resp, stop := handle(line)
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(response{ID: resp.ID, Error: &wireError{"engine_error", "cannot encode the answer: " + err.Error()}})
		}
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
		if stop {
			return
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "gorgonia adapter: reading stdin:", err)
		os.Exit(1)
	}
}
