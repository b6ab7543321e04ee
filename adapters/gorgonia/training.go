package main

// Training sessions (train.* methods): parameters are Gorgonia learnable nodes whose gradients
// live where Gorgonia keeps them, in the nodes' dual values (TapeMachine + BindDualValues).
//
// A loss is compiled once per loss *structure* (op, which parameters, stop flags, shapes of the
// constant arrays and weights) into its own ExprGraph: Backpropagate caches a node's gradient
// node, so a second gorgonia.Grad in one graph would return the first loss's gradients for
// shared nodes. Constant arrays and weights are input nodes rebound with gorgonia.Let before
// each run, as a Gorgonia user feeds a compiled graph new data; so backward of the same loss
// rescaled (other weights) re-runs the same machine. What RunAll does to the dual values is
// Gorgonia's own behaviour (it adds). The learnable nodes of every program of a session are
// bound to the same parameter tensors, so solver.Step updates them for all programs; the
// stored gradients are the dual values of the most recent program's learnables (a loss of
// another structure is another graph, whose learnables start without gradient).

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type program struct {
	g       *G.ExprGraph
	m       G.VM
	loss    *G.Node
	learn   map[string]*G.Node // parameter name -> learnable node of this graph
	stopped map[string]*G.Node // parameter name -> input node holding a copy (stop: true)
	consts  []*G.Node          // input nodes of the constant arrays, in argument order
	weights *G.Node            // input node of the weights (nil: none)
}

type session struct {
	dt       tensor.Dtype
	names    []string
	values   map[string]G.Value // the parameter values shared by every program
	programs map[string]*program
	current  *program
}

var (
	sessions    = map[string]*session{}
	nextSession = 0
)

type lossArg struct {
	Param *string    `json:"param"`
	Stop  bool       `json:"stop"`
	Array *wireArray `json:"array"`
}

type lossSpec struct {
	Op      string     `json:"op"`
	Args    []lossArg  `json:"args"`
	Weights *wireArray `json:"weights"`
}

func getSession(raw json.RawMessage) (*session, string, error) {
	var p struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, "", invalid("%v", err)
	}
	s, ok := sessions[p.Session]
	if !ok {
		return nil, "", invalid("unknown session %s", p.Session)
	}
	return s, p.Session, nil
}

func paramNode(g *G.ExprGraph, v G.Value, dt tensor.Dtype, name string) *G.Node {
	if v.Shape().IsScalar() {
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(v))
	}
	return G.NewTensor(g, dt, v.Shape().Dims(), G.WithShape(v.Shape().Clone()...), G.WithName(name), G.WithValue(v))
}

func (s *session) compile(spec lossSpec) (*program, error) {
	def, ok := ops[spec.Op]
	if !ok {
		return nil, unsupported("op %s is not implemented by the gorgonia adapter", spec.Op)
	}
	pr := &program{g: G.NewGraph(), learn: map[string]*G.Node{}, stopped: map[string]*G.Node{}}
	args := make([]*G.Node, len(spec.Args))
	for i, a := range spec.Args {
		switch {
		case a.Param != nil:
			v, ok := s.values[*a.Param]
			if !ok {
				return nil, invalid("unknown param %s", *a.Param)
			}
			table, name := pr.learn, *a.Param
			if a.Stop {
				table, name = pr.stopped, "stop_"+*a.Param
			}
			if table[*a.Param] == nil {
				if a.Stop { // a separate input node; its value is a copy, set before each run
					c, err := G.CloneValue(v)
					if err != nil {
						return nil, err
					}
					v = c
				}
				table[*a.Param] = paramNode(pr.g, v, s.dt, name)
			}
			args[i] = table[*a.Param]
		case a.Array != nil:
			v, err := decodeValue(a.Array, s.dt)
			if err != nil {
				return nil, err
			}
			args[i] = paramNode(pr.g, v, s.dt, fmt.Sprintf("const%d", i))
			pr.consts = append(pr.consts, args[i])
		default:
			return nil, invalid("loss argument %d is neither a param nor an array", i)
		}
	}
	if len(args) != def.arity {
		return nil, invalid("op %s takes %d arguments, got %d", spec.Op, def.arity, len(args))
	}
	y, err := def.fn(args)
	if err != nil {
		return nil, err
	}
	if spec.Weights != nil {
		w, err := decodeValue(spec.Weights, s.dt)
		if err != nil {
			return nil, err
		}
		pr.weights = paramNode(pr.g, w, s.dt, "weights")
		if y, err = G.HadamardProd(y, pr.weights); err != nil {
			return nil, err
		}
	}
	if !y.IsScalar() {
		if y, err = G.Sum(y); err != nil {
			return nil, err
		}
	}
	pr.loss = y
	var learn G.Nodes
	for _, name := range s.names {
		if n := pr.learn[name]; n != nil {
			learn = append(learn, n)
		}
	}
	if len(learn) > 0 {
		if _, err := G.Grad(y, learn...); err != nil {
			return nil, &protoError{"engine_error", "gorgonia.Grad: " + err.Error()}
		}
	}
	pr.m = G.NewTapeMachine(pr.g, G.BindDualValues(learn...))
	return pr, nil
}

