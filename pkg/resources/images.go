package resources

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// Environment variables that carry the images: the release payload rewrites RELATED_IMAGE_* to its digests.
const (
	EnvExtractorImage     = "RELATED_IMAGE_INSIGHTS_RUNTIME_EXTRACTOR"
	EnvExporterImage      = "RELATED_IMAGE_INSIGHTS_RUNTIME_EXPORTER"
	EnvKubeRBACProxyImage = "RELATED_IMAGE_KUBE_RBAC_PROXY"
)

// Default images: the OKD builds the insights operator falls back to outside a payload; mutable tags, run only by choice.
const (
	DefaultExtractorImage     = "quay.io/openshift/origin-insights-runtime-extractor:latest"
	DefaultExporterImage      = "quay.io/openshift/origin-insights-runtime-exporter:latest"
	DefaultKubeRBACProxyImage = "quay.io/openshift/origin-kube-rbac-proxy:latest"
)

// Images are the container images of the DaemonSet, one per container.
type Images struct {
	Extractor     string
	Exporter      string
	KubeRBACProxy string
}

// DefaultImages returns the default images.
func DefaultImages() Images {
	return Images{Extractor: DefaultExtractorImage, Exporter: DefaultExporterImage, KubeRBACProxy: DefaultKubeRBACProxyImage}
}

// ErrImagesUnset is wrapped when a variable is unset and defaults are not allowed.
var ErrImagesUnset = errors.New("image not set")

// ErrInvalidImage is wrapped by every error of ValidateImage.
var ErrInvalidImage = errors.New("invalid image reference")

// ImagesFromEnv reads the images through getenv. An unset or empty variable selects the default if allowDefaults,
// else is an error (no one runs the privileged extractor from a :latest tag nobody chose). An error returns no images.
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
		if value == "" {
			if !allowDefaults {
				unset = append(unset, v.env)
			}
			continue
		}
		if err := ValidateImage(value); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: %w", v.env, err))
			continue
		}
		*v.target = value
	}
	if len(unset) > 0 {
		errs = append(errs, fmt.Errorf("environment variables %s: %w: set each to the image to run, by digest "+
			"as a release payload does, or pass --allow-default-images to run the origin :latest images",
			strings.Join(unset, ", "), ErrImagesUnset))
	}
	if len(errs) > 0 {
		return Images{}, errors.Join(errs...)
	}
	return images, nil
}

// ValidateImage accepts only a fully qualified image reference: the node resolves a short name
// such as "busybox" through its own registry search list, which would choose the image run.
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

func (i Images) validate() error {
	var errs []error
	for _, c := range []struct{ container, image string }{
		{ContainerExtractor, i.Extractor},
		{ContainerExporter, i.Exporter},
		{ContainerKubeRBACProxy, i.KubeRBACProxy},
	} {
		if err := ValidateImage(c.image); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", c.container, err))
		}
	}
	return errors.Join(errs...)
}
