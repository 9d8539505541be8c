package awssim

import (
	"reflect"
	"strings"
)

func reflectValue(v any) reflect.Value { return reflect.ValueOf(v) }

// typeName is the name of the struct type behind v (a pointer or a value).
func typeName(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.Name()
}

// convertByName copies src into dst (pointers to structs, possibly of different types) field by
// field, matching fields by name and recursing through pointers, structs and slices: it turns
// the SDK's request shapes into the matching response shapes (RequestLaunchTemplateData into
// ResponseLaunchTemplateData, and so on). Fields without a counterpart are left zero.
func convertByName(dst, src any) {
	convertValue(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem())
}

func convertValue(dst, src reflect.Value) {
	if !src.IsValid() {
		return
	}
	if src.Kind() == reflect.Pointer {
		if src.IsNil() {
			return
		}
		if dst.Kind() == reflect.Pointer {
			n := reflect.New(dst.Type().Elem())
			convertValue(n.Elem(), src.Elem())
			dst.Set(n)
			return
		}
		convertValue(dst, src.Elem())
		return
	}
	if dst.Kind() == reflect.Pointer {
		n := reflect.New(dst.Type().Elem())
		convertValue(n.Elem(), src)
		dst.Set(n)
		return
	}
	switch {
	case dst.Kind() == reflect.Struct && src.Kind() == reflect.Struct:
		if dst.Type() == src.Type() {
			dst.Set(src)
			return
		}
		for i := 0; i < dst.NumField(); i++ {
			f := dst.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			sf := src.FieldByName(f.Name)
			if sf.IsValid() {
				convertValue(dst.Field(i), sf)
			}
		}
	case dst.Kind() == reflect.Slice && src.Kind() == reflect.Slice:
		if src.IsNil() {
			return
		}
		out := reflect.MakeSlice(dst.Type(), src.Len(), src.Len())
		for i := 0; i < src.Len(); i++ {
			convertValue(out.Index(i), src.Index(i))
		}
		dst.Set(out)
	case dst.Kind() == reflect.Map && src.Kind() == reflect.Map:
		if src.Type().AssignableTo(dst.Type()) {
			dst.Set(src)
		}
	case dst.Kind() == reflect.String && src.Kind() == reflect.String:
		dst.SetString(src.String())
	case src.Type().ConvertibleTo(dst.Type()) && src.Kind() == dst.Kind():
		dst.Set(src.Convert(dst.Type()))
	}
}

// setPathLabels fills the *string fields of a REST input struct named like the labels of its
// URL path (DescribeCluster's {name} into Name), so recorded calls show the whole request.
func setPathLabels(in any, labels map[string]string) {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	v = v.Elem()
	for label, value := range labels {
		for i := range v.NumField() {
			f := v.Field(i)
			if strings.EqualFold(v.Type().Field(i).Name, label) && f.CanSet() && f.Type() == reflect.TypeFor[*string]() {
				f.Set(reflect.ValueOf(&value))
			}
		}
	}
}
