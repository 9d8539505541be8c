package awssim

import (
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	smithytime "github.com/aws/smithy-go/time"
)

// maxQueryListLen bounds a list in a query request (AWS caps every list far below this).
const maxQueryListLen = 1000

// queryParamError is a malformed query parameter; handlers turn it into the service's
// validation error (EC2 InvalidParameterValue, IAM ValidationError).
type queryParamError struct {
	Param string
	Value string
	Want  string
}

func (e *queryParamError) Error() string {
	return fmt.Sprintf("Value (%s) for parameter %s is invalid. Expected %s.", e.Value, e.Param, e.Want)
}

// queryDecoder fills aws-sdk-go-v2 input structs from a form-encoded query request, using the
// wire names the SDK's serializers use (see zz_generated_wire.go).
type queryDecoder struct {
	values   url.Values
	prefixes map[string]bool
	table    wireTable
}

func newQueryDecoder(values url.Values, table wireTable) *queryDecoder {
	d := &queryDecoder{values: values, prefixes: make(map[string]bool, len(values)*3), table: table}
	for k := range values {
		for i := 0; i < len(k); i++ {
			if k[i] == '.' {
				d.prefixes[k[:i]] = true
			}
		}
		d.prefixes[k] = true
	}
	return d
}

// decode fills out, a pointer to an input struct.
func (d *queryDecoder) decode(out any) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("awssim: decode needs a pointer to a struct, got %T", out)
	}
	return d.decodeStruct(v.Elem(), "")
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (d *queryDecoder) decodeStruct(v reflect.Value, prefix string) error {
	fields, ok := d.table[v.Type().Name()]
	if !ok {
		return nil
	}
	for _, f := range fields {
		fv := v.FieldByName(f.Field)
		if !fv.IsValid() {
			continue
		}
		key := join(prefix, f.Name)
		if err := d.decodeField(fv, key, f); err != nil {
			return err
		}
	}
	return nil
}

func (d *queryDecoder) decodeField(fv reflect.Value, key string, f wireField) error {
	if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() != reflect.Uint8 {
		elemPrefix := key
		if !f.Flat && f.Member != "" {
			elemPrefix = key + "." + f.Member
		}
		if !d.prefixes[elemPrefix] && !d.prefixes[key] {
			return nil
		}
		out := reflect.MakeSlice(fv.Type(), 0, 0)
		for n := 1; n <= maxQueryListLen; n++ {
			k := elemPrefix + "." + strconv.Itoa(n)
			if !d.prefixes[k] {
				break
			}
			elem := reflect.New(fv.Type().Elem()).Elem()
			if err := d.decodeValue(elem, k); err != nil {
				return err
			}
			out = reflect.Append(out, elem)
		}
		fv.Set(out)
		return nil
	}
	return d.decodeValue(fv, key)
}

var timeType = reflect.TypeOf(time.Time{})

func (d *queryDecoder) decodeValue(v reflect.Value, key string) error {
	if !d.prefixes[key] {
		return nil
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if t.Elem().Kind() == reflect.Struct && t.Elem() != timeType {
			p := reflect.New(t.Elem())
			if err := d.decodeStruct(p.Elem(), key); err != nil {
				return err
			}
			v.Set(p)
			return nil
		}
		if _, ok := d.values[key]; !ok {
			return nil
		}
		p := reflect.New(t.Elem())
		if err := d.scalar(p.Elem(), key); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if t.Kind() == reflect.Struct && t != timeType {
		return d.decodeStruct(v, key)
	}
	if _, ok := d.values[key]; !ok {
		return nil
	}
	return d.scalar(v, key)
}

func (d *queryDecoder) scalar(v reflect.Value, key string) error {
	s := d.values.Get(key)
	switch {
	case v.Type() == timeType:
		t, err := smithytime.ParseDateTime(s)
		if err != nil {
			return &queryParamError{Param: key, Value: s, Want: "an ISO 8601 timestamp"}
		}
		v.Set(reflect.ValueOf(t))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil {
			return &queryParamError{Param: key, Value: s, Want: "a boolean"}
		}
		v.SetBool(b)
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return &queryParamError{Param: key, Value: s, Want: "an integer"}
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return &queryParamError{Param: key, Value: s, Want: "a number"}
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		v.SetBytes([]byte(s))
	default:
		// Types the supported operations do not send (documents, unions).
	}
	return nil
}