// structureKey identifies a loss up to the values of its constant arrays and weights.
func structureKey(spec lossSpec) string {
	key := spec.Op
	for _, a := range spec.Args {
		switch {
		case a.Param != nil:
			key += fmt.Sprintf("|p:%s:%v", *a.Param, a.Stop)
		case a.Array != nil:
			key += fmt.Sprintf("|a:%v", a.Array.Shape)
		}
	}
	if spec.Weights != nil {
		key += fmt.Sprintf("|w:%v", spec.Weights.Shape)
	}
	return key
}

// rebind feeds a compiled program this call's constant arrays and weights (gorgonia.Let).
func (s *session) rebind(pr *program, spec lossSpec) error {
	k := 0
	for _, a := range spec.Args {
		if a.Array == nil {
			continue
		}
		v, err := decodeValue(a.Array, s.dt)
		if err != nil {
			return err
		}
		if err := G.Let(pr.consts[k], v); err != nil {
			return err
		}
		k++
	}
	if spec.Weights != nil {
		v, err := decodeValue(spec.Weights, s.dt)
		if err != nil {
			return err
		}
		return G.Let(pr.weights, v)
	}
	return nil
}

// gradOf returns the gradient Gorgonia stores for parameter name (nil: none).
func (s *session) gradOf(name string) G.Value {
	if s.current == nil || s.current.learn[name] == nil {
		return nil
	}
	g, err := s.current.learn[name].Grad()
	if err != nil {
		return nil
	}
	return g
}

func scaleValue(v G.Value, k float64) error {
	switch x := v.(type) {
	case *tensor.Dense:
		var err error
		if x.Dtype() == tensor.Float32 {
			_, err = tensor.Mul(x, float32(k), tensor.UseUnsafe())
		} else {
			_, err = tensor.Mul(x, k, tensor.UseUnsafe())
		}
		return err
	case *G.F64:
		*x = G.F64(float64(*x) * k)
	case *G.F32:
		*x = G.F32(float32(float64(*x) * k))
	default:
		return fmt.Errorf("cannot scale a %T", v)
	}
	return nil
}

func zeroValue(v G.Value) error {
	switch x := v.(type) {
	case *tensor.Dense:
		x.Zero()
		return nil
	}
	return scaleValue(v, 0)
}

