package gorgoniacheck

// model.line: the cost along a seeded direction (docs/protocol-model.md), the learnables set to
// cast(theta0 + t*u) in place and restored bitwise after each step, also on error.

import (
	"encoding/json"
	"math"
	"strings"
)

type scopeEntry struct {
	Name  string   `json:"name"`
	Start int      `json:"start"`
	Stop  *int     `json:"stop"`
	Scale *float64 `json:"scale"`
}

type direction struct {
	Seed  uint64       `json:"seed"`
	Scope []scopeEntry `json:"scope"`
}

func (s *server) line(raw json.RawMessage) (interface{}, error) {
	bd, err := s.get(raw)
	if err != nil {
		return nil, err
	}
	var p struct {
		Direction direction `json:"direction"`
		T         []float64 `json:"t"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("model.line: %v", err)
	}
	type span struct {
		p      *param
		name   string
		a, b   int
		scale  float64
		key    uint64
		theta0 []float64
		grad   []float64
	}
	g, _, err := bd.gradsAt0()
	if err != nil {
		return nil, engineErr(err)
	}
	spans := []span{}
	proj, absTerms, norm2 := 0.0, 0.0, 0.0
	for _, e := range p.Direction.Scope {
		if _, ok := bd.nodes[e.Name]; !ok {
			return nil, invalid("direction names %q, not a learnable (%s)", e.Name, strings.Join(bd.names, ", "))
		}
		pr := bd.param(e.Name)
		sp := span{p: pr, name: e.Name, a: e.Start, b: pr.size(), scale: 1, key: directionKey(p.Direction.Seed, e.Name)}
		if e.Stop != nil {
			sp.b = *e.Stop
		}
		if e.Scale != nil {
			sp.scale = *e.Scale
		}
		if sp.a < 0 || sp.b > pr.size() || sp.a > sp.b {
			return nil, invalid("scope %s [%d, %d) outside its %d elements", e.Name, sp.a, sp.b, pr.size())
		}
		sp.theta0 = pr.floats()
		sp.grad = g[e.Name]
		for j := sp.a; j < sp.b; j++ {
			u := sp.scale * signAt(sp.key, j)
			norm2 += u * u
			if sp.grad != nil {
				proj += u * sp.grad[j]
				absTerms += math.Abs(u * sp.grad[j])
			}
		}
		spans = append(spans, sp)
	}
	saved := bd.save()
	losses := make([]interface{}, len(p.T))
	inexact := 0
	err = func() error {
		defer bd.restore(saved) // bitwise, also on error or panic
		for i, t := range p.T {
			for _, sp := range spans {
				for j := sp.a; j < sp.b; j++ {
					step := t * sp.scale * signAt(sp.key, j)
					if sp.p.set(j, sp.theta0[j]+step)-sp.theta0[j] != step {
						inexact++
					}
				}
			}
			l, err := bd.loss()
			if err != nil {
				return err
			}
			losses[i] = num(l)
			bd.restore(saved)
		}
		return nil
	}()
	if err != nil {
		return nil, engineErr(err)
	}
	return map[string]interface{}{"losses": losses, "projection": num(proj), "abs_terms": num(absTerms),
		"norm2": num(norm2), "inexact": inexact}, nil
}
