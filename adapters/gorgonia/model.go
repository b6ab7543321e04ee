package main

// gorgonia.model: a two-layer model written in Gorgonia (not part of the protocol; used by
// gorgonia_backend.check_model_flow). Learnables "fc1.weight" (in, hidden), "fc1.bias"
// (hidden), "fc2.weight" (hidden, out), "fc2.bias" (out); loss = mean((tanh(x·W1 + b1)·W2 +
// b2 - y)²). The gradients are read from the learnables' dual values after gorgonia.Grad and a
// TapeMachine run with BindDualValues, by the learnables' own node names; the global norm is
// computed from the same dual values. A host round trip can be put at the stage "hidden"
// (after tanh) or "logits" (after fc2): the graph is run up to that node, its value read into
// a Go slice and fed back as a new constant ("constant") or input node ("input"); every such
// cut is logged with its stage and the learnables upstream of it.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var modelStages = map[string][]string{
	"hidden": {"fc1.bias", "fc1.weight"},
	"logits": {"fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"},
}

type modelParams struct {
	X         *wireArray            `json:"x"`
	Y         *wireArray            `json:"y"`
	Hidden    int                   `json:"hidden"`
	Values    map[string]*wireArray `json:"values"`
	Roundtrip *struct {
		Stage string `json:"stage"`
		Via   string `json:"via"`
	} `json:"roundtrip"`
	Order  []string   `json:"order"`
	Points *wireArray `json:"points"`
}

type modelGraph struct {
	g     *G.ExprGraph
	learn map[string]*G.Node
	loss  *G.Node
	cuts  []map[string]interface{}
}

// hostRoundTrip runs the graph built so far, copies n's value into a Go slice and returns a new
// node holding that copy (a constant or an input node): the graph no longer links it to n.
func hostRoundTrip(mg *modelGraph, n *G.Node, stage, via string) (*G.Node, error) {
	if err := run(mg.g); err != nil {
		return nil, err
	}
	vals, shape, err := valueData(n.Value())
	if err != nil {
		return nil, err
	}
	v := toValue(vals, shape, tensor.Float64)
	var out *G.Node
	how := "Value().Data() copied to a []float64, then "
	switch via {
	case "constant":
		out, how = G.NewConstant(v, G.WithName(stage+"_host")), how+"gorgonia.NewConstant"
	case "input":
		out, how = paramNode(mg.g, v, tensor.Float64, stage+"_host"), how+"a new input node (NewTensor WithValue)"
	default:
		return nil, invalid("roundtrip via %s: constant or input", via)
	}
	mg.cuts = append(mg.cuts, map[string]interface{}{
		"stage": stage, "how": how, "host": true, "upstream": modelStages[stage]})
	return out, nil
}

func buildModel(p *modelParams, values map[string]G.Value) (*modelGraph, error) {
	x, err := decodeValue(p.X, tensor.Float64)
	if err != nil {
		return nil, err
	}
	y, err := decodeValue(p.Y, tensor.Float64)
	if err != nil {
		return nil, err
	}
	mg := &modelGraph{g: G.NewGraph(), learn: map[string]*G.Node{}, cuts: []map[string]interface{}{}}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		mg.learn[k] = paramNode(mg.g, values[k], tensor.Float64, k)
	}
	xn := paramNode(mg.g, x, tensor.Float64, "x")
	yn := paramNode(mg.g, y, tensor.Float64, "y")
	at := func(n *G.Node, stage string) (*G.Node, error) {
		if p.Roundtrip != nil && p.Roundtrip.Stage == stage {
			return hostRoundTrip(mg, n, stage, p.Roundtrip.Via)
		}
		return n, nil
	}
	linear := func(in *G.Node, layer string) (*G.Node, error) {
		xw, err := G.Mul(in, mg.learn[layer+".weight"])
		if err != nil {
			return nil, err
		}
		return G.BroadcastAdd(xw, mg.learn[layer+".bias"], nil, []byte{0})
	}
	h, err := linear(xn, "fc1")
	if err == nil {
		h, err = G.Tanh(h)
	}
	if err == nil {
		h, err = at(h, "hidden")
	}
	var o *G.Node
	if err == nil {
		o, err = linear(h, "fc2")
	}
	if err == nil {
		o, err = at(o, "logits")
	}
	if err == nil {
		o, err = G.Sub(o, yn)
	}
	if err == nil {
		o, err = G.Square(o)
	}
	if err == nil {
		mg.loss, err = G.Mean(o)
	}
	if err != nil {
		return nil, &protoError{"engine_error", "building the model: " + err.Error()}
	}
	return mg, nil
}

// initialValues: the model's learnables with their shapes, a fixed deterministic start.
func initialValues(p *modelParams) (map[string]G.Value, error) {
	if p.X == nil || p.Y == nil || len(p.X.Shape) != 2 || len(p.Y.Shape) != 2 || p.X.Shape[0] != p.Y.Shape[0] {
		return nil, invalid("x and y must be (batch, in) and (batch, out)")
	}
	hid := p.Hidden
	if hid <= 0 {
		hid = 3
	}
	shapes := map[string][]int{
		"fc1.weight": {p.X.Shape[1], hid}, "fc1.bias": {hid},
		"fc2.weight": {hid, p.Y.Shape[1]}, "fc2.bias": {p.Y.Shape[1]},
	}
	values := map[string]G.Value{}
	for name, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = 0.3 * math.Sin(float64(i+len(name)))
		}
		if a := p.Values[name]; a != nil {
			v, sh, err := decodeValues(a)
			if err != nil {
				return nil, err
			}
			if !sameShape(sh, s) {
				return nil, invalid("value of %s has shape %v, the model's is %v", name, sh, s)
			}
			vals = v
		}
		values[name] = toValue(vals, s, tensor.Float64)
	}
	for name := range p.Values {
		if _, ok := shapes[name]; !ok {
			return nil, invalid("unknown learnable %s", name)
		}
	}
	return values, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func modelLoss(p *modelParams, values map[string]G.Value) (float64, error) {
	mg, err := buildModel(p, values)
	if err != nil {
		return 0, err
	}
	if err := run(mg.g); err != nil {
		return 0, err
	}
	l, _, err := valueData(mg.loss.Value())
	if err != nil {
		return 0, err
	}
	return l[0], nil
}

