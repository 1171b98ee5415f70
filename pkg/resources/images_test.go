package resources

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestImagesFromEnvDefaults(t *testing.T) {
	got, err := ImagesFromEnv(envOf(nil), true)
	if err != nil {
		t.Fatalf("ImagesFromEnv: %v", err)
	}
	if got != DefaultImages() {
		t.Errorf("ImagesFromEnv = %+v, want the defaults %+v", got, DefaultImages())
	}
	if _, err := DesiredDaemonSet(Desired{Images: DefaultImages()}); err != nil {
		t.Errorf("a default image is invalid: %v", err)
	}
}

func TestImagesFromEnvOverrides(t *testing.T) {
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	env := map[string]string{
		EnvExtractorImage:     "quay.io/openshift-release-dev/ocp-v4.0-art-dev" + digest,
		EnvExporterImage:      "registry.example.com:5000/insights/exporter:v1.2.3",
		EnvKubeRBACProxyImage: "",
	}
	got, err := ImagesFromEnv(envOf(env), true)
	if err != nil {
		t.Fatalf("ImagesFromEnv: %v", err)
	}
	want := Images{
		Extractor:     env[EnvExtractorImage],
		Exporter:      env[EnvExporterImage],
		KubeRBACProxy: DefaultKubeRBACProxyImage, // empty means unset
	}
	if got != want {
		t.Errorf("ImagesFromEnv = %+v, want %+v", got, want)
	}
}

func TestImagesFromEnvRejectsInvalid(t *testing.T) {
	for _, value := range []string{
		"busybox",                        // short name, resolved by node config
		"quay.io/openshift/UPPER:latest", // uppercase repository
		"quay.io/openshift/exporter:bad tag",
		"quay.io/openshift/exporter@sha256:abc", // truncated digest
		"quay.io/openshift/exporter:",
		" quay.io/openshift/exporter:latest",
	} {
		for _, env := range []string{EnvExtractorImage, EnvExporterImage, EnvKubeRBACProxyImage} {
			got, err := ImagesFromEnv(envOf(map[string]string{env: value}), true)
			if err == nil {
				t.Errorf("%s=%q accepted", env, value)
				continue
			}
			if !strings.Contains(err.Error(), env) || !strings.Contains(err.Error(), value) {
				t.Errorf("%s=%q: error %q names neither the variable nor the value", env, value, err)
			}
			if got != (Images{}) {
				t.Errorf("%s=%q: partial result %+v returned with the error", env, value, got)
			}
		}
	}
}

func TestImagesFromEnvReportsEveryBadVariable(t *testing.T) {
	_, err := ImagesFromEnv(envOf(map[string]string{EnvExtractorImage: "bad ref", EnvKubeRBACProxyImage: "also bad"}), true)
	if err == nil {
		t.Fatal("invalid images accepted")
	}
	for _, env := range []string{EnvExtractorImage, EnvKubeRBACProxyImage} {
		if !strings.Contains(err.Error(), env) {
			t.Errorf("error %q does not name %s", err, env)
		}
	}
}

func TestImagesFromEnvRefusesUnsetWithoutOptIn(t *testing.T) {
	all := []string{EnvExtractorImage, EnvExporterImage, EnvKubeRBACProxyImage}
	const pinned = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name      string
		env       map[string]string
		wantNamed []string
	}{
		{"none set", nil, all},
		{"one empty", map[string]string{EnvExtractorImage: pinned, EnvExporterImage: pinned, EnvKubeRBACProxyImage: ""}, []string{EnvKubeRBACProxyImage}},
		{"one missing, one invalid", map[string]string{EnvExtractorImage: pinned, EnvExporterImage: "bad ref"}, []string{EnvExporterImage, EnvKubeRBACProxyImage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ImagesFromEnv(envOf(tc.env), false)
			if err == nil {
				t.Fatalf("ImagesFromEnv = %+v, want an error: a default image would be used", got)
			}
			if got != (Images{}) {
				t.Errorf("partial result %+v returned with the error", got)
			}
			for _, env := range all {
				if named := strings.Contains(err.Error(), env); named != slices.Contains(tc.wantNamed, env) {
					t.Errorf("error %q: names %s = %v, want %v", err, env, named, !named)
				}
			}
			if !errors.Is(err, ErrImagesUnset) {
				t.Errorf("error %q does not wrap ErrImagesUnset", err)
			}
			if !strings.Contains(err.Error(), "--allow-default-images") {
				t.Errorf("error %q does not say how to opt in", err)
			}
		})
	}

	env := map[string]string{EnvExtractorImage: pinned, EnvExporterImage: pinned, EnvKubeRBACProxyImage: pinned}
	got, err := ImagesFromEnv(envOf(env), false)
	if err != nil || got != (Images{Extractor: pinned, Exporter: pinned, KubeRBACProxy: pinned}) {
		t.Errorf("every variable set: ImagesFromEnv = %+v, %v; want the three images", got, err)
	}
}
