package gorgoniacheck

// The wire format of protocol 1 that the model protocol keeps: requests, error answers, numbers
// (non-finite ones as "NaN", "Infinity", "-Infinity") and arrays (base64 of little-endian float64,
// whatever the dtype).

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// protoError is answered as {"type", "message"}.
type protoError struct{ kind, msg string }

func (e *protoError) Error() string { return e.msg }

func invalid(format string, a ...interface{}) error {
	return &protoError{"invalid_request", fmt.Sprintf(format, a...)}
}

func engineErr(err error) error {
	if _, ok := err.(*protoError); ok {
		return err
	}
	return &protoError{"engine_error", err.Error()}
}

// num encodes a float for the wire: non-finite values as "NaN", "Infinity", "-Infinity".
func num(x float64) interface{} {
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

// encodeArray is protocol 1's array: base64 of little-endian float64, whatever the dtype.
func encodeArray(vals []float64, shape []int, dt tensor.Dtype) map[string]interface{} {
	buf := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	if shape == nil {
		shape = []int{}
	}
	return map[string]interface{}{"dtype": dtypeName(dt), "shape": shape, "data": base64.StdEncoding.EncodeToString(buf)}
}
