// Package resources owns the runtime extractor's DaemonSet: its desired state and the writes that get it there.
package resources

import (
	"cmp"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/distribution/reference"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/crypto"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// Names shared by the whole controller: its contract with the platform and the insights operator.
const (
	Namespace     = config.Namespace // defined with the config, which this package imports
	DaemonSetName = "insights-runtime-extractor"
	ConfigMapName = config.ConfigMapName // the insights operator's configuration
	ConfigMapKey  = config.ConfigKey     // holds config.yaml

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "insights-operator"
	LabelName      = "app.kubernetes.io/name" // also the DaemonSet's (immutable) pod selector
	NameValue      = "insights-runtime-extractor"

	VersionAnnotation  = "insights.openshift.io/runtime-extractor-version" // on the DaemonSet, not its pod template: shows an upgrade without a roll
	SpecHashAnnotation = "operator.openshift.io/spec-hash"                 // where library-go's resourceapply records the spec's hash

	ServiceAccountName         = "insights-runtime-extractor-sa"  // provided by the platform
	PriorityClassName          = "openshift-user-critical"        // the default; provided by the platform
	KubeRBACProxyConfigMapName = "kube-rbac-proxy"                // kube-rbac-proxy's authorization config
	TLSSecretName              = "insights-runtime-extractor-tls" // kube-rbac-proxy's serving certificate
	FieldManager               = "runtime-extractor-controller"   // of every write this controller makes

	ContainerExtractor     = "extractor"       // privileged: inspects the node's containers through the CRI-O socket
	ContainerExporter      = "exporter"        // serves the extracted data over HTTP on localhost
	ContainerKubeRBACProxy = "kube-rbac-proxy" // authenticates and authorizes access to the exporter

	OSNodeSelectorKey   = "kubernetes.io/os" // with OSNodeSelectorValue: pods stay on Linux, the only OS the extractor supports
	OSNodeSelectorValue = "linux"

	// Event reasons of the manager, restated from library-go's resourceapply so callers do not depend on its format.
	EventReasonCreated = "DaemonSetCreated"
	EventReasonUpdated = "DaemonSetUpdated"
	EventReasonDeleted = "DaemonSetDeleted"
)

// OwnedLabels returns the labels that mark the runtime extractor's objects.
func OwnedLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelName: NameValue}
}

//go:embed manifests/daemonset.yaml
var daemonSetManifest []byte

// parsedManifest is strict: a misspelt field is an error, not a dropped setting.
var parsedManifest = sync.OnceValues(func() (*appsv1.DaemonSet, error) { return parseManifest(daemonSetManifest) })

func parseManifest(raw []byte) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(raw, ds); err != nil {
		return nil, fmt.Errorf("parse embedded daemonset manifest: %w", err)
	}
	// DesiredDaemonSet fills these in place: a manifest edited to lose one fails here, not with a panic there.
	for _, name := range []string{ContainerExtractor, ContainerExporter, ContainerKubeRBACProxy} {
		if findContainer(&ds.Spec.Template.Spec, name) == nil {
			return nil, fmt.Errorf("embedded daemonset manifest: no container %s", name)
		}
	}
	if ds.Spec.Template.Spec.NodeSelector == nil {
		return nil, errors.New("embedded daemonset manifest: no node selector")
	}
	return ds, nil
}

// Desired is everything the desired DaemonSet depends on: an apply computes it from a whole Desired, never a diff.
type Desired struct {
	Images               Images
	Version              string                       // the target release version (VersionAnnotation); "" records none
	TLSProfile           *configv1.TLSSecurityProfile // the cluster's, for kube-rbac-proxy; nil means Intermediate
	KubeRBACProxyTLSArgs []string                     // if not nil (empty: none), replace TLSProfile's: kept from the DaemonSet while it is unreadable
	Scheduling           config.RuntimeExtractor      // the optional settings of config.yaml
}

