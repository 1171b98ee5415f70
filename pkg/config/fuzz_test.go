package config

import (
	"bytes"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// FuzzParse checks that Parse never panics and that every input is either
// refused with an error or accepted as a configuration that survives a
// marshal/parse round trip unchanged. The seed corpus is the parse tables,
// the documented full example and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.yaml))
	}
	for _, tc := range invalidCases {
		f.Add([]byte(tc.yaml))
	}
	if full, err := os.ReadFile(fullExamplePath); err == nil {
		f.Add(full)
	} else {
		f.Fatalf("read full example: %v", err)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned both a config and the error %q", err)
			}
			if err.Error() == "" {
				t.Fatal("Parse refused the input with an empty error message")
			}
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a config nor an error")
		}

		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of the marshalled config failed: %v\n%s", err, out)
		}
		if !equality.Semantic.DeepEqual(cfg, again) {
			t.Fatalf("round trip changed the config\nfirst:\n%s\nagain:\n%+v", out, again)
		}
		out2, err := yaml.Marshal(again)
		if err != nil {
			t.Fatalf("marshal re-parsed config: %v", err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("marshalling is not stable\nfirst:\n%s\nsecond:\n%s", out, out2)
		}
	})
}
