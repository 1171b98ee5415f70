package resources

import (
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The IANA names expected for the predefined profiles, written out so the
// test checks the conversion rather than repeating it.
var (
	intermediateArgs = []string{
		"--tls-min-version=VersionTLS12",
		"--tls-cipher-suites=" +
			"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256," +
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," +
			"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	}
	oldArgs = []string{
		"--tls-min-version=VersionTLS10",
		"--tls-cipher-suites=" +
			"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256," +
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," +
			"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256," +
			"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256," +
			"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA," +
			"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA," +
			"TLS_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_256_GCM_SHA384," +
			"TLS_RSA_WITH_AES_128_CBC_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA," +
			"TLS_RSA_WITH_AES_256_CBC_SHA,TLS_RSA_WITH_3DES_EDE_CBC_SHA",
	}
	modernArgs = []string{"--tls-min-version=VersionTLS13"}
)

func custom(minVersion configv1.TLSProtocolVersion, ciphers ...string) *configv1.TLSSecurityProfile {
	return &configv1.TLSSecurityProfile{
		Type: configv1.TLSProfileCustomType,
		Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
			Ciphers:       ciphers,
			MinTLSVersion: minVersion,
		}},
	}
}

func TestKubeRBACProxyTLSArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile *configv1.TLSSecurityProfile
		want    []string
	}{
		{"nil is Intermediate", nil, intermediateArgs},
		{"Intermediate", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType}, intermediateArgs},
		{"Old", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType}, oldArgs},
		{"Modern: TLS 1.3 suites are not configurable", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, modernArgs},
		{"empty type is Intermediate", &configv1.TLSSecurityProfile{}, intermediateArgs},
		{"unknown type is Intermediate", &configv1.TLSSecurityProfile{Type: "Paranoid"}, intermediateArgs},
		{"Custom without spec is Intermediate", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType}, intermediateArgs},
		{
			"Custom: unsupported and TLS 1.3 ciphers dropped, order kept, duplicates removed",
			custom(configv1.VersionTLS12,
				"ECDHE-RSA-AES256-GCM-SHA384",
				"DHE-RSA-AES256-GCM-SHA384", // DHE: not in Go
				"ECDHE-RSA-AES256-SHA384",   // CBC-SHA384: not in Go
				"no-such-cipher",
				"TLS_AES_128_GCM_SHA256", // TLS 1.3 only
				"ECDHE-RSA-AES128-GCM-SHA256",
				"ECDHE-RSA-AES256-GCM-SHA384",
			),
			[]string{
				"--tls-min-version=VersionTLS12",
				"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
			},
		},
		{"Custom: no supported cipher falls back to Intermediate",
			custom(configv1.VersionTLS12, "DHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"), intermediateArgs},
		{"Custom: empty cipher list falls back to Intermediate", custom(configv1.VersionTLS11), intermediateArgs},
		{"Custom: only TLS 1.3 ciphers below TLS 1.3 falls back", custom(configv1.VersionTLS12, "TLS_AES_256_GCM_SHA384"), intermediateArgs},
		{"Custom: unknown minimum version falls back", custom("VersionTLS99", "ECDHE-RSA-AES128-GCM-SHA256"), intermediateArgs},
		{"Custom: TLS 1.3 minimum passes only the version", custom(configv1.VersionTLS13), modernArgs},
		{"Custom: TLS 1.1 with CBC",
			custom(configv1.VersionTLS11, "ECDHE-RSA-AES128-SHA", "AES256-SHA"),
			[]string{"--tls-min-version=VersionTLS11", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,TLS_RSA_WITH_AES_256_CBC_SHA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KubeRBACProxyTLSArgs(tc.profile); !slices.Equal(got, tc.want) {
				t.Errorf("KubeRBACProxyTLSArgs =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

// The predefined profiles must not be altered through the returned args or
// by resolving a profile.
func TestKubeRBACProxyTLSArgsLeavesProfilesAlone(t *testing.T) {
	before := slices.Clone(configv1.TLSProfiles[configv1.TLSProfileOldType].Ciphers)
	KubeRBACProxyTLSArgs(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType})
	if !slices.Equal(before, configv1.TLSProfiles[configv1.TLSProfileOldType].Ciphers) {
		t.Error("the Old profile's cipher list was modified")
	}
}

// withProxyArgs returns the desired DaemonSet whose kube-rbac-proxy has args
// after the manifest's own.
func withProxyArgs(t *testing.T, args ...string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := DesiredDaemonSet(Desired{Images: DefaultImages(), KubeRBACProxyTLSArgs: append([]string{}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestKubeRBACProxyTLSArgsOf: a DaemonSet's TLS arguments are read back as
// they are (order and spelling kept), none is an empty answer that is still
// kept, and anything kube-rbac-proxy would refuse is not kept.
func TestKubeRBACProxyTLSArgsOf(t *testing.T) {
	original := []string{intermediateArgs[1], "--tls-min-version=VersionTLS12"} // the original controller's order
	for _, tc := range []struct {
		name   string
		ds     *appsv1.DaemonSet
		want   []string
		wantOK bool
	}{
		{name: "no DaemonSet"},
		{name: "Modern", ds: withProxyArgs(t, modernArgs...), want: modernArgs, wantOK: true},
		{name: "Old", ds: withProxyArgs(t, oldArgs...), want: oldArgs, wantOK: true},
		{name: "original order", ds: withProxyArgs(t, original...), want: original, wantOK: true},
		{name: "none", ds: withProxyArgs(t), want: []string{}, wantOK: true},
		{name: "unknown version", ds: withProxyArgs(t, "--tls-min-version=VersionTLS99")},
		{name: "unknown cipher", ds: withProxyArgs(t, "--tls-min-version=VersionTLS12", "--tls-cipher-suites=TLS_NOT_A_SUITE")},
		{name: "empty cipher list", ds: withProxyArgs(t, "--tls-min-version=VersionTLS12", "--tls-cipher-suites=")},
		{name: "value as the next argument", ds: withProxyArgs(t, "--tls-min-version", "VersionTLS13")},
		{name: "no kube-rbac-proxy", ds: func() *appsv1.DaemonSet {
			ds := withProxyArgs(t, modernArgs...)
			ds.Spec.Template.Spec.Containers = slices.DeleteFunc(ds.Spec.Template.Spec.Containers,
				func(c corev1.Container) bool { return c.Name == ContainerKubeRBACProxy })
			return ds
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := KubeRBACProxyTLSArgsOf(tc.ds)
			if ok != tc.wantOK || !slices.Equal(got, tc.want) || (ok && got == nil) {
				t.Errorf("got %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestDesiredKeptTLSArgsWinOverTheProfile: kept arguments replace the
// profile's, exactly; kept "none" adds none; unset, the profile decides.
func TestDesiredKeptTLSArgsWinOverTheProfile(t *testing.T) {
	modern := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	for _, tc := range []struct {
		name string
		d    Desired
		want []string
	}{
		{name: "profile", d: Desired{TLSProfile: modern}, want: modernArgs},
		{name: "kept", d: Desired{TLSProfile: modern, KubeRBACProxyTLSArgs: oldArgs}, want: oldArgs},
		{name: "kept none", d: Desired{TLSProfile: modern, KubeRBACProxyTLSArgs: []string{}}, want: []string{}},
		{name: "neither", d: Desired{}, want: intermediateArgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.d.Images = DefaultImages()
			ds, err := DesiredDaemonSet(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := KubeRBACProxyTLSArgsOf(ds)
			if !slices.Equal(got, tc.want) || !slices.Equal(tc.d.TLSArgs(), tc.want) {
				t.Errorf("DaemonSet has %q, TLSArgs %q; want %q", got, tc.d.TLSArgs(), tc.want)
			}
		})
	}
}

// TestPredefinedTLSArgs: the predefined profiles' arguments, the flags in any
// order, and nothing else: not a weaker version, an extra suite, or none.
func TestPredefinedTLSArgs(t *testing.T) {
	for i, tc := range []struct {
		args []string
		want bool
	}{
		{oldArgs, true},
		{intermediateArgs, true},
		{modernArgs, true},
		{[]string{intermediateArgs[1], intermediateArgs[0]}, true},
		{[]string{"--tls-min-version=VersionTLS10", intermediateArgs[1]}, false},
		{[]string{"--tls-min-version=VersionTLS10", "--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"}, false},
		{[]string{intermediateArgs[0], intermediateArgs[1] + ",TLS_RSA_WITH_RC4_128_SHA"}, false},
		{[]string{intermediateArgs[0]}, false},
		{[]string{}, false},
	} {
		if got := PredefinedTLSArgs(tc.args); got != tc.want {
			t.Errorf("#%d %q: got %v, want %v", i, tc.args, got, tc.want)
		}
	}
}

// TestWroteTLSArgs: the spec-hash annotation of a DaemonSet written for d with
// some arguments matches d with those, and with no others; no annotation, or
// another spec's, matches nothing.
func TestWroteTLSArgs(t *testing.T) {
	custom := []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
	d := Desired{Images: DefaultImages(), Version: "4.21.0"}
	written := withProxyArgs(t, custom...)
	if err := resourceapply.SetSpecHashAnnotation(&written.ObjectMeta, written.Spec); err != nil {
		t.Fatal(err)
	}
	unhashed := withProxyArgs(t, custom...)
	otherImages := d
	otherImages.Images.KubeRBACProxy += "-other"
	for i, tc := range []struct {
		ds   *appsv1.DaemonSet
		d    Desired
		args []string
		want bool
	}{
		{written, d, custom, true},
		{written, d, []string{custom[1], custom[0]}, false}, // not as written
		{written, d, []string{"--tls-min-version=VersionTLS10"}, false},
		{written, d, []string{}, false},
		{written, otherImages, custom, false},
		{unhashed, d, custom, false},
	} {
		got, err := WroteTLSArgs(tc.ds, tc.d, tc.args)
		if err != nil || got != tc.want {
			t.Errorf("#%d %q: got %v, %v; want %v", i, tc.args, got, err, tc.want)
		}
	}
	if _, err := WroteTLSArgs(written, Desired{}, custom); err == nil {
		t.Error("no images: want an error")
	}
}
