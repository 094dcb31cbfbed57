package set_fact

import (
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestValues: names map to values, boolean words become booleans, a
// literal reads as YAML 1.1 reads it (0644 is 420, as PyYAML makes it),
// nested values keep their types, and cacheable is not a fact.
func TestValues(t *testing.T) {
	var a Args
	if err := yaml.Unmarshal([]byte("mode: 0644\nport: 80\nver: 1.20\nratio: 1.5\nok: 'yes'\nno_: false\nlist: [1, '0644']\ncacheable: true\n"), &a); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mode": 420, "port": 80, "ver": 1.2, "ratio": 1.5, "ok": true, "no_": false, "list": []any{1, "0644"}}
	if got := a.Facts(); !reflect.DeepEqual(got, want) || !a.Cacheable {
		t.Errorf("facts %#v cacheable %v, want %#v", got, a.Cacheable, want)
	}
	var empty Args
	if err := empty.Validate(); err == nil {
		t.Error("no facts accepted")
	}
}

// TestRenderedNumbers: a rendered value (a scalar without a tag, as the
// renderer makes "{{ st.stat.mode }}") is a number only in its canonical
// form: "0644" and "1.20" stay strings, as Ansible keeps them.
func TestRenderedNumbers(t *testing.T) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for k, v := range map[string]string{"mode": "0644", "port": "80", "ver": "1.20", "ratio": "1.5"} {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Value: v})
	}
	var a Args
	if err := n.Decode(&a); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mode": "0644", "port": 80, "ver": "1.20", "ratio": 1.5}
	if got := a.Facts(); !reflect.DeepEqual(got, want) {
		t.Errorf("facts %#v, want %#v", got, want)
	}
}
