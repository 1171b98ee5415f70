package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"strings"
	"time"

	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
	releaseversion "github.com/insights-runtime-extractor/controller/pkg/version"
)

// componentName names the Lease (<component>-lock) and the Events' source.
const componentName = "runtime-extractor-controller"

type controllerOptions struct {
	resync          time.Duration
	rolloutDeadline time.Duration
	degradedInertia time.Duration
	clusterOperator string
	defaultImages   bool // --allow-default-images
	repairPolicy    runtimeextractor.RepairPolicy
	// metrics are registered before controllercmd starts (see newControllerCommand)
	// and handed to the controller once this replica leads.
	metrics *metrics.Metrics
}

// serviceAccountNamespaceFile holds the namespace of the pod the process runs
// in; tests replace it.
var serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newControllerCommand returns the controller command. Its collectors go to reg
// (the binary passes component-base's legacy registry, which controllercmd serves
// on /metrics) when the command runs, before controllercmd starts: controllercmd
// serves /metrics while it campaigns for the Lease and calls run only once this
// replica leads, so registering in run would leave a standby without the series.
func newControllerCommand(ctx context.Context, reg prometheus.Registerer) *cobra.Command {
	opts := &controllerOptions{metrics: metrics.New()}
	v := binaryVersion()
	start := func(ctx context.Context, cctx *controllercmd.ControllerContext) error { return run(ctx, cctx, opts) }
	cc := controllercmd.NewControllerCommandConfig(componentName, versionInfo(v), start, clock.RealClock{})
	// The Lease timings stay zero unless a --leader-elect-* flag is given:
	// controllercmd then picks them by control-plane topology (leader.go).

	cmd := cc.NewCommandWithContext(ctx)
	// Our Run gives the Lease a stable identity in a pod (leader.go).
	leader := &leaderCommand{cc: cc, componentName: componentName, start: start, info: versionInfo(v), clock: clock.RealClock{}}
	cmd.Run = leader.run(ctx)
	cmd.Use = componentName
	cmd.Short = "Keep the insights-runtime-extractor DaemonSet in its desired state"
	// Cobra handles --version before PreRunE and Run: it prints and returns, so
	// neither a kubeconfig nor a cluster is needed.
	cmd.Version = v
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := resolveNamespace(cmd.Flags()); err != nil {
			return err
		}
		return metrics.RegisterAll(reg, append(opts.metrics.Collectors(), metrics.NewBuildInfo(v))...)
	}
	flags := cmd.Flags()
	// controllercmd's own descriptions are generic (and say "master configuration
	// file" for --kubeconfig): say what each flag means here.
	for name, usage := range map[string]string{
		"kubeconfig": "kubeconfig of the cluster to manage (default: the in-cluster configuration)",
		"namespace":  "namespace of the Lease and the Events (default: the pod's namespace in a pod, " + resources.Namespace + " outside one)",
		"listen":     "address of /healthz, /readyz and /metrics, served over HTTPS (default: 0.0.0.0:8443)",
		"config":     "a library-go GenericOperatorConfig file (serving certificate, authentication and so on)",
	} {
		if f := flags.Lookup(name); f != nil {
			f.Usage = usage
		}
	}
	flags.DurationVar(&opts.resync, "resync", runtimeextractor.DefaultResync, "period of the level re-assert")
	flags.DurationVar(&opts.rolloutDeadline, "rollout-deadline", runtimeextractor.DefaultRolloutDeadline, "how long a rollout may make no progress before RuntimeExtractorDegraded turns True (RolloutStuck)")
	flags.DurationVar(&opts.degradedInertia, "degraded-inertia", runtimeextractor.DefaultDegradedInertia, "how long an apply or delete must keep failing before RuntimeExtractorDegraded turns True (ApplyFailed, DeleteFailed)")
	opts.repairPolicy = runtimeextractor.DefaultRepairPolicy()
	flags.IntVar(&opts.repairPolicy.Burst, "repair-burst", opts.repairPolicy.Burst, "repairs of someone else's changes the repair budget allows at once")
	flags.DurationVar(&opts.repairPolicy.Every, "repair-every", opts.repairPolicy.Every, "the repair budget allows one more repair per this period")
	flags.DurationVar(&opts.repairPolicy.Settle, "repair-settle", opts.repairPolicy.Settle, "how long a writer that undid a repair must be quiet before its change is repaired")
	flags.StringVar(&opts.clusterOperator, "cluster-operator", status.DefaultClusterOperatorName, "ClusterOperator that receives the RuntimeExtractor* conditions (empty: none)")
	// The library allows the default images; the binary runs the privileged
	// extractor from a :latest tag only when asked to.
	flags.BoolVar(&opts.defaultImages, "allow-default-images", false, "use the origin :latest images for RELATED_IMAGE_* variables that are unset (otherwise every apply fails, Degraded naming them)")
	// Any of the three turns topology detection off; one not given then takes
	// library-go's HA value.
	flags.DurationVar(&cc.LeaseDuration.Duration, "leader-elect-lease-duration", 0, "leader election lease duration (default: "+leaseDefault+")")
	flags.DurationVar(&cc.RenewDeadline.Duration, "leader-elect-renew-deadline", 0, "leader election renew deadline (default: "+renewDefault+")")
	flags.DurationVar(&cc.RetryPeriod.Duration, "leader-elect-retry-period", 0, "leader election retry period (default: "+retryDefault+")")
	flags.BoolVar(&cc.DisableLeaderElection, "disable-leader-election", false, "run without leader election (one replica only)")
	flags.Bool("version", false, "print the version and exit")
	// klog's flags (-v, --vmodule, ...) so the controller's V(2)/V(4) logs can be enabled.
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	flags.AddGoFlagSet(klogFlags)
	return cmd
}

