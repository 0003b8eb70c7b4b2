package tls13

import (
	"reflect"
	"testing"
	"time"
)

// TestCloneCopiesEveryField: Clone lists the fields by hand (Config holds
// a sync.Once and derived state that must not be copied), so a field
// added to Config and forgotten there is caught here: every exported
// field of a Config with all fields set must survive Clone.
func TestCloneCopiesEveryField(t *testing.T) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Bool:
			fv.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			fv.SetInt(1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			fv.SetUint(1)
		case reflect.String:
			fv.SetString("x")
		case reflect.Array:
			fv.Index(0).Set(reflect.ValueOf(uint8(1)).Convert(fv.Type().Elem()))
		case reflect.Slice:
			fv.Set(reflect.MakeSlice(fv.Type(), 1, 1))
		case reflect.Pointer:
			fv.Set(reflect.New(fv.Type().Elem()))
		case reflect.Func:
			fv.Set(reflect.MakeFunc(fv.Type(), func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, fv.Type().NumOut())
				for j := range out {
					out[j] = reflect.Zero(fv.Type().Out(j))
				}
				return out
			}))
		case reflect.Interface:
			// Set below from values that implement them.
		default:
			t.Fatalf("field %s: kind %s not covered by this test", f.Name, fv.Kind())
		}
	}
	c.ZData = &testZKeys{}
	c.StrikeRegister = NewMemoryStrikeRegister(1, time.Time{})
	c.ClientSessionCache = NewLRUClientSessionCache(1)
	c.KeyLogWriter = &testWriter{}
	c.Rand = &testWriter{}
	n := c.Clone()
	nv := reflect.ValueOf(n).Elem()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		if nv.Field(i).IsZero() {
			t.Errorf("Clone drops Config.%s", f.Name)
		}
	}
}

type testWriter struct{}

func (*testWriter) Write(p []byte) (int, error) { return len(p), nil }
func (*testWriter) Read(p []byte) (int, error)  { return len(p), nil }