// DesiredDaemonSet returns the embedded manifest completed from d (tolerations appended, the node selector merged).
func DesiredDaemonSet(d Desired) (*appsv1.DaemonSet, error) {
	manifest, err := parsedManifest()
	if err != nil {
		return nil, fmt.Errorf("desired daemonset: %w", err)
	}
	ds := manifest.DeepCopy()
	podSpec := &ds.Spec.Template.Spec
	var sched config.RuntimeExtractor
	d.Scheduling.DeepCopyInto(&sched) // ds shares no memory with d
	var invalid []error
	for _, setting := range []struct {
		name, image string
		resources   *corev1.ResourceRequirements
		extraArgs   []string
	}{
		{ContainerExtractor, d.Images.Extractor, sched.Resources.Extractor, nil},
		{ContainerExporter, d.Images.Exporter, sched.Resources.Exporter, nil},
		{ContainerKubeRBACProxy, d.Images.KubeRBACProxy, sched.Resources.KubeRBACProxy, d.TLSArgs()},
	} {
		if err := ValidateImage(setting.image); err != nil {
			invalid = append(invalid, fmt.Errorf("container %s: %w", setting.name, err))
			continue
		}
		c := findContainer(podSpec, setting.name) // parsedManifest checked all three are there
		c.Image = setting.image
		c.Args = append(c.Args, setting.extraArgs...)
		if setting.resources != nil {
			c.Resources = *setting.resources
		}
	}
	if len(invalid) > 0 {
		return nil, fmt.Errorf("desired daemonset: %w", errors.Join(invalid...))
	}
	if d.Version != "" {
		metav1.SetMetaDataAnnotation(&ds.ObjectMeta, VersionAnnotation, d.Version)
	}
	podSpec.Tolerations = append(podSpec.Tolerations, sched.Tolerations...)
	maps.Copy(podSpec.NodeSelector, sched.NodeSelector)           // parsedManifest checked it is set
	podSpec.NodeSelector[OSNodeSelectorKey] = OSNodeSelectorValue // last: no configuration moves the extractor off Linux
	podSpec.PriorityClassName = cmp.Or(sched.PriorityClassName, podSpec.PriorityClassName)
	return ds, nil
}

func findContainer(podSpec *corev1.PodSpec, name string) *corev1.Container {
	if i := slices.IndexFunc(podSpec.Containers, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
		return &podSpec.Containers[i]
	}
	return nil
}

// Rollout is what a DaemonSet's status says of its rollout.
type Rollout struct {
	Present                        bool // there is a DaemonSet
	Desired, Updated, Available    int32
	Generation, ObservedGeneration int64
}

// RolloutOf reads ds's rollout (the zero Rollout for nil).
func RolloutOf(ds *appsv1.DaemonSet) Rollout {
	if ds == nil {
		return Rollout{}
	}
	s := ds.Status
	return Rollout{Present: true, Desired: s.DesiredNumberScheduled, Updated: s.UpdatedNumberScheduled,
		Available: s.NumberAvailable, Generation: ds.Generation, ObservedGeneration: s.ObservedGeneration}
}

// Complete reports whether the generation is observed and on every node that should run a pod (kubectl rollout status).
func (r Rollout) Complete() bool {
	return r.Present && r.ObservedGeneration >= r.Generation && r.Updated >= r.Desired
}

// FullyAvailable reports whether the DaemonSet is rolled out and every node that should run a pod has an available one.
func (r Rollout) FullyAvailable() bool { return r.Complete() && r.Available >= r.Desired }

// Unavailable is how many nodes that should run a pod have no available one.
func (r Rollout) Unavailable() int32 { return max(r.Desired-r.Available, 0) }

// MaxUnavailable resolves a rolling update's maxUnavailable as the DaemonSet controller does; !ok: OnDelete, bad value.
func MaxUnavailable(ds *appsv1.DaemonSet) (n int32, ok bool) {
	if ds == nil || ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return 0, false
	}
	desired, unset := int(ds.Status.DesiredNumberScheduled), intstr.FromInt32(0)
	r := ptr.Deref(ds.Spec.UpdateStrategy.RollingUpdate, appsv1.RollingUpdateDaemonSet{})
	unavailable, err1 := intstr.GetScaledValueFromIntOrPercent(cmp.Or(r.MaxUnavailable, &unset), desired, true)
	surge, err2 := intstr.GetScaledValueFromIntOrPercent(cmp.Or(r.MaxSurge, &unset), desired, true)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	if desired > 0 && unavailable == 0 && surge == 0 {
		unavailable = 1
	}
	return int32(unavailable), true
}

