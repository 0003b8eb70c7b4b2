package tls13

import "testing"

func TestParseECHConfigList(t *testing.T) {
	var keys []ECHKey
	for i, name := range []string{"a.example", "b.example"} {
		k, err := GenerateECHKey(uint8(10+i), name, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	list, err := MarshalECHConfigList(keys)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := ParseECHConfigList(list)
	if err != nil || len(infos) != 2 {
		t.Fatalf("%v, %d configs", err, len(infos))
	}
	if infos[0] != (ECHConfigInfo{10, "a.example", true}) || infos[1] != (ECHConfigInfo{11, "b.example", true}) {
		t.Fatalf("%+v", infos)
	}
	if _, err := ParseECHConfigList(list[:len(list)-1]); err == nil {
		t.Fatal("a truncated list parsed")
	}
}
