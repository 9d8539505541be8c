package awssim

import (
	"bytes"
	"encoding/xml"
	"reflect"
	"strconv"
	"time"
)

// xmlEncoder writes aws-sdk-go-v2 output structs as the XML the SDK's query-protocol
// deserializers read, using the element names from zz_generated_wire.go.
type xmlEncoder struct {
	buf   bytes.Buffer
	table wireTable
}

func (e *xmlEncoder) open(name string) {
	e.buf.WriteByte('<')
	e.buf.WriteString(name)
	e.buf.WriteByte('>')
}

func (e *xmlEncoder) close(name string) {
	e.buf.WriteString("</")
	e.buf.WriteString(name)
	e.buf.WriteByte('>')
}

func (e *xmlEncoder) text(s string) {
	_ = xml.EscapeText(&e.buf, []byte(s))
}

// structFields writes the members of a struct value (not its wrapper element).
func (e *xmlEncoder) structFields(v reflect.Value) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	for _, f := range e.table[v.Type().Name()] {
		fv := v.FieldByName(f.Field)
		if !fv.IsValid() {
			continue
		}
		e.field(fv, f)
	}
}

func (e *xmlEncoder) field(fv reflect.Value, f wireField) {
	switch {
	case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() != reflect.Uint8:
		if fv.IsNil() {
			return
		}
		e.open(f.Name)
		member := f.Member
		if member == "" {
			member = "member"
		}
		for i := 0; i < fv.Len(); i++ {
			e.value(fv.Index(i), member, true)
		}
		e.close(f.Name)
	default:
		e.value(fv, f.Name, false)
	}
}

// value writes one element; inList writes zero values too (list items are never omitted).
func (e *xmlEncoder) value(v reflect.Value, name string, inList bool) {
	explicit := inList
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
		explicit = true
	}
	if !explicit && v.IsZero() {
		return
	}
	switch {
	case v.Type() == timeType:
		e.open(name)
		e.text(v.Interface().(time.Time).UTC().Format("2006-01-02T15:04:05.000Z"))
		e.close(name)
	case v.Kind() == reflect.Struct:
		e.open(name)
		e.structFields(v)
		e.close(name)
	case v.Kind() == reflect.String:
		e.open(name)
		e.text(v.String())
		e.close(name)
	case v.Kind() == reflect.Bool:
		e.open(name)
		e.buf.WriteString(strconv.FormatBool(v.Bool()))
		e.close(name)
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		e.open(name)
		e.buf.WriteString(strconv.FormatInt(v.Int(), 10))
		e.close(name)
	case v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64:
		e.open(name)
		e.buf.WriteString(strconv.FormatFloat(v.Float(), 'f', -1, 64))
		e.close(name)
	}
}