func model(raw json.RawMessage) (interface{}, error) {
	var p modelParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("gorgonia.model: %v", err)
	}
	if p.Roundtrip != nil && modelStages[p.Roundtrip.Stage] == nil {
		return nil, invalid("unknown stage %s: hidden or logits", p.Roundtrip.Stage)
	}
	values, err := initialValues(&p)
	if err != nil {
		return nil, err
	}
	if p.Points != nil { // the loss at each row of points (B, n), laid out as the names in order
		pts, shape, err := decodeValues(p.Points)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, name := range p.Order {
			v, ok := values[name]
			if !ok {
				return nil, invalid("unknown learnable %s", name)
			}
			n += v.Shape().TotalSize()
		}
		if len(shape) != 2 || shape[1] != n {
			return nil, invalid("points must be (B, %d)", n)
		}
		losses := make([]interface{}, shape[0])
		for r := range losses {
			row, at := pts[r*n:(r+1)*n], 0
			for _, name := range p.Order {
				k := values[name].Shape().TotalSize()
				values[name] = toValue(row[at:at+k], values[name].Shape().Clone(), tensor.Float64)
				at += k
			}
			l, err := modelLoss(&p, values)
			if err != nil {
				return nil, err
			}
			losses[r] = encodeScalar(l)
		}
		return map[string]interface{}{"losses": losses}, nil
	}
	mg, err := buildModel(&p, values)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(mg.learn))
	for k := range mg.learn {
		names = append(names, k)
	}
	sort.Strings(names)
	// gorgonia.Grad refuses learnables that no longer reach the loss (a SymDiffError naming
	// them); they are left out and differentiated without, as a user would have to.
	wrt := G.Nodes{}
	for _, k := range names {
		wrt = append(wrt, mg.learn[k])
	}
	refused := ""
	if _, err := G.Grad(mg.loss, wrt...); err != nil {
		se, ok := err.(G.SymDiffError)
		if !ok {
			return nil, &protoError{"engine_error", "gorgonia.Grad: " + err.Error()}
		}
		bad, badNames := map[*G.Node]bool{}, []string{}
		for _, n := range se.Nodes() {
			bad[n] = true
			badNames = append(badNames, n.Name())
		}
		sort.Strings(badNames)
		refused = fmt.Sprintf("gorgonia.Grad refused %s (SymDiffError: Non Differentiable WRTs)",
			strings.Join(badNames, ", "))
		kept := G.Nodes{}
		for _, n := range wrt {
			if !bad[n] {
				kept = append(kept, n)
			}
		}
		wrt = kept
		if len(wrt) > 0 {
			if _, err := G.Grad(mg.loss, wrt...); err != nil {
				return nil, &protoError{"engine_error", "gorgonia.Grad: " + err.Error()}
			}
		}
	}
	m := G.NewTapeMachine(mg.g, G.BindDualValues(wrt...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return nil, &protoError{"engine_error", "TapeMachine.RunAll: " + err.Error()}
	}
	lv, _, err := valueData(mg.loss.Value())
	if err != nil {
		return nil, err
	}
	mutant := os.Getenv("GRADCHECK_GORGONIA_MUTANT")
	grads, vals := map[string]interface{}{}, map[string]interface{}{}
	inWrt := map[*G.Node]bool{}
	for _, n := range wrt {
		inWrt[n] = true
	}
	sq := 0.0
	for _, k := range names {
		n := mg.learn[k]
		a, err := encodeValue(n.Value(), tensor.Float64)
		if err != nil {
			return nil, err
		}
		vals[k] = a
		grads[k] = nil
		if !inWrt[n] {
			continue
		}
		gv, err := n.Grad()
		if err != nil {
			return nil, &protoError{"engine_error", k + ": no dual value: " + err.Error()}
		}
		d, shape, err := valueData(gv)
		if err != nil {
			return nil, err
		}
		for _, v := range d {
			sq += v * v
		}
		grads[k] = encodeFloats(d, shape, tensor.Float64)
	}
	if mutant == "model_swap" { // fault injector: two same-shaped gradients under each other's name
		grads["fc1.weight"], grads["fc2.weight"] = grads["fc2.weight"], grads["fc1.weight"]
	}
	norm := math.Sqrt(sq)
	if mutant == "model_norm_proxy" { // fault injector: the loss magnitude reported as the norm
		norm = math.Abs(lv[0])
	}
	for _, c := range mg.cuts {
		if refused != "" {
			c["engine"] = refused
		}
	}
	return map[string]interface{}{
		"registered": names, "values": vals, "loss": encodeScalar(lv[0]),
		"grads": grads, "grad_norm": encodeScalar(norm), "cuts": mg.cuts,
	}, nil
}