// Environment variables that carry the images: the release payload rewrites RELATED_IMAGE_* to its digests.
const (
	EnvExtractorImage     = "RELATED_IMAGE_INSIGHTS_RUNTIME_EXTRACTOR"
	EnvExporterImage      = "RELATED_IMAGE_INSIGHTS_RUNTIME_EXPORTER"
	EnvKubeRBACProxyImage = "RELATED_IMAGE_KUBE_RBAC_PROXY"

	// Defaults: the OKD builds the insights operator falls back to outside a payload; mutable tags, run only by choice.
	DefaultExtractorImage     = "quay.io/openshift/origin-insights-runtime-extractor:latest"
	DefaultExporterImage      = "quay.io/openshift/origin-insights-runtime-exporter:latest"
	DefaultKubeRBACProxyImage = "quay.io/openshift/origin-kube-rbac-proxy:latest"
)

// Images are the container images of the DaemonSet, one per container.
type Images struct{ Extractor, Exporter, KubeRBACProxy string }

// DefaultImages returns the default images.
func DefaultImages() Images {
	return Images{Extractor: DefaultExtractorImage, Exporter: DefaultExporterImage, KubeRBACProxy: DefaultKubeRBACProxyImage}
}

// ErrImagesUnset wraps unset variables when defaults are not allowed; ErrInvalidImage wraps ValidateImage's errors.
var ErrImagesUnset, ErrInvalidImage = errors.New("image not set"), errors.New("invalid image reference")

// ImagesFromEnv reads the images through getenv; an unset one is the default only if allowDefaults (never by accident).
func ImagesFromEnv(getenv func(string) string, allowDefaults bool) (Images, error) {
	images := DefaultImages()
	var errs []error
	var unset []string
	for _, v := range []struct {
		env    string
		target *string
	}{
		{EnvExtractorImage, &images.Extractor},
		{EnvExporterImage, &images.Exporter},
		{EnvKubeRBACProxyImage, &images.KubeRBACProxy},
	} {
		value := getenv(v.env)
		switch err := ValidateImage(value); {
		case value == "" && !allowDefaults:
			unset = append(unset, v.env)
		case value != "" && err != nil:
			errs = append(errs, fmt.Errorf("environment variable %s: %w", v.env, err))
		case value != "":
			*v.target = value
		}
	}
	if len(unset) > 0 {
		errs = append(errs, fmt.Errorf("environment variables %s: %w: set each to the image to run, by digest as a "+
			"release payload does, or pass --allow-default-images to run the origin :latest images", strings.Join(unset, ", "), ErrImagesUnset))
	}
	if len(errs) > 0 {
		return Images{}, errors.Join(errs...)
	}
	return images, nil
}

// ValidateImage accepts only a fully qualified image reference: a node resolves a short name by its own registry list.
func ValidateImage(image string) error {
	if image == "" {
		return fmt.Errorf("%w: empty", ErrInvalidImage)
	}
	if _, err := reference.ParseNamed(image); err != nil {
		if errors.Is(err, reference.ErrNameNotCanonical) {
			return fmt.Errorf("%w %q: not fully qualified (want registry/repository[:tag][@digest]): %w", ErrInvalidImage, image, err)
		}
		return fmt.Errorf("%w %q: %w", ErrInvalidImage, image, err)
	}
	return nil
}

// KubeRBACProxyTLSArgs returns kube-rbac-proxy's TLS arguments for p (Intermediate's: nil, unknown, no cipher Go has).
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

// tlsArgsForSpec returns nil for a spec kube-rbac-proxy cannot be given; ciphers keep the profile's (preference) order.
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

// KubeRBACProxyTLSArgsOf returns ds's kube-rbac-proxy TLS arguments in order (none: empty); !ok if absent or refused.
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
			for _, name := range strings.Split(value, ",") { // none: [""], no cipher
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

// PredefinedTLSArgs reports whether args, in any order, are those of Old, Intermediate or Modern: kept while unknown.
func PredefinedTLSArgs(args []string) bool {
	have := slices.Sorted(slices.Values(args))
	predefined := []configv1.TLSProfileType{configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType}
	return slices.ContainsFunc(predefined, func(t configv1.TLSProfileType) bool {
		want := KubeRBACProxyTLSArgs(&configv1.TLSSecurityProfile{Type: t})
		return slices.Equal(have, slices.Sorted(slices.Values(want)))
	})
}

// WroteTLSArgs reports by its spec hash whether ds is what this controller wrote for d with kube-rbac-proxy TLS args.
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