var trainMethods = map[string]func(json.RawMessage) (interface{}, error){
	"train.create": func(raw json.RawMessage) (interface{}, error) {
		var p struct {
			Device string               `json:"device"`
			Dtype  string               `json:"dtype"`
			Params map[string]wireArray `json:"params"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalid("train.create: %v", err)
		}
		if err := checkDevice(p.Device); err != nil {
			return nil, err
		}
		dt, err := dtypeOf(p.Dtype)
		if err != nil {
			return nil, err
		}
		s := &session{dt: dt, values: map[string]G.Value{}, programs: map[string]*program{}}
		for name, a := range p.Params {
			a := a
			v, err := decodeValue(&a, dt)
			if err != nil {
				return nil, err
			}
			s.values[name] = v
			s.names = append(s.names, name)
		}
		sort.Strings(s.names)
		nextSession++
		sid := fmt.Sprintf("s%d", nextSession)
		sessions[sid] = s
		return map[string]interface{}{"session": sid}, nil
	},
	"train.backward": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		var p struct {
			Loss json.RawMessage `json:"loss"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalid("train.backward: %v", err)
		}
		var spec lossSpec
		if err := json.Unmarshal(p.Loss, &spec); err != nil {
			return nil, invalid("train.backward: loss: %v", err)
		}
		key := structureKey(spec)
		pr := s.programs[key]
		if pr == nil {
			if pr, err = s.compile(spec); err != nil {
				return nil, err
			}
			s.programs[key] = pr
		} else if err := s.rebind(pr, spec); err != nil {
			return nil, err
		}
		for name, n := range pr.stopped { // the stopped copy holds the current value
			c, err := G.CloneValue(s.values[name])
			if err != nil {
				return nil, err
			}
			if err := G.Let(n, c); err != nil {
				return nil, err
			}
		}
		pr.m.Reset()
		if err := pr.m.RunAll(); err != nil {
			return nil, &protoError{"engine_error", "TapeMachine.RunAll: " + err.Error()}
		}
		s.current = pr
		vals, _, err := valueData(pr.loss.Value())
		if err != nil {
			return nil, err
		}
		return map[string]interface{}{"loss": encodeScalar(vals[0])}, nil
	},
	"train.grads": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		out := map[string]interface{}{}
		for _, name := range s.names {
			out[name] = nil
			if g := s.gradOf(name); g != nil {
				a, err := encodeValue(g, s.dt)
				if err != nil {
					return nil, err
				}
				out[name] = a
			}
		}
		return map[string]interface{}{"grads": out}, nil
	},
	"train.params": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		out := map[string]interface{}{}
		for _, name := range s.names {
			a, err := encodeValue(s.values[name], s.dt)
			if err != nil {
				return nil, err
			}
			out[name] = a
		}
		return map[string]interface{}{"params": out}, nil
	},
	// Gorgonia has no zero-grad call: the solvers zero the dual values' gradients after a
	// step. Without a step, the adapter zeroes every program's dual-value gradients in place.
	"train.zero_grad": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		for _, pr := range s.programs {
			for _, n := range pr.learn {
				if g, err := n.Grad(); err == nil && g != nil {
					if err := zeroValue(g); err != nil {
						return nil, err
					}
				}
			}
		}
		return map[string]interface{}{}, nil
	},
	// Gorgonia's solvers clip elementwise (WithClip), not by global norm: this is the
	// adapter's own global-norm clipping of the stored gradients.
	"train.clip_grad_norm": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		var p struct {
			MaxNorm json.RawMessage `json:"max_norm"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalid("train.clip_grad_norm: %v", err)
		}
		maxNorm, err := decodeScalar(p.MaxNorm)
		if err != nil {
			return nil, err
		}
		if !(maxNorm >= 0) {
			return nil, invalid("max_norm must be a non-negative number, got %s", string(p.MaxNorm))
		}
		var grads []G.Value
		total := 0.0
		for _, name := range s.names {
			if g := s.gradOf(name); g != nil {
				vals, _, err := valueData(g)
				if err != nil {
					return nil, err
				}
				for _, v := range vals {
					total += v * v
				}
				grads = append(grads, g)
			}
		}
		total = math.Sqrt(total)
		if !math.IsInf(total, 0) && !math.IsNaN(total) && total > maxNorm {
			for _, g := range grads {
				if err := scaleValue(g, maxNorm/total); err != nil {
					return nil, err
				}
			}
		}
		return map[string]interface{}{"total_norm": encodeScalar(total)}, nil
	},
	"train.step": func(raw json.RawMessage) (interface{}, error) {
		s, _, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		var p struct {
			LR float64 `json:"lr"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalid("train.step: %v", err)
		}
		if s.current == nil {
			return map[string]interface{}{}, nil
		}
		var learn G.Nodes
		for _, name := range s.names {
			if n := s.current.learn[name]; n != nil {
				learn = append(learn, n)
			}
		}
		solver := G.NewVanillaSolver(G.WithLearnRate(p.LR))
		if err := solver.Step(G.NodesToValueGrads(learn)); err != nil {
			return nil, &protoError{"engine_error", "VanillaSolver.Step: " + err.Error()}
		}
		return map[string]interface{}{}, nil
	},
	"train.close": func(raw json.RawMessage) (interface{}, error) {
		s, sid, err := getSession(raw)
		if err != nil {
			return nil, err
		}
		for _, pr := range s.programs {
			pr.m.Close()
		}
		delete(sessions, sid)
		return map[string]interface{}{}, nil
	},
}
