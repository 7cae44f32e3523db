package strictjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// ExactFields refuses an object key in data that names a field of v only
// when case is ignored ("Tool" for "tool"). encoding/json matches field
// names case-insensitively, so such a key would be taken for the field, and
// "tool" and "Tool" in one object would silently keep the last; the tool
// contract's refusal discipline treats it as the unknown field it is. It
// walks nested structs, slices and maps; json.RawMessage and interface
// fields are not looked into. Call it on data that Unmarshal accepted; the
// error is a *FieldError naming the key's path.
func ExactFields(data []byte, v any) error {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil // Unmarshal reports malformed input
	}
	return exact(doc, reflect.TypeOf(v), "")
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func exact(doc any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessage {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for key, val := range obj {
			if ft, ok := fields[key]; ok {
				if err := exact(val, ft, join(path, key)); err != nil {
					return err
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(key, name) {
					return &FieldError{Field: join(path, key), Problem: fmt.Sprintf("unknown field (field names are case-sensitive: did you mean %q?)", name)}
				}
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return nil
		}
		for i, val := range arr {
			if err := exact(val, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		for key, val := range obj {
			if err := exact(val, t.Elem(), join(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields maps the JSON names of struct type t's fields, embedded
// structs' fields included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
		case !f.IsExported():
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}
