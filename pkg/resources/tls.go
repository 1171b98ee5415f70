package resources

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/crypto"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
)

// KubeRBACProxyTLSArgs returns kube-rbac-proxy's TLS arguments for the cluster TLS profile; nil, unknown and
// Custom-without-spec mean Intermediate, the platform default. Go cannot configure TLS 1.3 suites, so they and
// ciphers Go lacks are dropped; a profile left with none, or an unknown version, is Intermediate (never an empty list).
func KubeRBACProxyTLSArgs(p *configv1.TLSSecurityProfile) []string {
	if p != nil {
		spec := configv1.TLSProfiles[p.Type] // Old, Intermediate and Modern are predefined, others nil
		if p.Type == configv1.TLSProfileCustomType && p.Custom != nil {
			spec = &p.Custom.TLSProfileSpec
		}
		if args := tlsArgsForSpec(spec); args != nil {
			return args
		}
	}
	return tlsArgsForSpec(configv1.TLSProfiles[configv1.TLSProfileIntermediateType])
}

// tlsArgsForSpec returns nil for a spec kube-rbac-proxy cannot be given. Ciphers become the canonical IANA names
// of the suites Go can use in [minVersion, TLS 1.3), in the profile's (preference) order, without duplicates.
func tlsArgsForSpec(spec *configv1.TLSProfileSpec) []string {
	if spec == nil {
		return nil
	}
	minVersion, err := crypto.TLSVersion(string(spec.MinTLSVersion))
	if err != nil {
		return nil
	}
	args := []string{flagTLSMinVersion + "=" + crypto.TLSVersionToNameOrDie(minVersion)}
	if minVersion >= tls.VersionTLS13 {
		return args
	}
	negotiable := slices.DeleteFunc(slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()), func(s *tls.CipherSuite) bool {
		return !slices.ContainsFunc(s.SupportedVersions, func(v uint16) bool { return v >= minVersion && v < tls.VersionTLS13 })
	})
	var suites []string
	for _, name := range crypto.OpenSSLToIANACipherSuites(spec.Ciphers) {
		id, err := crypto.CipherSuite(name)
		if err != nil || !slices.ContainsFunc(negotiable, func(s *tls.CipherSuite) bool { return s.ID == id }) {
			continue
		}
		if canonical := crypto.CipherSuiteToNameOrDie(id); !slices.Contains(suites, canonical) {
			suites = append(suites, canonical)
		}
	}
	if len(suites) == 0 {
		return nil
	}
	return append(args, flagTLSCipherSuites+"="+strings.Join(suites, ","))
}

// TLSArgs returns kube-rbac-proxy's TLS arguments for d.
func (d Desired) TLSArgs() []string {
	if d.KubeRBACProxyTLSArgs != nil {
		return slices.Clone(d.KubeRBACProxyTLSArgs)
	}
	return KubeRBACProxyTLSArgs(d.TLSProfile)
}

const flagTLSMinVersion, flagTLSCipherSuites = "--tls-min-version", "--tls-cipher-suites"

// KubeRBACProxyTLSArgsOf returns the TLS arguments of ds's kube-rbac-proxy in order (none: empty, not nil);
// ok is false without the container, or for an argument it would refuse.
func KubeRBACProxyTLSArgsOf(ds *appsv1.DaemonSet) (args []string, ok bool) {
	if ds == nil {
		return nil, false
	}
	c := findContainer(&ds.Spec.Template.Spec, ContainerKubeRBACProxy)
	if c == nil {
		return nil, false
	}
	args = []string{}
	for _, arg := range c.Args {
		flag, value, hasValue := strings.Cut(arg, "=")
		switch flag {
		case flagTLSMinVersion:
			if _, err := crypto.TLSVersion(value); !hasValue || err != nil {
				return nil, false
			}
		case flagTLSCipherSuites:
			if !hasValue || value == "" {
				return nil, false
			}
			for _, name := range strings.Split(value, ",") {
				if _, err := crypto.CipherSuite(name); err != nil {
					return nil, false
				}
			}
		default:
			continue
		}
		args = append(args, arg)
	}
	return args, true
}

// PredefinedTLSArgs reports whether args, in any order, are KubeRBACProxyTLSArgs of Old,
// Intermediate or Modern: a DaemonSet may keep these while the cluster's profile is unknown.
func PredefinedTLSArgs(args []string) bool {
	have := slices.Sorted(slices.Values(args))
	predefined := []configv1.TLSProfileType{configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType}
	return slices.ContainsFunc(predefined, func(t configv1.TLSProfileType) bool {
		want := KubeRBACProxyTLSArgs(&configv1.TLSSecurityProfile{Type: t})
		return slices.Equal(have, slices.Sorted(slices.Values(want)))
	})
}

// WroteTLSArgs reports whether ds is what this controller wrote for d with kube-rbac-proxy TLS
// arguments args, by its spec hash: an edit of them leaves the old hash, restoring them restores it.
func WroteTLSArgs(ds *appsv1.DaemonSet, d Desired, args []string) (bool, error) {
	have := ds.Annotations[SpecHashAnnotation]
	if have == "" {
		return false, nil
	}
	d.KubeRBACProxyTLSArgs = append([]string{}, args...) // empty, not nil: no arguments
	want, err := DesiredDaemonSet(d)
	if err != nil {
		return false, fmt.Errorf("desired daemonset with the kept TLS arguments: %w", err)
	}
	if err := resourceapply.SetSpecHashAnnotation(&want.ObjectMeta, want.Spec); err != nil {
		return false, fmt.Errorf("hash the desired spec with the kept TLS arguments: %w", err)
	}
	return want.Annotations[SpecHashAnnotation] == have, nil
}
