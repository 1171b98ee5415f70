package testcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// SetControllerConfig makes yaml the controller's config: the data of its
// ConfigMap, which it creates if missing. The update carries no
// resourceVersion, so it is unconditional: the last write wins.
func SetControllerConfig(ctx context.Context, kube kubernetes.Interface, yaml string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.ConfigMapName},
		Data:       map[string]string{resources.ConfigMapKey: yaml},
	}
	configMaps := kube.CoreV1().ConfigMaps(resources.Namespace)
	_, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	return nil
}
