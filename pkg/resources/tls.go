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

// KubeRBACProxyTLSArgs returns kube-rbac-proxy's --tls-min-version and
// --tls-cipher-suites arguments for the cluster TLS security profile.
//
// nil, an unknown type and a Custom type without its custom spec all mean
// Intermediate (the platform default). Ciphers are converted from the
// profile's OpenSSL names to the IANA names Go understands; ciphers Go cannot
// configure are dropped, and TLS 1.3 suites are left out because Go does not
// let them be configured (with a TLS 1.3 minimum only the version is passed).
// When a profile leaves no usable cipher, or names an unknown TLS version,
// the Intermediate profile is used instead: kube-rbac-proxy must never start
// with an empty cipher list.
func KubeRBACProxyTLSArgs(p *configv1.TLSSecurityProfile) []string {
	if args, ok := tlsArgsForSpec(tlsProfileSpec(p)); ok {
		return args
	}
	args, _ := tlsArgsForSpec(configv1.TLSProfiles[configv1.TLSProfileIntermediateType])
	return args
}

// tlsProfileSpec resolves a profile to its spec; nil when it has none.
func tlsProfileSpec(p *configv1.TLSSecurityProfile) *configv1.TLSProfileSpec {
	if p == nil {
		return nil
	}
	if p.Type == configv1.TLSProfileCustomType {
		if p.Custom == nil {
			return nil
		}
		return &p.Custom.TLSProfileSpec
	}
	// Old, Intermediate and Modern are predefined; anything else has no entry.
	return configv1.TLSProfiles[p.Type]
}

// tlsArgsForSpec builds the arguments for spec; false when spec is unusable.
func tlsArgsForSpec(spec *configv1.TLSProfileSpec) ([]string, bool) {
	if spec == nil {
		return nil, false
	}
	minVersion, err := crypto.TLSVersion(string(spec.MinTLSVersion))
	if err != nil {
		return nil, false
	}
	args := []string{"--tls-min-version=" + crypto.TLSVersionToNameOrDie(minVersion)}
	if minVersion >= tls.VersionTLS13 {
		return args, true
	}
	suites := configurableCipherSuites(spec.Ciphers, minVersion)
	if len(suites) == 0 {
		return nil, false
	}
	return append(args, "--tls-cipher-suites="+strings.Join(suites, ",")), true
}

// configurableCipherSuites converts OpenSSL cipher names to the IANA names
// of the suites Go can use below TLS 1.3 at or above minVersion, keeping the
// profile's order (it is the server's preference) and dropping duplicates.
func configurableCipherSuites(openSSLNames []string, minVersion uint16) []string {
	var out []string
	for _, name := range crypto.OpenSSLToIANACipherSuites(openSSLNames) {
		id, err := crypto.CipherSuite(name)
		if err != nil || !negotiableBelowTLS13(id, minVersion) {
			continue
		}
		// The canonical name: some suites have a legacy alias.
		canonical := crypto.CipherSuiteToNameOrDie(id)
		if !slices.Contains(out, canonical) {
			out = append(out, canonical)
		}
	}
	return out
}

// negotiableBelowTLS13 reports whether Go implements suite id for some
// protocol version in [minVersion, TLS 1.3).
func negotiableBelowTLS13(id, minVersion uint16) bool {
	for _, suite := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		if suite.ID != id {
			continue
		}
		return slices.ContainsFunc(suite.SupportedVersions, func(v uint16) bool {
			return v >= minVersion && v < tls.VersionTLS13
		})
	}
	return false
}

// TLSArgs returns kube-rbac-proxy's TLS arguments for d: KubeRBACProxyTLSArgs
// when set, else those of TLSProfile.
func (d Desired) TLSArgs() []string {
	if d.KubeRBACProxyTLSArgs != nil {
		return slices.Clone(d.KubeRBACProxyTLSArgs)
	}
	return KubeRBACProxyTLSArgs(d.TLSProfile)
}

// The kube-rbac-proxy flags that carry a TLS profile.
const (
	flagTLSMinVersion   = "--tls-min-version"
	flagTLSCipherSuites = "--tls-cipher-suites"
)

// KubeRBACProxyTLSArgsOf returns the TLS profile arguments (--tls-min-version,
// --tls-cipher-suites) of ds's kube-rbac-proxy container as they are, in
// their order; none is an empty, non-nil slice. ok is false when there is
// nothing to keep: no DaemonSet or no such container, or an argument
// kube-rbac-proxy would refuse (a version or cipher suite Go does not know, a
// value not given as --flag=value).
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

// predefinedTLSProfiles are the profiles whose arguments a DaemonSet may keep
// while the cluster's profile is unknown, whoever wrote them.
var predefinedTLSProfiles = []configv1.TLSProfileType{
	configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType,
}

// PredefinedTLSArgs reports whether args are kube-rbac-proxy's arguments for
// a predefined TLS profile (Old, Intermediate or Modern) as
// KubeRBACProxyTLSArgs renders them, the flags in any order. Arguments that
// library-go's crypto accepts but no profile has (TLS 1.0 with RC4 suites
// only, say) are not.
func PredefinedTLSArgs(args []string) bool {
	have := slices.Sorted(slices.Values(args))
	for _, t := range predefinedTLSProfiles {
		want := KubeRBACProxyTLSArgs(&configv1.TLSSecurityProfile{Type: t})
		if slices.Equal(have, slices.Sorted(slices.Values(want))) {
			return true
		}
	}
	return false
}

// WroteTLSArgs reports whether ds is the DaemonSet this controller wrote for
// d with kube-rbac-proxy's TLS arguments args: its spec-hash annotation
// (library-go's, recorded with each write) is the hash of that desired spec.
// Someone who edits the arguments leaves the hash of the spec before the
// edit; one who restores them restores its match too.
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
