package runtimeextractor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientInformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
)

// Example wires the controller exactly as the original controller's Usage section
// does; only the import path and the tlsProfile argument (nil: Intermediate) differ.
func Example() {
	// What an operator already has: a client, a recorder, its config notifier and
	// the channel it signals cluster version updates on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeClient := fake.NewClientset()
	eventRecorder := events.NewInMemoryRecorder("insights-operator", clock.RealClock{})
	configNotifier := config.NewSource(kubeClient, eventRecorder)
	go configNotifier.Run(ctx)
	updateCh := make(chan struct{})
	informerTimeout := 10 * time.Minute

	// Create informer factory for watching resources
	informerFactory := clientInformers.NewSharedInformerFactoryWithOptions(
		kubeClient,
		informerTimeout,
		clientInformers.WithNamespace("openshift-insights"),
	)

	// Create resource informer
	resourceInformer, err := runtimeextractor.NewResourceInformer(
		eventRecorder,
		informerFactory,
	)
	if err != nil {
		panic(err)
	}

	// Create controller
	controller := runtimeextractor.NewRuntimeExtractorController(
		configNotifier,
		updateCh,
		nil, // tlsProfile: nil means the Intermediate profile
		kubeClient,
		eventRecorder,
		resourceInformer,
	)

	// Start informers and controller
	go informerFactory.Start(ctx.Done())
	go resourceInformer.Run(ctx, 1)
	go controller.Run(ctx)

	// The controller deploys the DaemonSet, since nothing disables it.
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kubeClient.AppsV1().DaemonSets("openshift-insights").Get(ctx, "insights-runtime-extractor", metav1.GetOptions{})
		return err == nil, nil
	})
	ds, err := kubeClient.AppsV1().DaemonSets("openshift-insights").Get(ctx, "insights-runtime-extractor", metav1.GetOptions{})
	if err != nil {
		fmt.Println("not deployed:", err)
		return
	}
	fmt.Println("deployed", ds.Namespace+"/"+ds.Name, "with containers", len(ds.Spec.Template.Spec.Containers))
	// Output: deployed openshift-insights/insights-runtime-extractor with containers 3
}
