// Gorgonia: LogSumExp returns log(sum(exp(a - max)) + max), not log(sum(exp(a - max))) + max:
// the forward is wrong (so is every gradient through it).
//
// Standalone: gorgonia.org/gorgonia and gorgonia.org/tensor only.
// `go run ./upstream/logsumexp_adds_max_inside_log` (from adapters/gorgonia: its go.mod pins
// gorgonia v0.9.18, tensor v0.9.24).
//
// LogSumExp (operations.go) adds the max back before taking the log.  Along axis 1
// of a matrix it does not build at all (a - max is not broadcast); this program shows the
// vector case.
// Exact (closed form): log(e + e^2 + e^3) = 3 + log(1 + e^-1 + e^-2) = 3.40760596444438030...
// Last line: REPRODUCES while the bug is there, FIXED once the value is right.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func main() {
	g := G.NewGraph()
	a := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("a"),
		G.WithValue(tensor.New(tensor.WithBacking([]float64{1, 2, 3}))))
	y, err := G.LogSumExp(a, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "LogSumExp:", err)
		os.Exit(1)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Fprintln(os.Stderr, "RunAll:", err)
		os.Exit(1)
	}
	got := y.Value().Data().(float64)
	exact := 3 + math.Log1p(math.Exp(-1)+math.Exp(-2))
	s := math.Exp(-2) + math.Exp(-1) + 1
	fmt.Println(versions())
	fmt.Printf("LogSumExp([1 2 3]): gorgonia %.17g, exact log(e + e^2 + e^3) = %.17g\n", got, exact)
	fmt.Printf("log(sum(exp(a - max)) + max) = %.17g (what gorgonia computes)\n", math.Log(s+3))
	if math.Abs(got-exact) > 1e-14*math.Abs(exact) {
		fmt.Println("REPRODUCES")
	} else {
		fmt.Println("FIXED")
	}
}

// versions reports the Go toolchain and the gorgonia and tensor modules this binary was built with.
func versions() string {
	s := "go unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		s = "go " + info.GoVersion
		for _, d := range info.Deps {
			if d.Path == "gorgonia.org/gorgonia" || d.Path == "gorgonia.org/tensor" {
				s += ", " + d.Path + " " + d.Version
			}
		}
	}
	return s
}
