package main

// Wire format of the gradcheck process protocol (docs/protocol.md): arrays are the base64 of
// little-endian float64 values in C order, whatever dtype they belong to; non-finite scalars
// are the strings "NaN", "Infinity", "-Infinity".

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type wireArray struct {
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  string `json:"data"`
}

// protoError is an error answered with a protocol error type.
type protoError struct {
	kind string // unsupported, invalid_request, engine_error, version_mismatch
	msg  string
}

func (e *protoError) Error() string { return e.msg }

func unsupported(format string, a ...interface{}) error {
	return &protoError{"unsupported", fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...interface{}) error {
	return &protoError{"invalid_request", fmt.Sprintf(format, a...)}
}

func dtypeOf(name string) (tensor.Dtype, error) {
	switch name {
	case "float64", "":
		return tensor.Float64, nil
	case "float32":
		return tensor.Float32, nil
	}
	return tensor.Float64, unsupported("dtype %s: the gorgonia adapter computes in float64 and float32", name)
}

func dtypeName(dt tensor.Dtype) string {
	if dt == tensor.Float32 {
		return "float32"
	}
	return "float64"
}

// decodeValues returns the float64 values and the shape of a wire array.
func decodeValues(a *wireArray) ([]float64, []int, error) {
	if a == nil || a.Shape == nil {
		return nil, nil, invalid("array must be {dtype, shape, data}")
	}
	raw, err := base64.StdEncoding.DecodeString(a.Data)
	if err != nil {
		return nil, nil, invalid("array data is not base64: %v", err)
	}
	n := 1
	for _, s := range a.Shape {
		if s < 0 {
			return nil, nil, invalid("array: negative dimension in %v", a.Shape)
		}
		n *= s
	}
	if len(raw) != 8*n {
		return nil, nil, invalid("array: %d bytes for shape %v", len(raw), a.Shape)
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return vals, a.Shape, nil
}

// toValue builds a Gorgonia value of dtype dt: a scalar (*F64 / *F32) for a 0-d array,
// else a *tensor.Dense.
func toValue(vals []float64, shape []int, dt tensor.Dtype) G.Value {
	if len(shape) == 0 {
		if dt == tensor.Float32 {
			return G.NewF32(float32(vals[0]))
		}
		return G.NewF64(vals[0])
	}
	sh := append([]int(nil), shape...)
	if dt == tensor.Float32 {
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
		}
		return tensor.New(tensor.WithShape(sh...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(sh...), tensor.WithBacking(append([]float64(nil), vals...)))
}

func decodeValue(a *wireArray, dt tensor.Dtype) (G.Value, error) {
	vals, shape, err := decodeValues(a)
	if err != nil {
		return nil, err
	}
	return toValue(vals, shape, dt), nil
}

// valueData returns the values (as float64) and shape of a Gorgonia value.
func valueData(v G.Value) ([]float64, []int, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil, &protoError{"engine_error", "node has no value"}
	case *G.F64:
		return []float64{float64(*x)}, []int{}, nil
	case *G.F32:
		return []float64{float64(*x)}, []int{}, nil
	case tensor.Tensor:
		if d, ok := x.(*tensor.Dense); ok && d.IsMaterializable() {
			x = d.Materialize()
		}
		shape := []int(x.Shape().Clone())
		if x.Shape().IsScalar() {
			shape = []int{}
		}
		switch data := x.Data().(type) {
		case []float64:
			return append([]float64(nil), data...), shape, nil
		case []float32:
			out := make([]float64, len(data))
			for i, f := range data {
				out[i] = float64(f)
			}
			return out, shape, nil
		case float64:
			return []float64{data}, shape, nil
		case float32:
			return []float64{float64(data)}, shape, nil
		}
		return nil, nil, &protoError{"engine_error", fmt.Sprintf("unexpected tensor data %T", x.Data())}
	}
	return nil, nil, &protoError{"engine_error", fmt.Sprintf("unexpected value type %T", v)}
}

func encodeFloats(vals []float64, shape []int, dt tensor.Dtype) wireArray {
	buf := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	if shape == nil {
		shape = []int{}
	}
	return wireArray{Dtype: dtypeName(dt), Shape: shape, Data: base64.StdEncoding.EncodeToString(buf)}
}

func encodeValue(v G.Value, dt tensor.Dtype) (wireArray, error) {
	vals, shape, err := valueData(v)
	if err != nil {
		return wireArray{}, err
	}
	return encodeFloats(vals, shape, dt), nil
}

func encodeScalar(x float64) interface{} {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	}
	return x
}

func decodeScalar(raw json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, invalid("scalar must be a number or \"NaN\"/\"Infinity\"/\"-Infinity\", got %s", string(raw))
}
