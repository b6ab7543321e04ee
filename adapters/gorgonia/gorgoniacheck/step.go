package gorgoniacheck

// model.step: the user's training step on a fresh build stamped with theta0, with the true
// gradient computed before each call and what the observed solver received recorded.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

func (s *server) step(raw json.RawMessage) (interface{}, error) {
	bd0, err := s.get(raw)
	if err != nil {
		return nil, err
	}
	var p struct {
		Knobs      map[string]float64 `json:"knobs"`
		Steps      int                `json:"steps"`
		Experiment string             `json:"experiment"`
		Sample     int                `json:"sample"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("model.step: %v", err)
	}
	if bd0.model.Step == nil {
		return nil, &protoError{"unsupported", "the model has no Step (set Model.Step to check the training step)"}
	}
	if p.Steps <= 0 {
		p.Steps = 1
	}
	if p.Sample <= 0 {
		p.Sample = 64
	}
	switch p.Experiment {
	case "", "run":
		p.Experiment = "run"
	case "repeat":
		p.Steps = 2
	default:
		return nil, invalid("experiment %q: run or repeat", p.Experiment)
	}
	bd, err := newBuild(s.builder, bd0.dt, s.stamp) // fresh optimizer state, theta0 stamped in
	if err != nil {
		return nil, engineErr(fmt.Errorf("rebuilding for the step: %v", err))
	}
	for _, k := range bd.knobs { // a knob made outside the builder outlives the experiment
		k.cur = nil
		defer func(k *knob) { k.cur = nil }(k)
	}
	for name, v := range p.Knobs {
		found := false
		for _, k := range bd.knobs {
			if k.name == name {
				v := v
				k.cur, found = &v, true
			}
		}
		if !found {
			names := []string{}
			for _, k := range bd.knobs {
				names = append(names, k.name)
			}
			sort.Strings(names)
			return nil, invalid("knob %q is not the model's (%s)", name, strings.Join(names, ", "))
		}
	}
	theta0 := bd.save()
	steps := []interface{}{}
	for i := 0; i < p.Steps; i++ {
		if p.Experiment == "repeat" && i > 0 {
			bd.restore(theta0) // parameters only: the dual values, solver state and buffers stay
		}
		rec, err := bd.observedStep(p.Sample)
		if err != nil {
			return nil, engineErr(fmt.Errorf("step %d: %v", i+1, err))
		}
		steps = append(steps, rec)
	}
	return map[string]interface{}{"steps": steps}, nil
}

// observedStep computes the true gradient, calls the user's step and describes what happened.
func (bd *build) observedStep(sample int) (map[string]interface{}, error) {
	g, _, err := bd.freshGrads()
	if err != nil {
		return nil, fmt.Errorf("the true gradient: %v", err)
	}
	before := bd.values()
	for _, o := range bd.observers {
		o.reset()
	}
	logged, err := bd.callStep()
	if err != nil {
		return nil, err
	}
	after := bd.values()
	var norm interface{}
	if logged.GradNorm != nil {
		norm = num(*logged.GradNorm)
	}
	which := "pre_clip"
	if logged.PostClip {
		which = "post_clip"
	}
	tensors := map[string]interface{}{}
	for _, name := range bd.names {
		grad := g[name]
		if grad == nil {
			grad = make([]float64, len(before[name]))
		}
		applied, present := bd.applied(name)
		delta := make([]float64, len(before[name]))
		for j := range delta {
			delta[j] = after[name][j] - before[name][j]
		}
		e := map[string]interface{}{
			"grad_sumsq": num(dot(grad, grad)), "applied_present": present,
			"delta_sumsq": num(dot(delta, delta)), "delta_dot_grad": num(dot(delta, grad)),
		}
		if present && len(applied) == len(grad) {
			e["applied_sumsq"] = num(dot(applied, applied))
			e["applied_dot_grad"] = num(dot(applied, grad))
			e["delta_dot_applied"] = num(dot(delta, applied))
		} else {
			present = false
			e["applied_present"] = false
			e["applied_sumsq"], e["applied_dot_grad"], e["delta_dot_applied"] = 0.0, 0.0, 0.0
		}
		pick := func(v []float64) []float64 { return v }
		if n := len(grad); n > sample {
			idx := sampleIndices(n, sample)
			e["index"] = idx
			pick = func(v []float64) []float64 {
				out := make([]float64, len(idx))
				for m, i := range idx {
					out[m] = v[i]
				}
				return out
			}
		}
		flat := func(v []float64) map[string]interface{} {
			w := pick(v)
			return encodeArray(w, []int{len(w)}, bd.dt)
		}
		e["theta"], e["grad"], e["delta"] = flat(before[name]), flat(grad), flat(delta)
		if present {
			e["applied"] = flat(applied)
		}
		tensors[name] = e
	}
	return map[string]interface{}{"logged": map[string]interface{}{"grad_norm": norm, "which": which},
		"tensors": tensors}, nil
}

func (bd *build) callStep() (l Logged, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Model.Step panicked: %v", r)
		}
	}()
	return bd.model.Step()
}

// applied: what the observed solver(s) received under name in the last step.
func (bd *build) applied(name string) ([]float64, bool) {
	for _, o := range bd.observers {
		if v, ok := o.applied(name); ok {
			return v, true
		}
	}
	return nil, false
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