// resolveNamespace fills in an empty --namespace: the pod's namespace (its
// service account's) in a pod, resources.Namespace outside one. controllercmd
// would fall back to openshift-config-managed instead.
func resolveNamespace(flags *pflag.FlagSet) error {
	ns := flags.Lookup("namespace")
	if ns == nil {
		return fmt.Errorf("controllercmd no longer registers --namespace")
	}
	if ns.Value.String() != "" {
		return nil
	}
	detected := resources.Namespace
	if raw, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && strings.TrimSpace(string(raw)) != "" {
		detected = strings.TrimSpace(string(raw))
	}
	return ns.Value.Set(detected)
}

func run(ctx context.Context, cctx *controllercmd.ControllerContext, opts *controllerOptions) error {
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
	versionSource, err := releaseversion.NewSource(kubeClient.Discovery(), configClient, os.Getenv(releaseversion.EnvReleaseVersion))
	if err != nil {
		return err
	}
	// The binary follows the profile; the seed's tlsProfile argument is for a
	// host that restarts itself when it changes.
	tlsSource, err := tlsprofile.NewSource(kubeClient.Discovery(), configClient)
	if err != nil {
		return err
	}

	if p := opts.repairPolicy; !p.Valid() {
		return fmt.Errorf("--repair-burst (%d) must be at least 1, --repair-every (%s) positive, --repair-settle (%s) from 0 to %s (the longest a repair waits for quiet)",
			p.Burst, p.Every, p.Settle, p.MaxDefer)
	}
	controllerOpts := []runtimeextractor.Option{
		runtimeextractor.WithResync(opts.resync),
		runtimeextractor.WithRolloutDeadline(opts.rolloutDeadline),
		runtimeextractor.WithDegradedInertia(opts.degradedInertia),
		runtimeextractor.WithVersionSource(versionSource),
		runtimeextractor.WithTLSProfileSource(tlsSource),
		runtimeextractor.WithMetrics(opts.metrics),
		runtimeextractor.WithDefaultImages(opts.defaultImages),
		runtimeextractor.WithRepairPolicy(opts.repairPolicy),
	}
	if opts.clusterOperator != "" {
		// The Reporter checks what is on the server through a watch of the one
		// ClusterOperator, never a GET.
		reporter := status.NewReporter(configClient.ConfigV1(), opts.clusterOperator)
		coInformers := configinformers.NewSharedInformerFactoryWithOptions(configClient, 0,
			configinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.clusterOperator).String()
			}))
		if err := reporter.Observe(coInformers.Config().V1().ClusterOperators()); err != nil {
			return err
		}
		coInformers.Start(ctx.Done())
		defer coInformers.Shutdown()
		controllerOpts = append(controllerOpts, runtimeextractor.WithStatusReporter(reporter))
	}
	controller := runtimeextractor.NewRuntimeExtractorController(configSource, nil, nil,
		kubeClient, recorder, resourceInformer, controllerOpts...)

	informerFactory.Start(ctx.Done())
	go configSource.Run(ctx)
	go versionSource.Run(ctx)
	go tlsSource.Run(ctx)
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
