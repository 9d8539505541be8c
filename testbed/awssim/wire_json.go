package awssim

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/document"
	smithytime "github.com/aws/smithy-go/time"
	"github.com/aws/smithy-go/traits"
)

// jsonSerializer implements smithy.ShapeSerializer for the JSON protocols (awsJson1_0,
// awsJson1_1 and the body of restJson1). The schema-based aws-sdk-go-v2 clients (SQS,
// EventBridge, SSM, Pricing, EKS) generate Serialize methods for their output types from the
// service model, so the simulator builds SDK output values and lets the model decide the JSON
// member names, timestamp formats and nesting, exactly as the SDK's deserializer expects them.
type jsonSerializer struct {
	buf []byte
	// stack of open containers: inObject is true for structs and maps; first is true until the
	// first member is written.
	stack []jsonFrame
	// keyWritten is set after WriteKey: the next value is a map value and needs no key.
	keyWritten bool
	// useJSONName makes @jsonName override member names (restJson1).
	useJSONName bool
}

type jsonFrame struct {
	inObject bool
	first    bool
}

var _ smithy.ShapeSerializer = (*jsonSerializer)(nil)

func marshalShape(v smithy.Serializable, useJSONName bool) []byte {
	s := &jsonSerializer{useJSONName: useJSONName}
	v.Serialize(s)
	return s.Bytes()
}

func (s *jsonSerializer) Bytes() []byte { return s.buf }

func (s *jsonSerializer) prefix(schema *smithy.Schema) {
	if s.keyWritten {
		s.keyWritten = false
		return
	}
	if len(s.stack) == 0 {
		return
	}
	top := &s.stack[len(s.stack)-1]
	if !top.first {
		s.buf = append(s.buf, ',')
	}
	top.first = false
	if top.inObject && schema != nil {
		name := schema.MemberName()
		if s.useJSONName {
			if jn, ok := smithy.SchemaTrait[*traits.JSONName](schema); ok {
				name = jn.Name
			}
		}
		s.str(name)
		s.buf = append(s.buf, ':')
	}
}

func (s *jsonSerializer) str(v string) {
	b, _ := json.Marshal(v)
	s.buf = append(s.buf, b...)
}

func (s *jsonSerializer) push(open byte, inObject bool) {
	s.buf = append(s.buf, open)
	s.stack = append(s.stack, jsonFrame{inObject: inObject, first: true})
}

func (s *jsonSerializer) pop(closeB byte) {
	s.buf = append(s.buf, closeB)
	s.stack = s.stack[:len(s.stack)-1]
}

func (s *jsonSerializer) WriteInt8(sc *smithy.Schema, v int8)   { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt16(sc *smithy.Schema, v int16) { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt32(sc *smithy.Schema, v int32) { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt64(sc *smithy.Schema, v int64) {
	s.prefix(sc)
	s.buf = strconv.AppendInt(s.buf, v, 10)
}
func (s *jsonSerializer) WriteFloat32(sc *smithy.Schema, v float32) { s.WriteFloat64(sc, float64(v)) }
func (s *jsonSerializer) WriteFloat64(sc *smithy.Schema, v float64) {
	s.prefix(sc)
	switch {
	case math.IsInf(v, 1):
		s.buf = append(s.buf, `"Infinity"`...)
	case math.IsInf(v, -1):
		s.buf = append(s.buf, `"-Infinity"`...)
	case math.IsNaN(v):
		s.buf = append(s.buf, `"NaN"`...)
	default:
		s.buf = strconv.AppendFloat(s.buf, v, 'f', -1, 64)
	}
}
func (s *jsonSerializer) WriteBool(sc *smithy.Schema, v bool) {
	s.prefix(sc)
	s.buf = strconv.AppendBool(s.buf, v)
}
func (s *jsonSerializer) WriteString(sc *smithy.Schema, v string) {
	s.prefix(sc)
	s.str(v)
}
func (s *jsonSerializer) WriteBigInt(sc *smithy.Schema, v *big.Int) {
	s.prefix(sc)
	s.buf = append(s.buf, v.String()...)
}
func (s *jsonSerializer) WriteBigFloat(sc *smithy.Schema, v *big.Float) {
	s.prefix(sc)
	s.buf = append(s.buf, v.Text('g', -1)...)
}
func (s *jsonSerializer) WriteBlob(sc *smithy.Schema, v []byte) {
	s.prefix(sc)
	s.str(base64.StdEncoding.EncodeToString(v))
}
func (s *jsonSerializer) WriteTime(sc *smithy.Schema, v time.Time) {
	format := "epoch-seconds"
	if t, ok := smithy.SchemaTrait[*traits.TimestampFormat](sc); ok {
		format = t.Format
	}
	switch format {
	case "date-time":
		s.WriteString(sc, smithytime.FormatDateTime(v))
	case "http-date":
		s.WriteString(sc, smithytime.FormatHTTPDate(v))
	default:
		s.WriteFloat64(sc, smithytime.FormatEpochSeconds(v))
	}
}
func (s *jsonSerializer) WriteUnion(schema, variant *smithy.Schema) {
	s.prefix(schema)
	s.push('{', true)
	s.prefix(variant)
	s.keyWritten = true
}
func (s *jsonSerializer) CloseUnion() {
	s.keyWritten = false
	s.pop('}')
}
func (s *jsonSerializer) WriteDocument(sc *smithy.Schema, v document.Value) {
	s.prefix(sc)
	b, err := json.Marshal(documentToAny(v))
	if err != nil {
		b = []byte("null")
	}
	s.buf = append(s.buf, b...)
}
func (s *jsonSerializer) WriteNil(sc *smithy.Schema) {
	s.prefix(sc)
	s.buf = append(s.buf, "null"...)
}
func (s *jsonSerializer) WriteStruct(sc *smithy.Schema) {
	s.prefix(sc)
	s.push('{', true)
}
func (s *jsonSerializer) CloseStruct() { s.pop('}') }
func (s *jsonSerializer) WriteList(sc *smithy.Schema) {
	s.prefix(sc)
	s.push('[', false)
}
func (s *jsonSerializer) CloseList() { s.pop(']') }
func (s *jsonSerializer) WriteMap(sc *smithy.Schema) {
	s.prefix(sc)
	s.push('{', true)
}
func (s *jsonSerializer) WriteKey(_ *smithy.Schema, key string) {
	top := &s.stack[len(s.stack)-1]
	if !top.first {
		s.buf = append(s.buf, ',')
	}
	top.first = false
	s.str(key)
	s.buf = append(s.buf, ':')
	s.keyWritten = true
}
func (s *jsonSerializer) CloseMap() { s.pop('}') }

func documentToAny(v document.Value) any {
	switch vv := v.(type) {
	case document.Boolean:
		return bool(vv)
	case document.Number:
		return json.Number(vv)
	case document.String:
		return string(vv)
	case document.List:
		out := make([]any, len(vv))
		for i, x := range vv {
			out[i] = documentToAny(x)
		}
		return out
	case document.Map:
		out := make(map[string]any, len(vv))
		for k, x := range vv {
			out[k] = documentToAny(x)
		}
		return out
	}
	return nil
}
