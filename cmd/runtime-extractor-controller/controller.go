package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/version"
	kversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/version/verflag"
)

// componentName names the Lease (<component>-lock) and the Events' source.
const componentName = "runtime-extractor-controller"

type controllerOptions struct {
	resync          time.Duration
	clusterOperator string
}

func newControllerCommand(ctx context.Context) *cobra.Command {
	opts := &controllerOptions{}
	cc := controllercmd.NewControllerCommandConfig(componentName, kversion.Info{GitVersion: "v0.1.0"},
		func(ctx context.Context, cctx *controllercmd.ControllerContext) error { return run(ctx, cctx, opts) },
		clock.RealClock{})
	// OpenShift's HA defaults (137 s lease) make a restarted process wait minutes
	// for its predecessor's lease; these flags let tests and small clusters choose.
	cc.LeaseDuration = metav1.Duration{Duration: 137 * time.Second}
	cc.RenewDeadline = metav1.Duration{Duration: 107 * time.Second}
	cc.RetryPeriod = metav1.Duration{Duration: 26 * time.Second}

	cmd := cc.NewCommandWithContext(ctx)
	cmd.Use = componentName
	cmd.Short = "Keep the insights-runtime-extractor DaemonSet in its desired state"
	flags := cmd.Flags()
	// Outside a pod there is no namespace to auto-detect; the controller's home is
	// known, so default to it.
	if ns := flags.Lookup("namespace"); ns != nil {
		_ = ns.Value.Set(resources.Namespace)
		ns.DefValue = resources.Namespace
	}
	flags.DurationVar(&opts.resync, "resync", runtimeextractor.DefaultResync, "period of the level re-assert")
	flags.StringVar(&opts.clusterOperator, "cluster-operator", status.DefaultClusterOperatorName, "ClusterOperator that receives the RuntimeExtractor* conditions (empty: none)")
	flags.DurationVar(&cc.LeaseDuration.Duration, "leader-elect-lease-duration", cc.LeaseDuration.Duration, "leader election lease duration")
	flags.DurationVar(&cc.RenewDeadline.Duration, "leader-elect-renew-deadline", cc.RenewDeadline.Duration, "leader election renew deadline")
	flags.DurationVar(&cc.RetryPeriod.Duration, "leader-elect-retry-period", cc.RetryPeriod.Duration, "leader election retry period")
	flags.BoolVar(&cc.DisableLeaderElection, "disable-leader-election", false, "run without leader election (one replica only)")
	verflag.AddFlags(flags)
	// klog's flags (-v, --vmodule, ...) so the controller's V(2)/V(4) logs can be enabled.
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	flags.AddGoFlagSet(klogFlags)
	return cmd
}

func run(ctx context.Context, cctx *controllercmd.ControllerContext, opts *controllerOptions) error {
	if cctx.OperatorNamespace == "" || cctx.OperatorNamespace == "openshift-config-managed" {
		cctx.OperatorNamespace = resources.Namespace
	}
	kubeClient, err := kubernetes.NewForConfig(withRateLimits(cctx.ProtoKubeConfig))
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	configClient, err := configclient.NewForConfig(withRateLimits(cctx.KubeConfig))
	if err != nil {
		return fmt.Errorf("config client: %w", err)
	}
	recorder := cctx.EventRecorder

	informerFactory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithNamespace(resources.Namespace))
	resourceInformer, err := runtimeextractor.NewResourceInformer(recorder, informerFactory)
	if err != nil {
		return err
	}
	configSource := config.NewSource(kubeClient, recorder)
	versionSource, err := version.NewSource(kubeClient.Discovery(), configClient, os.Getenv(version.EnvReleaseVersion))
	if err != nil {
		return err
	}

	m := metrics.New()
	m.RegisterLegacy()
	controllerOpts := []runtimeextractor.Option{
		runtimeextractor.WithResync(opts.resync),
		runtimeextractor.WithVersionSource(versionSource),
		runtimeextractor.WithMetrics(m),
	}
	if opts.clusterOperator != "" {
		controllerOpts = append(controllerOpts, runtimeextractor.WithStatusReporter(status.NewReporter(configClient.ConfigV1(), opts.clusterOperator)))
	}
	controller := runtimeextractor.NewRuntimeExtractorController(configSource, nil, tlsProfile(ctx, configClient),
		kubeClient, recorder, resourceInformer, controllerOpts...)

	informerFactory.Start(ctx.Done())
	go configSource.Run(ctx)
	go versionSource.Run(ctx)
	go resourceInformer.Run(ctx, 1)
	controller.Run(ctx)
	klog.Info("runtime extractor controller stopped")
	return nil
}

// Client-side rate limits. client-go's default (5 QPS, burst 10) spaces a
// drift repair's few requests 200 ms apart once status writes share the budget;
// the controller's traffic is a handful of requests per action, so a modest
// allowance keeps reactions fast without letting a bug flood the API server.
const (
	clientQPS   = 20
	clientBurst = 40
)

func withRateLimits(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	return cfg
}

// tlsProfile reads the cluster's TLS security profile from the APIServer
// "cluster"; without that API or object, nil means Intermediate.
func tlsProfile(ctx context.Context, client configclient.Interface) *configv1.TLSSecurityProfile {
	apiServer, err := client.ConfigV1().APIServers().Get(ctx, "cluster", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		klog.Info("no APIServer cluster object; kube-rbac-proxy uses the Intermediate TLS profile")
		return nil
	case err != nil:
		klog.Warningf("read APIServer cluster TLS profile (using Intermediate): %v", err)
		return nil
	}
	return apiServer.Spec.TLSSecurityProfile
}
