package resources

import (
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
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
