package gorgoniacheck

// The pipe carries a seed and step sizes, not parameter-sized arrays: a model.line answer has the
// same size for 10 and 10^5 parameters (docs/protocol-model.md). BenchmarkLine measures the time
// per request (two forwards) on a linear model of n parameters.

import (
	"encoding/json"
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// wideBuilder: cost = sum(tanh(w) ⊙ x) with n parameters.
func wideBuilder(n int) Builder {
	return func(dt tensor.Dtype) (*Model, error) {
		g := G.NewGraph()
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(i%7)/7 - 0.4
		}
		w := G.NewVector(g, dt, G.WithShape(n), G.WithName("w"), G.WithValue(dense(dt, []int{n}, vals)))
		x := G.NewVector(g, dt, G.WithShape(n), G.WithName("x"), G.WithValue(dense(dt, []int{n}, vals)))
		return &Model{Cost: G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Tanh(w)), x)))), Learnables: G.Nodes{w}}, nil
	}
}

var lineParams = map[string]interface{}{"dtype": "float64", "t": []float64{0.0009765625, -0.0009765625},
	"direction": map[string]interface{}{"seed": 11, "scope": []interface{}{map[string]interface{}{"name": "w", "scale": 0.5}}}}

var jsonMarshal = json.Marshal

func TestLineAnswerSizeIndependentOfModelSize(t *testing.T) {
	sizes := map[int]int{}
	for _, n := range []int{10, 100000} {
		s := newServer(wideBuilder(n))
		req := fmt.Sprintf(`{"id":1,"method":"model.line","params":%s}`, mustJSON(lineParams))
		ans := s.handle([]byte(req))
		if ans["error"] != nil {
			t.Fatalf("n=%d: %v", n, ans["error"])
		}
		sizes[n] = len(mustJSON(ans))
	}
	t.Logf("model.line answer: %d bytes at 10 parameters, %d at 1e5", sizes[10], sizes[100000])
	if sizes[10] > 300 || sizes[100000] > 300 {
		t.Errorf("model.line answers of %d and %d bytes for 10 and 1e5 parameters: over 300", sizes[10], sizes[100000])
	}
}

func mustJSON(v interface{}) string {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func BenchmarkLine(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := newServer(wideBuilder(n))
			req := []byte(fmt.Sprintf(`{"id":1,"method":"model.line","params":%s}`, mustJSON(lineParams)))
			s.handle(req) // builds and computes the gradient at theta0 once
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.handle(req)
			}
		})
	}
}
